with

source as (
    select
        *,
        {{ bronze_commit_version() }} as _bronze_version
    from {{ source('blog', 'blog_public_articles') }}
),

row_images as (
    select
        *,
        from_json(
            after,
            'article_id bigint, author_id bigint, title string, category string, status string, published_at bigint, updated_at bigint'  -- noqa: LT05
        ) as after_image,
        from_json(before, 'article_id bigint') as before_image
    from source
),

final as (
    select
        op,
        coalesce(after_image.article_id, before_image.article_id) as article_id,
        after_image.author_id,
        after_image.title,
        after_image.category,
        after_image.status,
        {{ decode_debezium_timestamp('after_image.published_at') }} as published_at,
        {{ decode_debezium_timestamp('after_image.updated_at') }} as updated_at,
        {{ change_event_metadata() }}
    from row_images
)

select * from final
