{#-
    Decodes a numeric column as Debezium's JSON converter writes it
    (`org.apache.kafka.connect.data.Decimal`): base64 of the big-endian two's-complement
    unscaled value, the scale taken from the column's declaration.
    Exact (decimal arithmetic only). Supports precision up to 18 (unscaled values of up
    to 8 bytes); a larger precision is a compile-time error.
-#}
{% macro decode_debezium_decimal(column, precision, scale) -%}
    {{ return(adapter.dispatch('decode_debezium_decimal', 'lakehouse')(column, precision, scale)) }}
{%- endmacro %}

{% macro default__decode_debezium_decimal(column, precision, scale) -%}
    {{ exceptions.raise_compiler_error(
        "decode_debezium_decimal: only the spark adapter is supported, not " ~ adapter.type()
    ) }}
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
    {%- set sign_offset -%}
        case
            when conv(substr(hex({{ bytes }}), 1, 2), 16, 10) >= 128
                then cast(pow(2, 8 * length({{ bytes }})) as decimal(20, 0))
            else cast(0 as decimal(20, 0))
        end
    {%- endset -%}
    {%- if scale == 0 -%}
        cast(({{ unsigned }} - {{ sign_offset }}) as decimal({{ precision }}, 0))
    {%- else -%}
        cast(
            ({{ unsigned }} - {{ sign_offset }}) * {{ "0." ~ "0" * (scale - 1) ~ "1" }}
            as decimal({{ precision }}, {{ scale }})
        )
    {%- endif -%}
{%- endmacro %}
