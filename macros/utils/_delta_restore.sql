{#-
    Private: RESTORE a Delta table to `version`, keeping the retention it has now. Delta's
    RESTORE brings back that version's metadata, table properties included: a
    `delta.logRetentionDuration` that `make maintain` raised since (to a backfill horizon
    past Delta's 30 days) would fall back, and the log a backfill within the horizon
    needs could be cleaned up before the next maintenance. A retention the restore
    changed is set back (or unset) in one more commit; none otherwise.
-#}
{% macro _delta_restore(relation, version) -%}
    {%- set retention = ['delta.deletedFileRetentionDuration', 'delta.logRetentionDuration'] -%}
    {%- set before = _delta_properties(relation) -%}
    {%- do run_query("restore table " ~ relation ~ " to version as of " ~ version) -%}
    {%- set after = _delta_properties(relation) -%}
    {%- set kept = [] -%}
    {%- set dropped = [] -%}
    {%- for name in retention if before.get(name) != after.get(name) -%}
        {%- if before.get(name) is none -%}
            {%- do dropped.append("'" ~ name ~ "'") -%}
        {%- else -%}
            {%- do kept.append("'" ~ name ~ "' = '" ~ before[name] ~ "'") -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if kept -%}
        {%- do run_query("alter table " ~ relation ~ " set tblproperties ("
            ~ kept | join(', ') ~ ")") -%}
    {%- endif -%}
    {%- if dropped -%}
        {%- do run_query("alter table " ~ relation ~ " unset tblproperties if exists ("
            ~ dropped | join(', ') ~ ")") -%}
    {%- endif -%}
{%- endmacro %}
