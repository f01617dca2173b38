{#- Private: what every public macro's `default__` implementation does - refuse to
    guess SQL for an adapter the project does not support. -#}
{% macro _raise_unsupported_adapter(macro_name) -%}
    {{ exceptions.raise_compiler_error(
        macro_name ~ ": only the spark adapter is supported, not " ~ adapter.type()
    ) }}
{%- endmacro %}
