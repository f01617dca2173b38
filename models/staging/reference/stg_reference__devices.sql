{#- Every full load of the devices catalog, one row per device per load day. -#}

with loads as (
    select
        type,
        version,
        full_name,
        regexp_extract(
            _metadata.file_path, '/([0-9]{4}-[0-9]{2}-[0-9]{2})/[^/]+$', 1
        ) as load_day
    from {{ source('reference', 'devices') }}
),

final as (
    select
        type,
        version,
        full_name,
        to_date(load_day) as load_date
    from loads
)

select * from final
