with

source as (
    select
        *,
        {{ bronze_commit_version() }} as _bronze_version
    from {{ source('blog', 'blog_public_users') }}
),

row_images as (
    select
        *,
        from_json(
            after,
            'user_id bigint, email string, full_name string, country string, plan string, lifetime_value string, created_at bigint, updated_at bigint, preferred_language string'  -- noqa: LT05
        ) as after_image,
        from_json(before, 'user_id bigint') as before_image
    from source
),

final as (
    select
        op,
        coalesce(after_image.user_id, before_image.user_id) as user_id,
        after_image.email,
        after_image.full_name,
        after_image.country,
        after_image.plan,
        {{ decode_debezium_decimal('after_image.lifetime_value', 12, 2) }} as lifetime_value,
        {{ decode_debezium_timestamp('after_image.created_at') }} as created_at,
        {{ decode_debezium_timestamp('after_image.updated_at') }} as updated_at,
        after_image.preferred_language,
        {{ change_event_metadata() }}
    from row_images
)

select * from final
