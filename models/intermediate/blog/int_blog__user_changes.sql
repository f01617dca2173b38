{{ config(materialized='ephemeral') }}

{#- The change rows of `users` as silver consumes them: the business columns, the
    operation, and where the change was committed and delivered. Shared by the
    current state (silver.users) and the history (silver.users_history). -#}

with changes as (
    select * from {{ ref('stg_blog__users') }}
),

final as (
    select
        user_id,
        email,
        full_name,
        country,
        plan,
        lifetime_value,
        created_at,
        updated_at,
        preferred_language,
        op,
        _source_committed_at,
        _source_lsn,
        _source_file,
        _line_number,
        _partition,
        _offset,
        _ingested_at,
        _bronze_version
    from changes
)

select * from final
