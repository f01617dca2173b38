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
