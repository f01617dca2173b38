{#- Articles as they were over time (SCD2), for joins at a fact's time. -#}

with versions as (
    select
        *,
        sha2(concat_ws('|', cast(article_id as string), to_json(_cdc_sequence)), 256) as article_version_key
    from {{ ref('articles_history') }}
),

final as (
    select
        article_version_key,
        article_id,
        author_id,
        title,
        category,
        status,
        published_at,
        updated_at,
        valid_from,
        valid_to,
        is_current
    from versions
)

select * from final
