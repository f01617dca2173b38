{#-
    The Windowed Deduplicator, over a batch: keeps one row per `unique_key`, the first
    by `order_by`, deterministically.

        {{ deduplicate('stg_visits', ['visit_id'], ['_bronze_version', '_line_number']) }}

    Key parts match null-safely (rows whose key parts are both NULL are duplicates of
    each other, as in a `group by`). `order_by` items are expressions with an optional
    `asc`/`desc`; rows that tie on all of them are ordered by their whole content (as
    JSON), so the same input always keeps the same row: identical rows are
    interchangeable, different rows never depend on the plan. Returns a select of every
    column of `relation`. The `filtered_append` materialization records how many rows it
    removed in `ops.filter_stats`.
-#}
{% macro deduplicate(relation, unique_key, order_by, label='deduplicate') -%}
    {{ return(adapter.dispatch('deduplicate', 'lakehouse')(relation, unique_key, order_by, label)) }}
{%- endmacro %}

{% macro default__deduplicate(relation, unique_key, order_by, label) -%}
    {{ _raise_unsupported_adapter('deduplicate') }}
{%- endmacro %}

{% macro spark__deduplicate(relation, unique_key, order_by, label) -%}
    {%- set keys = _cdc_as_list(unique_key, 'unique_key', label) -%}
    {%- set order = _cdc_as_list(order_by, 'order_by', label) -%}
    select _dedup_kept.*
    from (
        select
            struct(*) as _dedup_kept,
            row_number() over (
                partition by {{ keys | join(', ') }}
                order by {{ order | join(', ') }}, to_json(struct(*))
            ) as _dedup_rank
        from {{ relation }} as _dedup_input
    ) as _dedup_ranked
    where _dedup_rank = 1
{%- endmacro %}
