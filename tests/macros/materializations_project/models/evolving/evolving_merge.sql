{{ config(
    materialized='cdc_merge',
    unique_key=['id'],
    sequence_by=['lsn'],
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
    grants=var('evolving_grants', {}),
) }}
{#- on_schema_change only when a run names one: without it, the default applies. -#}
{%- if var('evolving_mode', none) %}{{ config(on_schema_change=var('evolving_mode')) }}{% endif %}

{#- The current state of evolving_changes, whatever columns it has. -#}
select * from {{ ref('evolving_changes') }}
