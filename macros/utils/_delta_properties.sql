{#- Private: a Delta table's properties (`show tblproperties`), as {key: value}. -#}
{% macro _delta_properties(relation) -%}
    {%- set properties = {} -%}
    {%- for row in run_query("show tblproperties " ~ relation) -%}
        {%- do properties.update({row[0]: row[1]}) -%}
    {%- endfor -%}
    {{ return(properties) }}
{%- endmacro %}
