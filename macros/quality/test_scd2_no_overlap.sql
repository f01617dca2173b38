{#-
    Generic test on an SCD2 relation: no two versions of a key are valid at once. Each
    version is compared with the key's next one (by `valid_from`): it must end no
    later than the next begins. A version still open (`valid_to` null) followed by
    another is an overlap too. Returns the offending versions.
-#}
{% test scd2_no_overlap(model, unique_key, valid_from='valid_from', valid_to='valid_to') %}
    {{ return(adapter.dispatch('test_scd2_no_overlap', 'lakehouse')(
        model, unique_key, valid_from, valid_to)) }}
{% endtest %}

{% macro default__test_scd2_no_overlap(model, unique_key, valid_from, valid_to) -%}
    {{ _raise_unsupported_adapter('test_scd2_no_overlap') }}
{%- endmacro %}

{% macro spark__test_scd2_no_overlap(model, unique_key, valid_from, valid_to) -%}
    {%- set keys = _scd2_test_keys('scd2_no_overlap', model, unique_key) -%}
    {{ _scd2_test_versions(model, keys, valid_from, valid_to) }}

    select *
    from versions
    where next_valid_from is not null and (valid_to is null or next_valid_from < valid_to)
{%- endmacro %}

{#- The CTE `versions`: each version's key, validity and the next version's start;
    `extra`: more select items. -#}
{% macro _scd2_test_versions(model, keys, valid_from, valid_to, extra=[]) -%}
    with versions as (
        select
            {{ keys }},
            {{ valid_from }} as valid_from,
            {{ valid_to }} as valid_to,
            {%- for item in extra %}
            {{ item }},
            {%- endfor %}
            lead({{ valid_from }}) over (
                partition by {{ keys }} order by {{ valid_from }}, {{ valid_to }} nulls last
            ) as next_valid_from
        from {{ model }}
    )
{%- endmacro %}

{#- The key columns as a comma-separated list; fails at compile time when missing. -#}
{% macro _scd2_test_keys(test_name, model, unique_key) -%}
    {%- set keys = [unique_key] if unique_key is string else unique_key -%}
    {%- if keys is none or keys is mapping or keys | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            test_name ~ " on " ~ model ~ ": `unique_key` must be a column or a non-empty "
            ~ "list of columns, got " ~ (unique_key | string)) }}
    {%- endif -%}
    {{ return(keys | join(', ')) }}
{%- endmacro %}
