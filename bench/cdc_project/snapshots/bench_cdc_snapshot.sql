{#-
    What a dbt user does today for history: a dbt snapshot of the current-state table
    (bench_cdc_merge, built by cdc_merge), taken after each batch. Timestamp strategy on
    updated_at, the time of the key's newest applied change; deleted keys are closed
    (hard deletes invalidated). It sees only the state at the moment it runs.
-#}
{% snapshot bench_cdc_snapshot %}

{{ config(
    alias='bench_cdc_snapshot_' ~ var('bench_scale') ~ 'x',
    unique_key='id',
    strategy='timestamp',
    updated_at='updated_at',
    hard_deletes='invalidate',
) }}

with current_state as (
    select
        id,
        lsn,
        name,
        email,
        amount,
        updated_at,
        _ingested_at
    from {{ ref('bench_cdc_merge') }}
)

select * from current_state

{% endsnapshot %}
