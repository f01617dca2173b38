{#-
    Decodes a `timestamp` column as Debezium's PostgreSQL connector writes it
    (`io.debezium.time.MicroTimestamp`: microseconds since 1970-01-01, the calendar
    fields taken as UTC) into a Spark timestamp.

    Streamed changes count in the proleptic Gregorian calendar, as PostgreSQL and
    Spark do. Rows of a snapshot (`op = 'r'`), read over JDBC, count a timestamp
    before 1582-10-15 in the Julian calendar instead (java.sql.Timestamp), so
    0001-01-01 arrives two days early (tests/e2e/test_debezium_postgres.py met it on
    the real connector): such a value is turned back into its Julian calendar fields
    (the Julian day number's algorithm, integer arithmetic only) and those are read as
    Gregorian, as PostgreSQL holds them. Exact to the microsecond.
-#}
{% macro decode_debezium_timestamp(column, op_column='op') -%}
    {{ return(adapter.dispatch('decode_debezium_timestamp', 'lakehouse')(column, op_column)) }}
{%- endmacro %}

{% macro default__decode_debezium_timestamp(column, op_column='op') -%}
    {{ _raise_unsupported_adapter('decode_debezium_timestamp') }}
{%- endmacro %}

{% macro spark__decode_debezium_timestamp(column, op_column='op') -%}
    {%- set day = 86400000000 -%}
    {#- The first Gregorian day, 1582-10-15, in microseconds. -#}
    {%- set gregorian_start = -12219292800000000 -%}
    {%- set days = "((" ~ column ~ " - pmod(" ~ column ~ ", " ~ day ~ ")) div " ~ day ~ ")" -%}
    {#- The Julian day number's Julian calendar date (Richards), from c = JDN + 32082. -#}
    {%- set c = "(" ~ days ~ " + 2440588 + 32082)" -%}
    {%- set d = "((4 * " ~ c ~ " + 3) div 1461)" -%}
    {%- set e = "(" ~ c ~ " - (1461 * " ~ d ~ ") div 4)" -%}
    {%- set m = "((5 * " ~ e ~ " + 2) div 153)" -%}
    {%- set julian_date -%}
        make_date(
            cast({{ d }} - 4800 + {{ m }} div 10 as int),
            cast({{ m }} + 3 - 12 * ({{ m }} div 10) as int),
            cast({{ e }} - (153 * {{ m }} + 2) div 5 + 1 as int)
        )
    {%- endset -%}
    case
        when {{ op_column }} = 'r' and {{ column }} < {{ gregorian_start }}
            then timestamp_micros(
                unix_date({{ julian_date }}) * {{ day }} + pmod({{ column }}, {{ day }})
            )
        else timestamp_micros({{ column }})
    end
{%- endmacro %}
