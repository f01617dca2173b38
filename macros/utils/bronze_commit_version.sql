{#-
    The Bronze commit that wrote a row, selected as `_bronze_version` in the first CTE of
    every staging model over a Bronze table:

        select *, {{ bronze_commit_version() }} as _bronze_version
        from {{ source('blog', 'blog_public_users') }}

    It is `row_commit_version()`, Delta row tracking's `_metadata.row_commit_version`
    (Bronze tables have row tracking on); the windowed materializations read the rows
    committed since their last run by it (docs/materializations.md, "Windows, the run
    log and execution_time"). In a dbt unit test the source is a CTE of fixture rows,
    which no commit wrote: there it is null.
-#}
{% macro bronze_commit_version() -%}
    {{ return(adapter.dispatch('bronze_commit_version', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__bronze_commit_version() -%}
    {{ _raise_unsupported_adapter('bronze_commit_version') }}
{%- endmacro %}

{% macro spark__bronze_commit_version() -%}
    {{ row_commit_version() }}
{%- endmacro %}
