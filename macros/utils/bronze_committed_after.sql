{#-
    A predicate over a Bronze table (`relation`, with row tracking) that selects the rows
    its commits after `version` wrote, for a model that reads only what is new since the
    commit it last read (`ops.source_columns`):

        from {{ source('blog', 'blog_public_users') }}
        where {{ bronze_committed_after(source('blog', 'blog_public_users'), 41) }}

    `bronze_commit_version() > version`, and, where it is exact, bounded to the files of
    those commits by `prune_column` (default `_ingested_at`; `_delta_commit_bound`), so
    that the read skips every older file: its cost follows the new rows. Where the
    bound is not exact (a commit that is not an append, more than 99 commits, no change
    data feed), the predicate is the commit version alone and every file is read.
-#}
{% macro bronze_committed_after(relation, version, prune_column='_ingested_at') -%}
    {{ return(adapter.dispatch('bronze_committed_after', 'lakehouse')(relation, version, prune_column)) }}
{%- endmacro %}

{% macro default__bronze_committed_after(relation, version, prune_column) -%}
    {{ _raise_unsupported_adapter('bronze_committed_after') }}
{%- endmacro %}

{% macro spark__bronze_committed_after(relation, version, prune_column) -%}
    {%- set condition = [bronze_commit_version() ~ ' > ' ~ version] -%}
    {%- set bound = _delta_commit_bound(relation, prune_column, version | int) -%}
    {%- if not bound.reason -%}
        {%- do condition.append(bronze_commit_version() ~ ' <= ' ~ bound.end) -%}
        {%- do condition.append(bound.predicate) -%}
    {%- endif -%}
    {{ return(condition | join(' and ')) }}
{%- endmacro %}
