{#-
    Creates the run log of the cdc_merge materialization, `ops.cdc_merge_runs`, if it
    does not exist. Runs at the start of every invocation (on-run-start), so that models
    built in parallel threads never race to create it; the materialization also creates
    it when missing (a project without the hook).
-#}
{% macro create_cdc_merge_log() -%}
    {{ return(adapter.dispatch('create_cdc_merge_log', 'lakehouse')()) }}
{%- endmacro %}

{% macro default__create_cdc_merge_log() -%}
    {{ _raise_unsupported_adapter('create_cdc_merge_log') }}
{%- endmacro %}

{% macro spark__create_cdc_merge_log() -%}
    {%- if execute -%}
        {%- do _cdc_merge_ensure_state(_cdc_merge_state_relation()) -%}
    {%- endif -%}
    select 1
{%- endmacro %}
