{#-
    Medallion layers are schemas with fixed names: a model's `schema` config is used
    as is (`silver`, `gold`, `ops`), never prefixed with the target's schema.
-#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema | trim }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
