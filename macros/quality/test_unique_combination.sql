{#-
    Generic test: the combination of `columns` is unique in the model. Null key parts
    group together, so a composite key with a null part is still checked.
-#}
{% test unique_combination(model, columns) %}
    {{ return(adapter.dispatch('test_unique_combination', 'lakehouse')(model, columns)) }}
{% endtest %}

{% macro default__test_unique_combination(model, columns) -%}
    {{ _raise_unsupported_adapter('test_unique_combination') }}
{%- endmacro %}

{% macro spark__test_unique_combination(model, columns) -%}
    {%- if columns is none or columns is string or columns is mapping
        or columns | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "unique_combination on " ~ model ~ ": `columns` must be a non-empty list of "
            ~ "column names, got " ~ (columns | string)
        ) }}
    {%- endif -%}
    select
        {{ columns | join(', ') }},
        count(*) as n_rows
    from {{ model }}
    group by {{ columns | join(', ') }}
    having count(*) > 1
{%- endmacro %}
