{#- Private: the options the windowed materializations share (macros/windows). -#}

{#-
    The options every windowed materialization (`kind`: cdc_merge, cdc_history,
    filtered_append) shares, validated, with defaults filled in: `model`, `label` (the
    materialization and model, for errors), `kind`, `window_column` (the input's commit
    version, default `_bronze_version`), `exclude_columns` (default `exclude_default`),
    and the table configs dbt-spark honours, applied when the tables are created
    (`_window_create_tables`): `partition_by`, `liquid_clustered_by` (Delta clustering,
    `cluster by`; not with `partition_by`), `tblproperties`, `location_root`; and
    `on_schema_change` (default `append_new_columns`: `_window_sync_columns`) and
    `grants` (applied at the end of every run, as dbt-spark does: `_window_end`).
    `input` is the one source the model reads (through its views and ephemeral
    models), none when it reads several or none: the table whose commits are its
    windows, whose identity each run records and checks (`_window_plan`). With
    `window_prune_column` (a column of the model that is its input row's own value,
    e.g. `_ingested_at`), a window's read skips the files of `input` committed before
    it (`_window_open`); a config error when there is no one source.
-#}
{% macro _window_options(model, config, kind, exclude_default) -%}
    {%- set label = kind ~ " (model " ~ model.schema ~ '.' ~ model.alias ~ ")" -%}
    {%- set options = {
        'model': model.schema ~ '.' ~ model.alias,
        'label': label,
        'kind': kind,
        'window_column': config.get('window_column', '_bronze_version'),
        'exclude_columns': config.get('exclude_columns', exclude_default),
        'on_schema_change': _window_schema_mode(model, config),
        'prune_column': config.get('window_prune_column'),
    } -%}
    {%- do options.update(_table_configs(config, label)) -%}
    {%- set sources = _window_sources(model) -%}
    {%- do options.update({'input': sources[0] if sources | length == 1 else none}) -%}
    {%- set schema_modes = ['append_new_columns', 'ignore', 'fail', 'sync_all_columns'] -%}
    {%- if options.on_schema_change not in schema_modes -%}
        {{ _cdc_config_error(label, "on_schema_change must be one of " ~ schema_modes
            | join(', ') ~ ", got '" ~ options.on_schema_change ~ "'") }}
    {%- endif -%}
    {%- if not (options.window_column is string and options.window_column | trim) -%}
        {{ _cdc_config_error(label, "window_column must be a column name, got "
            ~ options.window_column) }}
    {%- endif -%}
    {%- if options.exclude_columns is string or options.exclude_columns is mapping -%}
        {{ _cdc_config_error(label, "exclude_columns must be a list of column names, got '"
            ~ options.exclude_columns ~ "'") }}
    {%- endif -%}
    {%- if options.prune_column is not none -%}
        {%- if not (options.prune_column is string and options.prune_column | trim) -%}
            {{ _cdc_config_error(label, "window_prune_column must be a column name, got "
                ~ options.prune_column) }}
        {%- endif -%}
        {%- if options.input is none -%}
            {{ _cdc_config_error(label, "window_prune_column needs exactly one source upstream "
                ~ "of the model (the table whose commits are its windows), found "
                ~ (sources | length) ~ (": " ~ sources | join(', ') if sources else "")) }}
        {%- endif -%}
    {%- endif -%}
    {{ return(options) }}
{%- endmacro %}

{#- The sources upstream of `node` (through models of any materialization), as
    `schema.identifier`; none for a node without dependencies (a bare config). -#}
{% macro _window_sources(node) -%}
    {%- set found = [] -%}
    {%- do _window_upstream_sources((node.get('depends_on') or {}).get('nodes', []),
        found, []) -%}
    {{ return(found) }}
{%- endmacro %}

{% macro _window_upstream_sources(ids, found, visited) -%}
    {%- for id in ids if id not in visited -%}
        {%- do visited.append(id) -%}
        {%- if id.startswith('source.') and id in graph.sources -%}
            {%- set source = graph.sources[id] -%}
            {%- set name = source.schema ~ '.' ~ source.identifier -%}
            {%- if name not in found -%}
                {%- do found.append(name) -%}
            {%- endif -%}
        {%- elif id in graph.nodes -%}
            {%- do _window_upstream_sources(graph.nodes[id].depends_on.nodes, found, visited) -%}
        {%- endif -%}
    {%- endfor -%}
{%- endmacro %}

{#- `on_schema_change` as the model sets it (in its SQL, YAML or dbt_project.yml), else
    `append_new_columns`. Not `config.get` alone: dbt fills in its own default, `ignore`,
    for every model, which would silently stop new columns. -#}
{% macro _window_schema_mode(model, config) -%}
    {%- set explicit = model['unrendered_config'] if model['unrendered_config'] is defined
        else {} -%}
    {%- set value = config.get('on_schema_change') -%}
    {#- Any value but dbt's default is the model's own (and is validated). -#}
    {%- if value and (value != 'ignore' or 'on_schema_change' in (explicit or {})) -%}
        {{ return(value) }}
    {%- endif -%}
    {{ return('append_new_columns') }}
{%- endmacro %}

{#-
    Creates the model's tables, empty, from explicit column definitions (`tables`: a
    list of (relation, definition) or (relation, definition, properties), the model's
    own table first, then its side tables; `properties` are a side table's own, e.g.
    `_appended_table_properties()` for one only appended to).
    `create or replace`: a full refresh replaces each table in one commit, so readers
    never see it missing and its Delta history survives. The model's table gets
    `partition_by`, `liquid_clustered_by` and `tblproperties`; with `location_root`,
    every table of the model lives at `<location_root>/<identifier>`. Not `create ... as
    select ... where false`: the catalog would record the size of that empty table
    (1 KB) as its statistics for good, and the planner would then broadcast the whole
    table into every merge. Without catalog statistics it uses Delta's current size.
-#}
{% macro _window_create_tables(tables, options) -%}
    {%- for entry in tables -%}
        {%- set relation, definition = entry[0], entry[1] -%}
        {%- set clauses = _table_config_clauses(relation, options, loop.first) -%}
        {%- if loop.first and options.tblproperties -%}
            {%- do clauses.append(_delta_tblproperties_clause(options.tblproperties)) -%}
        {%- elif entry | length > 2 -%}
            {%- do clauses.append(_delta_tblproperties_clause(entry[2])) -%}
        {%- endif -%}
        {%- do run_query("create or replace table " ~ relation ~ " (" ~ definition
            ~ ") using delta " ~ clauses | join(' ')) -%}
    {%- endfor -%}
{%- endmacro %}
