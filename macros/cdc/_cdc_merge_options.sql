{#- Private helpers of the cdc_merge materialization: its configuration and columns. -#}

{#-
    The model's cdc_merge (or cdc_history: `kind`) configuration, validated, with
    defaults filled in: the shared window options plus keys, sequence and deletes.
-#}
{% macro _cdc_merge_options(model, config, kind='cdc_merge') -%}
    {%- set op = config.get('op_column', 'op') -%}
    {%- set options = _window_options(model, config, kind, [op]) -%}
    {%- set name = options.label -%}
    {%- do options.update({
        'unique_key': _cdc_as_list(config.get('unique_key'), 'unique_key', name),
        'sequence_by': _cdc_as_list(config.get('sequence_by'), 'sequence_by', name),
        'op_column': op,
        'delete_mode': config.get('delete_mode', 'hard'),
        'soft_delete_column': config.get('soft_delete_column', '_is_deleted'),
        'delete_condition': config.get('delete_condition', op ~ " = 'd'"),
        'truncate_condition': config.get('truncate_condition', op ~ " = 't'"),
    }) -%}
    {%- if options.delete_mode not in ('hard', 'soft') -%}
        {{ _cdc_config_error(name, "delete_mode must be 'hard' or 'soft', got '"
            ~ options.delete_mode ~ "'") }}
    {%- endif -%}
    {%- for key in options.unique_key if key in options.exclude_columns -%}
        {{ _cdc_config_error(name, "key column '" ~ key ~ "' is in exclude_columns") }}
    {%- endfor -%}
    {{ return(options) }}
{%- endmacro %}

{% macro _cdc_as_list(value, argument, label) -%}
    {%- if value is string and value | trim -%}
        {{ return([value]) }}
    {%- elif value is sequence and value is not mapping and value | length > 0 -%}
        {%- for item in value if not (item is string and item | trim) -%}
            {{ _cdc_config_error(label, argument ~ " must hold column names or SQL "
                ~ "expressions, got " ~ item) }}
        {%- endfor -%}
        {{ return(value | list) }}
    {%- endif -%}
    {{ _cdc_config_error(label, argument ~ " is required: a column or a list of "
        ~ "columns, got " ~ value) }}
{%- endmacro %}

{#- `label`: e.g. "cdc_merge (model silver.users)". -#}
{% macro _cdc_config_error(label, message) -%}
    {{ exceptions.raise_compiler_error(label ~ ": " ~ message) }}
{%- endmacro %}

{#- Columns of a relation or temporary view: a list of {name, type}, in order. -#}
{% macro _cdc_describe(relation) -%}
    {%- set columns = [] -%}
    {%- for row in run_query('describe ' ~ relation) -%}
        {%- set name = row[0] | trim -%}
        {%- if name == '' or name.startswith('#') -%}
            {%- break -%}
        {%- endif -%}
        {%- do columns.append({'name': name, 'type': row[1] | trim | lower}) -%}
    {%- endfor -%}
    {{ return(columns) }}
{%- endmacro %}

{#-
    The model's columns and what the table carries: every column except
    `exclude_columns`, plus `_cdc_sequence` (and the soft-delete flag). Fails, naming
    the model, when a configured column is missing or a reserved name is used.
-#}
{% macro _cdc_merge_columns(changes, options) -%}
    {%- set name = options.label -%}
    {%- set all_columns = _cdc_describe(changes) -%}
    {%- set names = all_columns | map(attribute='name') | map('lower') | list -%}
    {%- set required = options.unique_key + [options.window_column] + options.exclude_columns -%}
    {%- for column in required if column | lower not in names -%}
        {{ _cdc_config_error(name, "column '" ~ column ~ "' is not in the model's output ("
            ~ names | join(', ') ~ ")") }}
    {%- endfor -%}
    {%- set window_type = all_columns[names.index(options.window_column | lower)].type -%}
    {%- if window_type not in ('bigint', 'int') -%}
        {{ _cdc_config_error(name, "window_column '" ~ options.window_column ~ "' is "
            ~ window_type ~ ": a window is a range of the input's commit versions, a bigint "
            ~ "(a staging model selects `{{ bronze_commit_version() }} as _bronze_version` "
            ~ "from its Bronze source)") }}
    {%- endif -%}
    {%- set reserved = options.get('reserved', []) | map('lower') | list -%}
    {%- if options.delete_mode == 'soft' -%}
        {%- do reserved.append(options.soft_delete_column | lower) -%}
    {%- endif -%}
    {%- for column in names if column.startswith('_cdc_') or column in reserved -%}
        {{ _cdc_config_error(name, "the model's output may not have a column named '"
            ~ column ~ "': the materialization writes it") }}
    {%- endfor -%}
    {%- set excluded = options.exclude_columns | map('lower') | list -%}
    {%- set carried = [] -%}
    {%- set keys = [] -%}
    {%- for column in all_columns -%}
        {%- if column.name | lower not in excluded -%}
            {%- do carried.append(column) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- for key in options.unique_key -%}
        {%- do keys.append(all_columns[names.index(key | lower)]) -%}
    {%- endfor -%}
    {{ return({'all': all_columns, 'carried': carried, 'keys': keys}) }}
{%- endmacro %}

{#- `a`.`b` quoting for a list of {name} columns, optionally prefixed by an alias. -#}
{% macro _cdc_column_list(columns, alias=none) -%}
    {%- set prefix = alias ~ '.' if alias else '' -%}
    {%- for column in columns -%}
        {{ prefix }}`{{ column.name }}`{{ ', ' if not loop.last }}
    {%- endfor -%}
{%- endmacro %}

{#- `cast(null as <type>) as <name>` for each column. -#}
{% macro _cdc_null_columns(columns) -%}
    {%- for column in columns -%}
        cast(null as {{ column.type }}) as `{{ column.name }}`{{ ', ' if not loop.last }}
    {%- endfor -%}
{%- endmacro %}

{#- Null-safe equality of the key columns between two aliases. -#}
{% macro _cdc_key_match(keys, left, right) -%}
    {%- for key in keys -%}
        {{ left }}.`{{ key.name }}` <=> {{ right }}.`{{ key.name }}`{{ ' and ' if not loop.last }}
    {%- endfor -%}
{%- endmacro %}

{#- The sequence as one comparable struct; fields named after plain column names. -#}
{% macro _cdc_sequence_struct(sequence_by) -%}
    named_struct(
    {%- for expression in sequence_by -%}
        {%- set field = expression if modules.re.match('^[A-Za-z_][A-Za-z0-9_]*$', expression)
            else 'part_' ~ loop.index -%}
        '{{ field }}', {{ expression }}{{ ', ' if not loop.last }}
    {%- endfor -%}
    )
{%- endmacro %}

{#- The model's existing relation (none if missing); fails if it is not a Delta table. -#}
{% macro _cdc_existing_is_delta(relation, options) -%}
    {%- set existing = load_relation(relation) -%}
    {%- if existing is not none and not existing.is_delta -%}
        {#- A view or a table of another format where the model's table goes (say a
            model that was a view): a full refresh drops it and builds the table. -#}
        {%- if should_full_refresh() -%}
            {%- do adapter.drop_relation(existing) -%}
            {{ return(none) }}
        {%- endif -%}
        {{ _cdc_config_error(options.label, options.model ~ " exists and is not a Delta "
            ~ "table; drop it or run with --full-refresh") }}
    {%- endif -%}
    {{ return(existing) }}
{%- endmacro %}
