{#-
    Creates the run-metadata tables of the `ops` schema that the project's
    materializations and hooks append to, when missing: `ops.window_runs` (the run
    log of the windowed materializations), `ops.filter_stats` (what each filter dropped)
    and `ops.dq_metrics` (row counts and null ratios per model and run). Runs at the
    start of every invocation (on-run-start), so that models built in parallel threads
    never race to create them; the materializations also create what they need. One
    listing of the `ops` schema first: a table that exists costs no statement, except
    for the two read in the order of their commits, which a table from an earlier
    version of the project gets row tracking for (`_window_log_migrate`,
    `_row_tracking_ensure`: one `show tblproperties` each).
-#}
{% macro create_ops_tables() -%}
    {{ return(adapter.dispatch('create_ops_tables', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__create_ops_tables() -%}
    {{ _raise_unsupported_adapter('create_ops_tables') }}
{%- endmacro %}

{% macro spark__create_ops_tables() -%}
    {%- if execute -%}
        {%- set schema = generate_schema_name('ops') -%}
        {%- set existing = _catalog_tables([schema])[schema | lower] -%}
        {%- if _window_log_relation().split('.')[-1] not in existing -%}
            {%- do _window_log_ensure(_window_log_relation()) -%}
        {%- else -%}
            {%- do _window_log_migrate(_window_log_relation()) -%}
        {%- endif -%}
        {%- if _filter_stats_relation().split('.')[-1] not in existing -%}
            {%- do _filter_stats_ensure() -%}
        {%- else -%}
            {%- do _row_tracking_ensure(_filter_stats_relation()) -%}
        {%- endif -%}
        {%- if _dq_metrics_relation().split('.')[-1] not in existing -%}
            {%- do _dq_metrics_ensure() -%}
        {%- endif -%}
    {%- endif -%}
    select 1
{%- endmacro %}
