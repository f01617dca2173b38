{#-
    Registers every table of the `bronze` source in the catalog as an external Delta
    table at `<bronze_root>/<table>`, where the ingestion job writes it by path.
    Idempotent; runs at the start of every dbt invocation (on-run-start).
-#}
{% macro register_bronze_tables(bronze_root) -%}
    {{ return(adapter.dispatch('register_bronze_tables', 'lakehouse')(bronze_root)) }}
{%- endmacro %}

{% macro default__register_bronze_tables(bronze_root) -%}
    {{ _raise_unsupported_adapter('register_bronze_tables') }}
{%- endmacro %}

{% macro spark__register_bronze_tables(bronze_root) -%}
    {%- if not bronze_root -%}
        {{ exceptions.raise_compiler_error(
            "register_bronze_tables: var 'bronze_root' is empty"
        ) }}
    {%- endif -%}
    {#- The catalog stores the location: a relative one would depend on the cwd. -#}
    {%- if not (bronze_root.startswith('/') or '://' in bronze_root) -%}
        {{ exceptions.raise_compiler_error(
            "register_bronze_tables: var 'bronze_root' must be an absolute path or a URI, "
            ~ "got '" ~ bronze_root ~ "'"
        ) }}
    {%- endif -%}
    {%- if execute -%}
        {%- set identifiers = [] -%}
        {%- for source in graph.sources.values() -%}
            {%- if source.source_name == 'bronze' -%}
                {%- do identifiers.append(source.identifier) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- do create_layer_schemas(['bronze']) -%}
        {%- for identifier in identifiers | sort -%}
            {%- set location = (bronze_root ~ "/" ~ identifier) | replace("'", "\\'") -%}
            {%- do run_query(
                "create table if not exists bronze." ~ identifier
                ~ " using delta location '" ~ location ~ "'"
            ) -%}
        {%- endfor -%}
        {{ log("registered " ~ identifiers | length ~ " bronze tables", info=false) }}
    {%- endif -%}
    select 1
{%- endmacro %}
