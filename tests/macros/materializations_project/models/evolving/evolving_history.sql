{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
) }}
{#- on_schema_change only when a run names one: without it, the default applies. -#}
{%- if var('evolving_mode', none) %}{{ config(on_schema_change=var('evolving_mode')) }}{% endif %}

{#- The history of evolving_changes, whatever columns it has. -#}
select * from {{ ref('evolving_changes') }}
