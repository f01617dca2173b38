{#-
    The commit that appended a row to a Delta table with row tracking (Bronze, the run
    log `ops.window_runs`, the statistics `ops.filter_stats`), to select in a model's
    first CTE over such a table:

        select *, {{ row_commit_version() }} as commit_version
        from {{ source('ops', 'filter_stats') }}

    It is Delta row tracking's `_metadata.row_commit_version`: it only grows with the
    table's commits, whatever the writers' clocks said, and OPTIMIZE keeps it. In a dbt
    unit test the source is a CTE of fixture rows, which no commit wrote: there it is
    null.
-#}
{% macro row_commit_version() -%}
    {{ return(adapter.dispatch('row_commit_version', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__row_commit_version() -%}
    {{ _raise_unsupported_adapter('row_commit_version') }}
{%- endmacro %}

{% macro spark__row_commit_version() -%}
    {%- if model.resource_type == 'unit_test' -%}
        cast(null as bigint)
    {%- else -%}
        _metadata.row_commit_version
    {%- endif -%}
{%- endmacro %}
