{#- Devices as the daily catalog loads described them over time (SCD2), with whether
    visits from them are supported. -#}

with versions as (
    select * from {{ ref('devices_history') }}
),

final as (
    select
        dbt_scd_id as device_version_key,
        type as device_type,
        version as device_version,
        full_name,
        dbt_valid_from as valid_from,
        dbt_valid_to as valid_to,
        type in ('desktop', 'mobile', 'tablet') as is_supported,
        dbt_valid_to is null as is_current
    from versions
)

select * from final
