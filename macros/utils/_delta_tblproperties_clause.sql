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
