{#- Private: dbt's table configs, as every custom materialization of the project honours
    them (the windowed ones, macros/windows; `audited_table`, macros/publish). -#}

{#-
    The model's table configs, validated: `partition_by`, `liquid_clustered_by` (Delta
    clustering, `cluster by`; not with `partition_by`), `tblproperties` (a mapping),
    `location_root` (a path: the model's tables live at `<location_root>/<identifier>`)
    and `grants` (applied by the materialization at the end of a run, as dbt-spark does).
-#}
{% macro _table_configs(config, label) -%}
    {%- set configs = {
        'partition_by': _table_config_columns(config.get('partition_by'), 'partition_by', label),
        'liquid_clustered_by': _table_config_columns(
            config.get('liquid_clustered_by'), 'liquid_clustered_by', label),
        'tblproperties': config.get('tblproperties') or {},
        'location_root': config.get('location_root'),
        'grants': config.get('grants'),
    } -%}
    {%- if configs.partition_by and configs.liquid_clustered_by -%}
        {{ _cdc_config_error(label, "partition_by and liquid_clustered_by cannot both be set "
            ~ "(a clustered Delta table has no partitions)") }}
    {%- endif -%}
    {%- if configs.tblproperties is not mapping -%}
        {{ _cdc_config_error(label, "tblproperties must be a mapping of property to value, got "
            ~ configs.tblproperties) }}
    {%- endif -%}
    {%- if configs.location_root is not none
            and not (configs.location_root is string and configs.location_root | trim) -%}
        {{ _cdc_config_error(label, "location_root must be a path, got "
            ~ configs.location_root) }}
    {%- endif -%}
    {{ return(configs) }}
{%- endmacro %}

{#- An optional config naming columns: none, `[]` (none: a model clearing what its
    folder sets), a name, or a list of names; as a list. -#}
{% macro _table_config_columns(value, argument, label) -%}
    {%- if value is none or (value is sequence and value is not string
            and value is not mapping and value | length == 0) -%}
        {{ return([]) }}
    {%- endif -%}
    {{ return(_cdc_as_list(value, argument, label)) }}
{%- endmacro %}

{#- The clauses of a `create table` for `relation` after its columns and `using delta`:
    with `layout`, the model's own table's `partitioned by` and `cluster by`; with
    `location_root`, every table of the model (a windowed model's side tables too) at
    `<location_root>/<identifier>`. Table properties are the caller's. -#}
{% macro _table_config_clauses(relation, configs, layout) -%}
    {%- set clauses = [] -%}
    {%- if layout and configs.partition_by -%}
        {%- do clauses.append("partitioned by (" ~ configs.partition_by | join(', ') ~ ")") -%}
    {%- endif -%}
    {%- if layout and configs.liquid_clustered_by -%}
        {%- do clauses.append("cluster by (" ~ configs.liquid_clustered_by | join(', ') ~ ")") -%}
    {%- endif -%}
    {%- if configs.location_root -%}
        {%- do clauses.append("location '" ~ configs.location_root | replace("'", "")
            ~ "/" ~ relation.identifier ~ "'") -%}
    {%- endif -%}
    {{ return(clauses) }}
{%- endmacro %}
