{#- Private: the current version of a Delta table (its latest commit). -#}
{% macro _delta_version(relation) -%}
    {{ return(run_query("describe history " ~ relation ~ " limit 1")[0][0] | int) }}
{%- endmacro %}
