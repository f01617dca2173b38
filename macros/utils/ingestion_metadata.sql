{#-
    The columns every staging model carries from its Bronze row about delivery: where
    the record was read (`_topic`, and `_partition`/`_offset` for Kafka or
    `_source_file`/`_line_number` for the landing zone), when it was ingested
    (`_ingested_at`, `_batch_id`), and the Bronze commit that wrote it
    (`_bronze_version`: the source CTE selects `bronze_commit_version()` as
    `_bronze_version`, which the windowed materializations read by). Used inside a
    select list over a Bronze table.
-#}
{% macro ingestion_metadata() -%}
    {{ return(adapter.dispatch('ingestion_metadata', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__ingestion_metadata() -%}
    {{ _raise_unsupported_adapter('ingestion_metadata') }}
{%- endmacro %}

{% macro spark__ingestion_metadata() -%}
    _topic,
    _partition,
    _offset,
    _source_file,
    _line_number,
    _ingested_at,
    _batch_id,
    _bronze_version
{%- endmacro %}
