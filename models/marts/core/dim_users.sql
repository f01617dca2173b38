{#- Users as they were over time (SCD2), for joins at a fact's time; no raw PII. -#}

with versions as (
    select
        *,
        sha2(concat_ws('|', cast(user_id as string), to_json(_cdc_sequence)), 256) as user_version_key,
        {{ pseudonymize('lower(trim(email))') }} as email_pseudonym
    from {{ ref('users_history') }}
),

final as (
    select
        user_version_key,
        user_id,
        email_pseudonym,
        country,
        plan,
        lifetime_value,
        created_at,
        updated_at,
        preferred_language,
        valid_from,
        valid_to,
        is_current
    from versions
)

select * from final
