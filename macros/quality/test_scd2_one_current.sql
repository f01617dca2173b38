{#-
    Generic test on an SCD2 relation: at most one current version per key. Current
    means `valid_to` is null; with `is_current` given, that column must also agree
    with it on every row. Returns the keys with several current versions and the rows
    whose flag disagrees.
-#}
{% test scd2_one_current(model, unique_key, valid_to='valid_to', is_current=none) %}
    {{ return(adapter.dispatch('test_scd2_one_current', 'lakehouse')(
        model, unique_key, valid_to, is_current)) }}
{% endtest %}

{% macro default__test_scd2_one_current(model, unique_key, valid_to, is_current) -%}
    {{ _raise_unsupported_adapter('test_scd2_one_current') }}
{%- endmacro %}

{% macro spark__test_scd2_one_current(model, unique_key, valid_to, is_current) -%}
    {%- set keys = _scd2_test_keys('scd2_one_current', model, unique_key) -%}
    select {{ keys }}, count(*) as failing_rows, 'several current versions' as failure
    from {{ model }}
    where {{ valid_to }} is null
    group by {{ keys }}
    having count(*) > 1
    {%- if is_current is not none %}
    union all
    select {{ keys }}, count(*) as failing_rows, 'is_current disagrees with valid_to' as failure
    from {{ model }}
    where not ({{ is_current }} <=> ({{ valid_to }} is null))
    group by {{ keys }}
    {%- endif %}
{%- endmacro %}
