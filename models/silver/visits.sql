{#- Filters, deduplication and the materialization are declared in visits.yml. -#}

with

visits as (
    select
        visit_id,
        event_time,
        user_id,
        article_id,
        page,
        device_type,
        device_version,
        referrer,
        event_time_text,
        _raw,
        _ingested_at,
        _bronze_version,
        _batch_id,
        _topic,
        _source_file,
        _line_number,
        _partition,
        _offset
    from {{ ref('stg_blog__visits') }}
)

select * from visits
