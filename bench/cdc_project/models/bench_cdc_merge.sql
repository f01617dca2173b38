{#- Ours: the change rows as they are; the materialization orders and applies them. -#}
{{ config(
    materialized='cdc_merge',
    alias='bench_cdc_merge_' ~ var('bench_scale') ~ 'x',
    unique_key=['id'],
    sequence_by=['lsn'],
    window_prune_column='_ingested_at',
) }}

select * from {{ ref('bench_changes') }}
