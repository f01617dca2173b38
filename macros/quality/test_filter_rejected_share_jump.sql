{#-
    Generic test on the filter statistics (`ops.filter_stats`) of a model built with
    `filtered_append`, the Skew Detector: the rejected share of the model's latest run
    (by `filter_name`, or all filters) is at most `factor` times the share of the run
    before it among the runs that stand (`mark_superseded_runs`: a backfill is compared
    with the previous window's run, not with the run of its own window that it
    replaced; runs that saw no rows are skipped). Shares below `min_share` count as
    `min_share`, so that 0.1% after 0% is not a jump. Returns both runs when it jumped.
-#}
{% test filter_rejected_share_jump(model, factor, filter_name=none, min_share=0.01) %}
    {{ return(adapter.dispatch('test_filter_rejected_share_jump', 'lakehouse')(
        model, factor, filter_name, min_share)) }}
{% endtest %}

{% macro default__test_filter_rejected_share_jump(model, factor, filter_name, min_share) -%}
    {{ _raise_unsupported_adapter('test_filter_rejected_share_jump') }}
{%- endmacro %}

{% macro spark__test_filter_rejected_share_jump(model, factor, filter_name, min_share) -%}
    {%- set name = 'filter_rejected_share_jump' -%}
    {%- do _filter_test_share_argument(name, model, 'min_share', min_share) -%}
    {%- if factor is string or factor is none or factor < 1 -%}
        {{ exceptions.raise_compiler_error(name ~ " on " ~ model ~ ": factor must be a "
            ~ "number of at least 1, got " ~ factor) }}
    {%- endif -%}
    {{ _filter_test_runs(model, filter_name) }}

    select
        latest.invocation_id,
        latest.run_started_at,
        latest.filter_name,
        latest.rejected_share,
        concat(
            'rejected share jumped more than {{ factor }}x from ', previous.rejected_share,
            ' (invocation ', previous.invocation_id, ')'
        ) as failure
    from latest
    cross join previous
    where latest.rejected_share
        > {{ factor }} * greatest(previous.rejected_share, {{ min_share }})
    {{ _filter_test_unknown(model, filter_name) }}
{%- endmacro %}
