{#-
    Generic test on an SCD2 relation: consecutive versions of a key meet - each ends
    exactly where the next begins - unless the earlier one was closed by a delete
    (`closed_by_delete`, a SQL condition on the earlier version; without it, every gap
    fails). Returns the versions followed by a gap.
-#}
{% test scd2_no_gaps(model, unique_key, valid_from='valid_from', valid_to='valid_to', closed_by_delete='false') %}
    {{ return(adapter.dispatch('test_scd2_no_gaps', 'lakehouse')(
        model, unique_key, valid_from, valid_to, closed_by_delete)) }}
{% endtest %}

{% macro default__test_scd2_no_gaps(model, unique_key, valid_from, valid_to, closed_by_delete) -%}
    {{ _raise_unsupported_adapter('test_scd2_no_gaps') }}
{%- endmacro %}

{% macro spark__test_scd2_no_gaps(model, unique_key, valid_from, valid_to, closed_by_delete='false') -%}
    {%- set keys = _scd2_test_keys('scd2_no_gaps', model, unique_key) -%}
    {{ _scd2_test_versions(model, keys, valid_from, valid_to,
        ['coalesce(' ~ closed_by_delete ~ ', false) as closed_by_delete']) }}

    select *
    from versions
    where
        next_valid_from is not null
        and valid_to is not null
        and next_valid_from > valid_to
        and not closed_by_delete
{%- endmacro %}
