{{
    config(
        materialized='incremental',
        incremental_strategy='merge',
        unique_key=['visit_date', 'article_id'],
        on_schema_change='fail',
    )
}}

{#- Visits per article per day, kept correct when visits arrive late (the dynamic Late
    Data Integrator): each run re-aggregates, in full, only the days that received
    visits since the last run (committed to Bronze after the newest `_last_bronze_version`
    already aggregated), capped by a lookback of `agg_lookback_days` days before the newest
    visit day. Days older than that are closed: their late visits are not added (the
    run logs them, and the `agg_article_daily_visits_reconciles` test warns) until a
    `--full-refresh` or a larger lookback. A re-run with nothing new changes no row. -#}

{%- set lookback_days = var('agg_lookback_days') -%}
{%- if lookback_days is not number or lookback_days < 0 -%}
    {{ exceptions.raise_compiler_error(
        "agg_article_daily_visits: var agg_lookback_days must be a number of days >= 0, got "
        ~ lookback_days) }}
{%- endif %}

{%- set visits_cte -%}
visits as (
    select * from {{ ref('fct_visits') }}
    where article_id is not null
)
{%- endset -%}

{%- set late_ctes -%}
aggregated_until as (
    select coalesce(max(_last_bronze_version), -1) as bronze_version
    from {{ this }}
),

lookback as (
    select date_sub(max(visit_date), {{ lookback_days }}) as first_open_day from visits
),

new_visits as (
    select
        v.visit_date,
        v.visit_date >= l.first_open_day as is_open
    from visits as v
    cross join aggregated_until as a
    cross join lookback as l
    where v._bronze_version > a.bronze_version
)
{%- endset -%}

{#- Late visits on closed days: logged, never silently dropped (not in a dbt unit test,
    whose inputs are CTEs of the test's own query, not relations a query can read). -#}
{%- if is_incremental() and execute and model.resource_type != 'unit_test' -%}
    {%- set closed = run_query("with " ~ visits_cte ~ ", " ~ late_ctes
        ~ " select cast(visit_date as string), count(*) from new_visits"
        ~ " where not is_open group by visit_date order by 1") -%}
    {%- set closed_days = [] -%}
    {%- for row in closed.rows -%}
        {%- do closed_days.append(row[0] ~ ': ' ~ row[1]) -%}
    {%- endfor -%}
    {%- if closed_days -%}
        {{ log("agg_article_daily_visits: WARNING: late visits on days older than the "
            ~ "lookback of " ~ lookback_days ~ " days were not aggregated (day: visits): "
            ~ closed_days | join(', ') ~ ". Rebuild with --full-refresh to add them.", info=true) }}
    {%- endif -%}
{%- endif %}

{#- A first build (or --full-refresh) aggregates every day; later runs the open days
    that received visits since the last run. -#}
{%- set incremental_ctes = late_ctes ~ ",\n\n" if is_incremental() else "" -%}
{%- set days = "select distinct visit_date from new_visits where is_open" if is_incremental()
    else "select distinct visit_date from visits" %}

with {{ visits_cte }},

{{ incremental_ctes }}days_to_aggregate as (
    {{ days }}
),

visits_to_aggregate as (
    select v.*
    from visits as v
    inner join days_to_aggregate as d on v.visit_date = d.visit_date
),

final as (
    select
        visit_date,
        article_id,
        count(*) as visits,
        count(distinct user_id) as unique_users,
        count_if(user_id is null) as anonymous_visits,
        max(_ingested_at) as _last_ingested_at,
        max(_bronze_version) as _last_bronze_version,
        '{{ invocation_id }}' as _invocation_id,
        timestamp'{{ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') }}' as _aggregated_at
    from visits_to_aggregate
    group by visit_date, article_id
)

select * from final
