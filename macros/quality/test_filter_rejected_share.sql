{#-
    Generic test on the filter statistics (`ops.filter_stats`) of a model built with
    `filtered_append`: in the model's latest run that saw rows, the share of rows
    rejected by `filter_name` (first failing filter), or by all filters when none is
    named, is at most `max_share`. Returns the run and share when above. `severity:
    warn` makes it a warning. A `filter_name` the model has no statistics for fails.
-#}
{% test filter_rejected_share(model, max_share, filter_name=none) %}
    {{ return(adapter.dispatch('test_filter_rejected_share', 'lakehouse')(
        model, max_share, filter_name)) }}
{% endtest %}

{% macro default__test_filter_rejected_share(model, max_share, filter_name) -%}
    {{ _raise_unsupported_adapter('test_filter_rejected_share') }}
{%- endmacro %}

{% macro spark__test_filter_rejected_share(model, max_share, filter_name) -%}
    {%- do _filter_test_share_argument('filter_rejected_share', model, 'max_share', max_share) -%}
    {{ _filter_test_runs(model, filter_name) }}

    select
        invocation_id,
        run_started_at,
        filter_name,
        rejected_share,
        'rejected share above {{ max_share }}' as failure
    from latest
    where rejected_share > {{ max_share }}
    {{ _filter_test_unknown(model, filter_name) }}
{%- endmacro %}
