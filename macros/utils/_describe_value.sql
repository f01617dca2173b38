{#- A map or array column's value in a `describe` result (`describe detail`'s
    `clusteringColumns`, `tableFeatures`, `properties`; `describe history`'s
    `operationMetrics`): dbt's result tables hold them as JSON text over the Thrift
    server, as lists and mappings in a session of its own. -#}
{% macro _describe_value(value, empty) -%}
    {%- if value is none or value == '' -%}
        {{ return(empty) }}
    {%- elif value is string -%}
        {{ return(fromjson(value)) }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}
