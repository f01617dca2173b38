{#-
    Registers every source table that is read in place from the landing zone (sources
    whose meta has `landing_path` and `format`) as an external table over
    `<lakehouse_root>/landing/<landing_path>`, every file below it (the date
    directories of full loads), with the columns the source declares. The directory
    exists from the first session on (python_jobs/spark.py), so no loads yet reads as
    an empty table; the table is refreshed so that new loads are listed. Idempotent;
    runs at the start of every dbt invocation: it lists the catalog's tables once,
    registers only those missing, and refreshes each.
-#}
{% macro register_landing_tables(lakehouse_root) -%}
    {{ return(adapter.dispatch('register_landing_tables', 'lakehouse')(lakehouse_root)) }}
{%- endmacro %}

{% macro default__register_landing_tables(lakehouse_root) -%}
    {{ _raise_unsupported_adapter('register_landing_tables') }}
{%- endmacro %}

{% macro spark__register_landing_tables(lakehouse_root) -%}
    {%- if execute -%}
        {%- set sources = graph.sources.values() | selectattr('config.meta.landing_path')
            | list -%}
        {%- set schemas = sources | map(attribute='schema') | unique | list -%}
        {%- do create_layer_schemas(schemas) if schemas -%}
        {%- set registered = _catalog_tables(schemas) -%}
        {%- for source in sources -%}
            {%- set meta = source.config.meta -%}
            {%- set columns = [] -%}
            {%- for column in source.columns.values() -%}
                {%- do columns.append('`' ~ column.name ~ '` ' ~ column.data_type) -%}
            {%- endfor -%}
            {%- set location = (lakehouse_root ~ "/landing/" ~ meta.landing_path)
                | replace("'", "\\'") -%}
            {%- if source.identifier | lower not in registered[source.schema | lower] -%}
            {%- do run_query(
                "create table if not exists " ~ source.schema ~ "." ~ source.identifier
                ~ " (" ~ columns | join(', ') ~ ") using " ~ meta.format
                ~ " options ('recursiveFileLookup' 'true') location '" ~ location ~ "'"
            ) -%}
            {%- endif -%}
            {#- Loads arrive as new directories: list the files again, not the cache. -#}
            {%- do run_query("refresh table " ~ source.schema ~ "." ~ source.identifier) -%}
        {%- endfor -%}
    {%- endif -%}
    select 1
{%- endmacro %}
