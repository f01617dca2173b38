{#- Private: the options the windowed materializations share (macros/windows). -#}

{#-
    The options every windowed materialization (`kind`: cdc_merge, cdc_history,
    filtered_append) shares, validated, with defaults filled in: `model`, `label` (the
    materialization and model, for errors), `kind`, `window_column` (the input's commit
    version, default `_bronze_version`) and `exclude_columns` (default
    `exclude_default`).
-#}
{% macro _window_options(model, config, kind, exclude_default) -%}
    {%- set label = kind ~ " (model " ~ model.schema ~ '.' ~ model.alias ~ ")" -%}
    {%- set options = {
        'model': model.schema ~ '.' ~ model.alias,
        'label': label,
        'kind': kind,
        'window_column': config.get('window_column', '_bronze_version'),
        'exclude_columns': config.get('exclude_columns', exclude_default),
    } -%}
    {%- if not (options.window_column is string and options.window_column | trim) -%}
        {{ _cdc_config_error(label, "window_column must be a column name, got "
            ~ options.window_column) }}
    {%- endif -%}
    {%- if options.exclude_columns is string or options.exclude_columns is mapping -%}
        {{ _cdc_config_error(label, "exclude_columns must be a list of column names, got '"
            ~ options.exclude_columns ~ "'") }}
    {%- endif -%}
    {{ return(options) }}
{%- endmacro %}
