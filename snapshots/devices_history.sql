{#-
    The devices catalog's history, from its daily full loads, as a dbt snapshot: a
    device whose `full_name` changes gets a new version, a device missing from a load
    is closed (hard deletes invalidated), and one that comes back is reopened. A
    snapshot sees one load per run, `devices_load_date` (var):
    `python -m python_jobs.snapshot_loads` snapshots every new load in order, with
    the load's day as the snapshot's time (var `snapshot_time`). Without the var a
    snapshot changes nothing (the first one takes the earliest load). The key is one
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

    {#- python_jobs.run_dbt passes the var as LAKEHOUSE_DEVICES_LOAD_DATE (dbt then
        re-parses only this file when the load changes, not the whole project). -#}
    {%- set load_date = var('devices_load_date',
        env_var('LAKEHOUSE_DEVICES_LOAD_DATE', '') or none) %}
    {%- set existing = execute and not load_date and load_relation(this) is not none %}

    with loads as (
        select * from {{ ref('stg_reference__devices') }}
    ),

    {# The load named, which must have rows (an empty load would close every device);
        else, for the first snapshot, the earliest load (python_jobs.snapshot_loads
        takes the later ones in order). #}
    snapshotted_load as (
        select
            case
                when {{ 'count(*) = 0' if load_date else 'false' }}
                    then raise_error(
                        'devices_history: the devices load {{ load_date }} has no '
                        || 'rows; snapshotting it would close every device. Nothing was changed.'
                    )
                else {{ 'max' if load_date else 'min' }}(loads.load_date)
            end as load_date
        from loads
        {%- if load_date %}
        where loads.load_date = date'{{ load_date }}'
        {%- endif %}
    ),

    loaded as (
        select
            loads.type,
            loads.version,
            loads.full_name,
            cast(loads.load_date as timestamp) as loaded_at,
            concat_ws('|', loads.type, loads.version) as device_key
        from loads
        inner join snapshotted_load on loads.load_date = snapshotted_load.load_date
    ),

    {# No load named and a history to keep: the snapshot's own open versions, so that
        nothing changes. A plain build never moves the snapshot on: a load it took out
        of order, at the time of the build, would close devices at that time, and
        python_jobs.snapshot_loads would then skip the loads before it for good. #}
    final as (
        select
            type,
            version,
            full_name,
            loaded_at,
            device_key
        from {{ this if existing else 'loaded' }}
        {{ 'where dbt_valid_to is null' if existing else '' }}
    )

    select * from final

{% endsnapshot %}
