{#-
    Generic test: the combination of `columns` is unique in the model. Null key parts
    compare equal (a composite key with a null part still identifies one row).
-#}
{% test unique_combination(model, columns) %}
    {%- if columns is string or columns | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "unique_combination on " ~ model ~ ": `columns` must be a non-empty list, got "
            ~ columns
        ) }}
    {%- endif -%}
    select
        {{ columns | join(', ') }},
        count(*) as n_rows
    from {{ model }}
    group by {{ columns | join(', ') }}
    having count(*) > 1
{% endtest %}
