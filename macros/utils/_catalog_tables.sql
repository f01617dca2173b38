{#- Private: the tables the catalog holds in each of `schemas`, as
    {'schema': ['table', ...]} (lower case; a schema that does not exist has none): one
    `show schemas` and one `show tables` per existing schema. The on-run-start hooks
    list first and create only what is missing, so an invocation on a lakehouse that
    has everything runs a few listings instead of a statement per table. -#}
{% macro _catalog_tables(schemas) -%}
    {%- set existing = run_query("show schemas").columns[0].values() | map('lower') | list -%}
    {%- set tables = {} -%}
    {%- for schema in schemas | map('lower') | unique -%}
        {%- set names = [] -%}
        {%- if schema in existing -%}
            {%- for row in run_query("show tables in " ~ schema) if not row['isTemporary'] -%}
                {%- do names.append(row['tableName'] | lower) -%}
            {%- endfor -%}
        {%- endif -%}
        {%- do tables.update({schema: names}) -%}
    {%- endfor -%}
    {{ return(tables) }}
{%- endmacro %}
