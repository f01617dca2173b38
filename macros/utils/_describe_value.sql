{#- A map or array column's value in a `describe` result (`describe detail`'s
    `clusteringColumns`, `tableFeatures`, `properties`; `describe history`'s
    `operationParameters`, `operationMetrics`), or a JSON text Delta keeps inside one:
    dbt's result tables hold maps and arrays as JSON text; a value that is already a
    list or mapping is returned as it is. -#}
{% macro _describe_value(value, empty) -%}
    {%- if value is none or value == '' -%}
        {{ return(empty) }}
    {%- elif value is string -%}
        {{ return(fromjson(value)) }}
    {%- endif -%}
    {{ return(value) }}
{%- endmacro %}
