{{ config(
    materialized='cdc_merge',
    unique_key=['id'],
    sequence_by=['lsn'],
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
    on_schema_change=var('evolving_mode', 'append_new_columns'),
    grants=var('evolving_grants', {}),
) }}

{#- The current state of evolving_changes, whatever columns it has. -#}
select * from {{ ref('evolving_changes') }}
