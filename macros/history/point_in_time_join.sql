{#-
    The Static Joiner: joins each fact to the dimension version valid at the fact's
    event time, so that history is never rewritten with today's values.

        from {{ ref('silver__visits') }} as v
        {{ point_in_time_join(ref('users_history'), 'u', 'v.event_time',
                              {'v.user_id': 'user_id'}) }}

    A version is valid on [valid_from, valid_to): a fact at exactly `valid_from` gets
    the new version, one at `valid_to` the next (or none, after a delete). A left join:
    a fact before the key's first version, after its delete, or with a null key keeps
    its row with null dimension columns. SCD2 versions of a key do not overlap (test
    them with `scd2_no_overlap`), so a fact matches at most one.
-#}
{% macro point_in_time_join(dimension, alias, event_time, keys, valid_from='valid_from', valid_to='valid_to') -%}
    {{ return(adapter.dispatch('point_in_time_join', 'lakehouse')(
        dimension, alias, event_time, keys, valid_from, valid_to)) }}
{%- endmacro %}

{% macro default__point_in_time_join(dimension, alias, event_time, keys, valid_from, valid_to) -%}
    {{ _raise_unsupported_adapter('point_in_time_join') }}
{%- endmacro %}

{% macro spark__point_in_time_join(dimension, alias, event_time, keys, valid_from, valid_to) -%}
    {%- if keys is not mapping or keys | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "point_in_time_join on " ~ dimension ~ ": `keys` must map fact columns to the "
            ~ "dimension's key columns, e.g. {'v.user_id': 'user_id'}, got " ~ keys) }}
    {%- endif -%}
    left join {{ dimension }} as {{ alias }}
        on
        {%- for fact_column, dimension_column in keys.items() %}
        {{ fact_column }} = {{ alias }}.{{ dimension_column }} and
        {%- endfor %}
        {{ alias }}.{{ valid_from }} <= {{ event_time }}
        and ({{ alias }}.{{ valid_to }} is null or {{ event_time }} < {{ alias }}.{{ valid_to }})
{%- endmacro %}
