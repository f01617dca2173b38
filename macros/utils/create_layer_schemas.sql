{#-
    Creates the medallion schemas so that every layer exists, even before a model writes
    to it: by default the target's `silver`, `gold` and `ops` schemas as
    generate_schema_name names them (`bronze` is created by register_ingestion_tables);
    or the schemas given, as they are. Idempotent; runs at the start of every dbt
    invocation (on-run-start).
-#}
{% macro create_layer_schemas(schemas=none) -%}
    {{ return(adapter.dispatch('create_layer_schemas', 'lakehouse')(schemas)) }}
{%- endmacro %}

{% macro default__create_layer_schemas(schemas) -%}
    {{ _raise_unsupported_adapter('create_layer_schemas') }}
{%- endmacro %}

{% macro spark__create_layer_schemas(schemas) -%}
    {%- if schemas is none -%}
        {%- set schemas = [] -%}
        {%- for layer in ['silver', 'gold', 'ops'] -%}
            {%- do schemas.append(generate_schema_name(layer)) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if schemas is string or schemas | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "create_layer_schemas: `schemas` must be a non-empty list, got " ~ schemas
        ) }}
    {%- endif -%}
    {%- if execute -%}
        {%- set existing = run_query("show schemas").columns[0].values() | map('lower') | list -%}
        {%- for schema in schemas if schema | lower not in existing -%}
            {%- do run_query("create schema if not exists " ~ schema) -%}
        {%- endfor -%}
    {%- endif -%}
    select 1
{%- endmacro %}
