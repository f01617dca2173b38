{#-
    The devices catalog's history, from its daily full loads, as a dbt snapshot: a
    device whose `full_name` changes gets a new version, a device missing from a load
    is closed (hard deletes invalidated), and one that comes back is reopened. A
    snapshot sees one load per run: `devices_load_date` (var) or the latest load;
    `python -m python_jobs.snapshot_loads` snapshots every new load in order, with
    the load's day as the snapshot's time (var `snapshot_time`). The key is one
    column (`type|version`): dbt's snapshot SQL with a list `unique_key` and hard
    deletes is ambiguous on Spark (AMBIGUOUS_REFERENCE snapshotted_data.dbt_unique_key_1).
-#}
{% snapshot devices_history %}

    {{
        config(
            unique_key='device_key',
            strategy='check',
            check_cols=['full_name'],
            updated_at='loaded_at',
            hard_deletes='invalidate',
        )
    }}

    with loads as (
        select * from {{ ref('stg_reference__devices') }}
    ),

    {#- python_jobs.run_dbt passes the var as LAKEHOUSE_DEVICES_LOAD_DATE (dbt then
        re-parses only this file when the load changes, not the whole project). -#}
    {%- set load_date = var('devices_load_date',
        env_var('LAKEHOUSE_DEVICES_LOAD_DATE', '') or none) %}
    {#- An empty load would close every device: refused when the snapshot has open
        versions (or a load was asked for by date). -#}
    {%- if load_date %}
        {%- set refused = 'count(*) = 0' %}
    {%- elif execute and load_relation(this) is not none %}
        {%- set refused = 'count(*) = 0 and (select count(*) from ' ~ this
            ~ ' where dbt_valid_to is null) > 0' %}
    {%- else %}
        {%- set refused = 'false' %}
    {%- endif %}

    snapshotted_load as (
        select
            case
                when {{ refused }}
                    then raise_error(
                        'devices_history: the devices load {{ load_date or "(latest)" }} has no '
                        || 'rows; snapshotting it would close every device. Nothing was changed.'
                    )
                else max(loads.load_date)
            end as load_date
        from loads
        {%- if load_date %}
        where loads.load_date = date'{{ load_date }}'
        {%- endif %}
    ),

    final as (
        select
            loads.type,
            loads.version,
            loads.full_name,
            cast(loads.load_date as timestamp) as loaded_at,
            concat_ws('|', loads.type, loads.version) as device_key
        from loads
        inner join snapshotted_load on loads.load_date = snapshotted_load.load_date
    )

    select * from final

{% endsnapshot %}
