{#-
    The Offline Observer: profiles the model's table after each build and appends one
    row per column to `ops.dq_metrics` (the invocation, the model, its row count, and
    the column's null rows and ratio), so trends can be plotted and jumps caught. Used
    as a post-hook (dbt_project.yml sets it on silver and gold):

        +post-hook: "{{ record_dq_metrics() }}"

    `columns` (default: the model's `dq_columns` config, else every column) limits the
    profile to the key columns. One scan of the table per build.
-#}
{% macro record_dq_metrics(columns=none) -%}
    {{ return(adapter.dispatch('record_dq_metrics', 'lakehouse')(columns)) }}
{%- endmacro %}

{% macro default__record_dq_metrics(columns) -%}
    {{ _raise_unsupported_adapter('record_dq_metrics') }}
{%- endmacro %}

{% macro spark__record_dq_metrics(columns) -%}
    {%- if not execute -%}
        {{ return('select 1') }}
    {%- endif -%}
    {%- set label = "record_dq_metrics (model " ~ this ~ ")" -%}
    {%- set chosen = columns if columns is not none else config.get('dq_columns') -%}
    {%- set names = adapter.get_columns_in_relation(this) | map(attribute='name') | list -%}
    {%- if chosen is not none -%}
        {%- set chosen = _cdc_as_list(chosen, 'columns', label) -%}
        {%- for column in chosen if column not in names -%}
            {{ exceptions.raise_compiler_error(label ~ ": column '" ~ column
                ~ "' is not in the table (" ~ names | join(', ') ~ ")") }}
        {%- endfor -%}
        {%- set names = chosen -%}
    {%- endif -%}
    {%- do _dq_metrics_ensure() -%}
    insert into {{ _dq_metrics_relation() }}
    select
        '{{ invocation_id }}' as invocation_id,
        timestamp'{{ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') }}' as run_started_at,
        '{{ this.identifier }}' as model,
        '{{ this.schema }}.{{ this.identifier }}' as relation,
        profiled.column_name,
        counts.row_count,
        counts.row_count - profiled.non_null_rows as null_rows,
        try_divide(counts.row_count - profiled.non_null_rows, counts.row_count) as null_ratio,
        current_timestamp() as recorded_at
    from (
        select
            count(*) as row_count,
            {%- for name in names %}
            count(`{{ name }}`) as `_dq_{{ loop.index }}`{{ ',' if not loop.last }}
            {%- endfor %}
        from {{ this }}
    ) as counts
    lateral view stack(
        {{ names | length }},
        {%- for name in names %}
        '{{ name }}', `_dq_{{ loop.index }}`{{ ',' if not loop.last }}
        {%- endfor %}
    ) profiled as column_name, non_null_rows
{%- endmacro %}

{% macro _dq_metrics_relation() -%}
    {{ return(generate_schema_name('ops') ~ '.dq_metrics') }}
{%- endmacro %}

{% macro _dq_metrics_ensure() -%}
    {%- do run_query(
        "create table if not exists " ~ _dq_metrics_relation() ~ " ("
        ~ "invocation_id string not null, run_started_at timestamp not null, "
        ~ "model string not null, relation string not null, column_name string not null, "
        ~ "row_count bigint not null, null_rows bigint not null, null_ratio double, "
        ~ "recorded_at timestamp not null) using delta "
        ~ _delta_tblproperties_clause(_appended_table_properties())
    ) -%}
{%- endmacro %}
