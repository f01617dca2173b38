{#-
    A stable pseudonym of a PII value: the SHA-256 of a secret salt and the value, hex.
    The same value gives the same pseudonym across runs and tables (joins still work);
    without the salt it cannot be reversed by hashing guesses. The salt comes from the
    environment (LAKEHOUSE_PII_SALT, else a random one kept per lakehouse: see
    python_jobs/spark.py) and reaches SQL only as the session setting
    ${spark.lakehouse.pii_salt}, never in compiled SQL or logs. Null stays null.
    Normalise first when equal values may differ in case or spaces, e.g.
    pseudonymize('lower(trim(email))').
-#}
{% macro pseudonymize(expression) -%}
    {{ return(adapter.dispatch('pseudonymize', 'lakehouse')(expression)) }}
{%- endmacro %}

{% macro default__pseudonymize(expression) -%}
    {{ _raise_unsupported_adapter('pseudonymize') }}
{%- endmacro %}

{% macro spark__pseudonymize(expression) -%}
    {%- if execute and env_var('LAKEHOUSE_PII_SALT', '') | length < 16 -%}
        {{ exceptions.raise_compiler_error(
            "pseudonymize: no salt configured: set LAKEHOUSE_PII_SALT (16 characters or "
            ~ "more) for the dbt process and its Spark session, or run dbt through "
            ~ "python -m python_jobs.run_dbt, which provides one") }}
    {%- endif -%}
    sha2(concat(
        case
            when '${spark.lakehouse.pii_salt}' = concat('$', '{spark.lakehouse.pii_salt}')
                then raise_error('pseudonymize: the Spark session has no spark.lakehouse.pii_salt')
            else '${spark.lakehouse.pii_salt}'
        end,
        '|',
        cast({{ expression }} as string)
    ), 256)
{%- endmacro %}
