{#- One row per valid visit, with the user and article versions valid at the visit's
    time (the Static Joiner): a later change of plan or category never rewrites what a
    past visit saw. Incremental (fct_visits.yml): each build recomputes the new visits and
    the visits of users and articles whose versions changed, audits them and merges them
    in one commit, so a change that reaches the history late re-attributes the visits it
    covers. -#}

with visits as (
    select * from {{ ref('visits') }}
),

joined as (
    select
        v.visit_id,
        v.event_time,
        v.user_id,
        v.article_id,
        v.page,
        v.device_type,
        v.device_version,
        v.referrer,
        u.user_version_key,
        u.country as user_country,
        u.plan as user_plan,
        a.article_version_key,
        a.author_id as article_author_id,
        a.category as article_category,
        a.status as article_status,
        v._ingested_at,
        v._bronze_version,
        to_date(v.event_time) as visit_date
    from visits as v
    {{ point_in_time_join(ref('dim_users'), 'u', 'v.event_time', {'v.user_id': 'user_id'}) }}
    {{ point_in_time_join(ref('dim_articles'), 'a', 'v.event_time', {'v.article_id': 'article_id'}) }}
),

final as (
    select
        visit_id,
        event_time,
        visit_date,
        user_id,
        article_id,
        page,
        device_type,
        device_version,
        referrer,
        user_version_key,
        user_country,
        user_plan,
        article_version_key,
        article_author_id,
        article_category,
        article_status,
        _ingested_at,
        _bronze_version
    from joined
)

select * from final
