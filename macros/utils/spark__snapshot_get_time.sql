{#-
    The time a dbt snapshot records (dbt's `snapshot_get_time`, overridden for Spark):
    var `snapshot_time` when given - the time the snapshotted data is as of, e.g. the
    day of a full load, so that a device missing from that load is closed at that day
    and not at the moment the snapshot happened to run - else the current time.
-#}
{% macro spark__snapshot_get_time() -%}
    {#- python_jobs.run_dbt passes the var as LAKEHOUSE_SNAPSHOT_TIME. -#}
    {%- set at = var('snapshot_time', env_var('LAKEHOUSE_SNAPSHOT_TIME', '') or none) -%}
    {%- if at -%}
        to_timestamp('{{ at | replace("'", "") }}')
    {%- else -%}
        current_timestamp()
    {%- endif -%}
{%- endmacro %}
