{#- Private: `tblproperties ('k' = 'v', ...)` of a mapping (quotes dropped from keys and
    values), for `create table` and `alter table ... set`. -#}
{% macro _delta_tblproperties_clause(properties) -%}
    {%- set pairs = [] -%}
    {%- for key, value in properties.items() -%}
        {%- do pairs.append("'" ~ key | replace("'", "") ~ "' = '"
            ~ value | string | replace("'", "") ~ "'") -%}
    {%- endfor -%}
    {{ return("tblproperties (" ~ pairs | join(', ') ~ ")") }}
{%- endmacro %}
