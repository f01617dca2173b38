{#-
    The one rule that names every schema the project writes (dbt calls it for each
    model, snapshot and seed; the macros that write `ops` tables and the on-run-start
    hooks call it too):

    - the production targets `local` and `cluster` use the layer names as they are
      (`silver`, `gold`, `ops`): the contract's names;
    - any other target (`dev`, `ci`, ...) prefixes them with the target's `schema`, so
      that `dbt_alice` builds `dbt_alice_silver`, `dbt_alice_gold`, `dbt_alice_ops`
      and never touches production or another prefix. The prefix comes from
      LAKEHOUSE_SCHEMA_PREFIX (profiles.yml).

    A node without a `schema` config lands in the `silver` layer. Bronze is not built by
    dbt: its sources keep the schema `bronze` on every target.
-#}
{% macro generate_schema_name(custom_schema_name, node=none) -%}
    {%- set layer = (custom_schema_name or 'silver') | trim | lower -%}
    {%- if target.name in ['local', 'cluster'] -%}
        {{ return(layer) }}
    {%- endif -%}
    {%- set prefix = target.schema | trim | lower -%}
    {%- if not modules.re.match('^[a-z][a-z0-9_]*$', prefix) -%}
        {{ exceptions.raise_compiler_error(
            "generate_schema_name: target '" ~ target.name ~ "' has schema prefix '"
            ~ target.schema ~ "'; set LAKEHOUSE_SCHEMA_PREFIX to a name of letters, "
            ~ "digits and underscores that starts with a letter (e.g. dbt_alice)") }}
    {%- endif -%}
    {{ return(prefix ~ '_' ~ layer) }}
{%- endmacro %}
