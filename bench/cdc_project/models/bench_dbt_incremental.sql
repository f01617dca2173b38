{#-
    The baseline: what a dbt user writes today with dbt-spark's own incremental
    materialization. The newest change per id wins within the batch; a delete cannot
    be expressed (it is upserted like any row), and a late, older change overwrites a
    newer row.
-#}
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='id',
    file_format='delta',
    alias='bench_dbt_incremental_' ~ var('bench_scale') ~ 'x',
) }}

with changes as (
    select * from {{ ref('bench_changes') }}
    {% if is_incremental() %}
        where _ingested_at > (select max(_ingested_at) from {{ this }})
    {% endif %}
),

ranked as (
    select
        *,
        row_number() over (partition by id order by lsn desc) as row_num
    from changes
),

final as (
    select
        id,
        op,
        lsn,
        name,
        email,
        amount,
        updated_at,
        _ingested_at
    from ranked
    where row_num = 1
)

select * from final
