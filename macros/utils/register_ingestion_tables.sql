{#-
    Registers every source table that the ingestion job writes by path (sources whose
    meta has `path_root`) as an external Delta table at
    `<lakehouse_root>/<path_root>/<table>`: the Bronze topics and dead letters in
    `bronze`, the batch log in `ops`. Idempotent; runs at the start of every dbt
    invocation (on-run-start): it lists the catalog's tables once and registers only
    those missing. With the shared catalog (env LAKEHOUSE_CATALOG set to a
    PostgreSQL URL) it does nothing: the ingestion job registers its own tables there
    (python_jobs/bronze.py, register_tables).
-#}
{% macro register_ingestion_tables(lakehouse_root) -%}
    {{ return(adapter.dispatch('register_ingestion_tables', 'lakehouse')(lakehouse_root)) }}
{%- endmacro %}

{% macro default__register_ingestion_tables(lakehouse_root) -%}
    {{ _raise_unsupported_adapter('register_ingestion_tables') }}
{%- endmacro %}

{% macro spark__register_ingestion_tables(lakehouse_root) -%}
    {%- if not lakehouse_root -%}
        {{ exceptions.raise_compiler_error(
            "register_ingestion_tables: var 'lakehouse_root' is empty"
        ) }}
    {%- endif -%}
    {#- The catalog stores the location: a relative one would depend on the cwd. -#}
    {%- if not (lakehouse_root.startswith('/') or '://' in lakehouse_root) -%}
        {{ exceptions.raise_compiler_error(
            "register_ingestion_tables: var 'lakehouse_root' must be an absolute path or "
            ~ "a URI, got '" ~ lakehouse_root ~ "'"
        ) }}
    {%- endif -%}
    {%- set catalog = env_var('LAKEHOUSE_CATALOG', '') | trim | lower -%}
    {%- if catalog not in ('', 'derby') -%}
        {{ log("shared catalog: the ingestion job registers its own tables", info=false) }}
    {%- elif execute -%}
        {%- set tables = [] -%}
        {%- for source in graph.sources.values() -%}
            {%- set path_root = source.config.meta.get('path_root') -%}
            {%- if path_root -%}
                {%- do tables.append((source.schema, source.identifier, path_root)) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set schemas = tables | map(attribute=0) | unique | list -%}
        {%- do create_layer_schemas(schemas) -%}
        {%- set registered = _catalog_tables(schemas) -%}
        {%- set missing = [] -%}
        {%- for schema, identifier, path_root in tables | sort
            if identifier | lower not in registered[schema | lower] -%}
            {%- do missing.append(schema ~ "." ~ identifier) -%}
            {%- set location = (lakehouse_root ~ "/" ~ path_root ~ "/" ~ identifier)
                | replace("'", "\\'") -%}
            {%- do run_query(
                "create table if not exists " ~ schema ~ "." ~ identifier
                ~ " using delta location '" ~ location ~ "'"
            ) -%}
        {%- endfor -%}
        {{ log("ingestion tables: " ~ tables | length ~ ", registered now: "
            ~ (missing | join(", ") or "none"), info=false) }}
    {%- endif -%}
    select 1
{%- endmacro %}
