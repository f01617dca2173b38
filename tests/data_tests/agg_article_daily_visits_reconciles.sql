{{ config(severity='warn') }}

{#- Days whose aggregate differs from the visits in gold.fct_visits: late visits that
    arrived after their day was closed (older than agg_lookback_days), until a
    --full-refresh of agg_article_daily_visits adds them. -#}

with visits as (
    select
        visit_date,
        article_id,
        count(*) as visits
    from {{ ref('fct_visits') }}
    where article_id is not null
    group by visit_date, article_id
),

aggregated as (
    select
        visit_date,
        article_id,
        visits
    from {{ ref('agg_article_daily_visits') }}
),

final as (
    select
        v.visits as visits_in_fct,
        a.visits as visits_aggregated,
        coalesce(v.visit_date, a.visit_date) as visit_date,
        coalesce(v.article_id, a.article_id) as article_id
    from visits as v
    full outer join aggregated as a
        on v.visit_date = a.visit_date and v.article_id = a.article_id
    where v.visits is distinct from a.visits
)

select * from final
