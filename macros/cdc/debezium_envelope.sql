{#-
    The Debezium envelope of a raw CDC record as a struct, whether the record is bare
    (`{"before":…,"after":…,"source":…,"op":…}`) or wrapped by the JSON converter with
    schemas enabled (`{"schema":…,"payload":{…}}`). `before` and `after` stay JSON text,
    to be parsed with the table's own schema.
-#}
{% macro debezium_envelope(raw_column) -%}
    {{ return(adapter.dispatch('debezium_envelope', 'lakehouse')(raw_column)) }}
{%- endmacro %}

{% macro default__debezium_envelope(raw_column) -%}
    {{ _raise_unsupported_adapter('debezium_envelope') }}
{%- endmacro %}

{% macro spark__debezium_envelope(raw_column) -%}
    from_json(
        coalesce(get_json_object({{ raw_column }}, '$.payload'), {{ raw_column }}),
        'op string, before string, after string, ts_ms bigint, source struct<ts_ms: bigint, lsn: bigint, txId: bigint, sequence: string, snapshot: string, db: string, schema: string, table: string>'
    )
{%- endmacro %}
