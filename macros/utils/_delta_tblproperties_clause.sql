{#- Private: `tblproperties ('k' = 'v', ...)` of a mapping, each key and value a Spark SQL
    string literal (backslashes and quotes escaped: a CHECK constraint's expression,
    `delta.constraints.<name>`, may hold quotes), for `create table` and
    `alter table ... set`. -#}
{% macro _delta_tblproperties_clause(properties) -%}
    {%- set pairs = [] -%}
    {%- for key, value in properties.items() -%}
        {%- do pairs.append(_delta_string_literal(key) ~ " = " ~ _delta_string_literal(value)) -%}
    {%- endfor -%}
    {{ return("tblproperties (" ~ pairs | join(', ') ~ ")") }}
{%- endmacro %}

{% macro _delta_string_literal(value) -%}
    {{ return("'" ~ value | string | replace("\\", "\\\\") | replace("'", "\\'") ~ "'") }}
{%- endmacro %}

{#- Private: the properties of a table that is only ever appended to (the run logs and
    statistics of `ops`, a history's change store): no deletion vectors, whatever the
    session's default for new tables (python_jobs/spark.py turns them on for the tables
    a MERGE rewrites). A table whose protocol has the feature costs every scan one more
    Spark job, which lists all its files looking for vectors, even when there are none
    (bench/README.md, "Fewer jobs per read"). As python_jobs/bronze.py's APPENDED_ONLY. -#}
{% macro _appended_table_properties() -%}
    {{ return({'delta.enableDeletionVectors': 'false'}) }}
{%- endmacro %}

{#- Private: the properties of an appended-only table whose rows are read in the order
    its commits appended them (the run log `ops.window_runs`, the statistics
    `ops.filter_stats`): row tracking as well, so each row's
    `_metadata.row_commit_version` (the commit that appended it, kept through OPTIMIZE)
    orders the runs whatever the writers' clocks said. -#}
{% macro _commit_ordered_table_properties() -%}
    {%- set properties = {'delta.enableRowTracking': 'true'} -%}
    {%- do properties.update(_appended_table_properties()) -%}
    {{ return(properties) }}
{%- endmacro %}

{#- Private: turns row tracking on for a table made by an earlier version of the project
    (on-run-start, `create_ops_tables`): Delta gives the rows already there the version
    of the backfill commit (of one of several, on a table of tens of thousands of
    files), before every row appended after; rows of one version are ordered by their
    timestamps, the fallback. -#}
{% macro _row_tracking_ensure(relation) -%}
    {%- if _delta_properties(relation).get('delta.enableRowTracking', 'false') | lower != 'true' -%}
        {%- do run_query("alter table " ~ relation ~ " set "
            ~ _delta_tblproperties_clause({'delta.enableRowTracking': 'true'})) -%}
    {%- endif -%}
{%- endmacro %}
