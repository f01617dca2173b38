{#-
    Decodes a numeric column as Debezium's JSON converter writes it
    (`org.apache.kafka.connect.data.Decimal`): base64 of the big-endian two's-complement
    unscaled value, the scale taken from the column's declaration.
    Exact (decimal arithmetic only). Supports precision up to 18 (unscaled values of up
    to 8 bytes); a larger precision is a compile-time error, and a value that does not
    fit the declared precision fails the query with its raw text (never a silent NULL).
-#}
{% macro decode_debezium_decimal(column, precision, scale) -%}
    {{ return(adapter.dispatch('decode_debezium_decimal', 'lakehouse')(column, precision, scale)) }}
{%- endmacro %}

{% macro default__decode_debezium_decimal(column, precision, scale) -%}
    {{ _raise_unsupported_adapter('decode_debezium_decimal') }}
{%- endmacro %}

{% macro spark__decode_debezium_decimal(column, precision, scale) -%}
    {%- set where = model.name if model is defined and model else 'decode_debezium_decimal' -%}
    {%- if precision is not number or precision < 1 or precision > 18 -%}
        {{ exceptions.raise_compiler_error(
            where ~ ": decode_debezium_decimal(" ~ column ~ "): precision must be an "
            ~ "integer from 1 to 18, got " ~ precision
        ) }}
    {%- endif -%}
    {%- if scale is not number or scale < 0 or scale > precision -%}
        {{ exceptions.raise_compiler_error(
            where ~ ": decode_debezium_decimal(" ~ column ~ "): scale must be an integer "
            ~ "from 0 to the precision (" ~ precision ~ "), got " ~ scale
        ) }}
    {%- endif -%}
    {%- set bytes = "unbase64(" ~ column ~ ")" -%}
    {%- set unsigned = "cast(conv(hex(" ~ bytes ~ "), 16, 10) as decimal(20, 0))" -%}
    {#- A negative value (top bit set) is the unsigned value minus 2^(8 * bytes); the
        powers are exact decimal literals (a double's 2^64 is not exact as a decimal). -#}
    {%- set sign_offset -%}
        case
            when conv(substr(hex({{ bytes }}), 1, 2), 16, 10) < 128
                then cast(0 as decimal(20, 0))
            {%- for n in range(1, 9) %}
            when length({{ bytes }}) = {{ n }} then cast('{{ 2 ** (8 * n) }}' as decimal(20, 0))
            {%- endfor %}
        end
    {%- endset -%}
    {%- set unscaled = "(" ~ unsigned ~ " - " ~ sign_offset ~ ")" -%}
    {%- set limit = "cast('1" ~ "0" * precision ~ "' as decimal(20, 0))" -%}
    case
        when {{ column }} is null then null
        {#- More than 8 bytes, or more digits than declared: never a silent NULL. #}
        when length({{ bytes }}) not between 1 and 8 or abs({{ unscaled }}) >= {{ limit }}
            then raise_error(concat(
                '{{ where }}: decode_debezium_decimal: ', {{ column }},
                ' is not a numeric({{ precision }},{{ scale }}) value'
            ))
    {%- if scale == 0 %}
        else cast({{ unscaled }} as decimal({{ precision }}, 0))
    {%- else %}
        else cast(
            {{ unscaled }} * {{ "0." ~ "0" * (scale - 1) ~ "1" }}
            as decimal({{ precision }}, {{ scale }})
        )
    {%- endif %}
    end
{%- endmacro %}
