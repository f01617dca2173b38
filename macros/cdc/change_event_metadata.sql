{#-
    The columns every staging model of a CDC topic carries from its Bronze row: when and
    where the change was committed (`_source_*`, `_is_snapshot`), and where it was
    delivered and when ingested (the transport position, `_ingested_at`, `_batch_id`).
    Used inside a select list over a Bronze CDC table.
-#}
{% macro change_event_metadata() -%}
    {{ return(adapter.dispatch('change_event_metadata', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__change_event_metadata() -%}
    {{ _raise_unsupported_adapter('change_event_metadata') }}
{%- endmacro %}

{% macro spark__change_event_metadata() -%}
    source_committed_at as _source_committed_at,
    source_lsn as _source_lsn,
    source_tx_id as _source_tx_id,
    coalesce(source_snapshot, 'false') != 'false' as _is_snapshot,
    {{ ingestion_metadata() }}
{%- endmacro %}
