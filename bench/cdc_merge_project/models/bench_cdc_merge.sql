{#- Ours: the change rows as they are; the materialization orders and applies them. -#}
{{ config(
    materialized='cdc_merge',
    alias='bench_cdc_merge_' ~ var('bench_scale') ~ 'x',
    unique_key=['id'],
    sequence_by=['lsn'],
) }}

with changes as (
    select
        id,
        op,
        lsn,
        name,
        email,
        amount,
        updated_at,
        _ingested_at
    from {{ source('bench', 'cdc_input') }}
)

select * from changes
