with

source as (
    select
        *,
        {{ bronze_commit_version() }} as _bronze_version
    from {{ source('blog', 'blog_visits') }}
),

parsed as (
    select
        *,
        from_json(
            _raw,
            'visit_id string, event_time string, user_id bigint, article_id bigint, page string, device_type string, device_version string, referrer string'  -- noqa: LT05
        ) as visit
    from source
),

final as (
    select
        visit.visit_id,
        visit.event_time as event_time_text,
        visit.user_id,
        visit.article_id,
        visit.page,
        visit.device_type,
        visit.device_version,
        visit.referrer,
        _raw,
        {{ ingestion_metadata() }},
        try_cast(visit.event_time as timestamp) as event_time
    from parsed
)

select * from final
