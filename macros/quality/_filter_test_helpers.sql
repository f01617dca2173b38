{#- Private helpers of the generic tests on `ops.filter_stats`. -#}

{#- The CTEs `runs` (one row per standing run of the model that saw rows: its
    rejected share, by `filter_name` (first failing filter) or by all filters), `latest`
    and `previous` (the latest run, and the one before it). Runs superseded by a later
    run of their window (`mark_superseded_runs`) are left out, so a backfill is compared
    with the run of the previous window, not with the run it replaced. Runs are taken
    in the order `ops.filter_stats` recorded them (its commits), as the rule takes
    them. -#}
{% macro _filter_test_runs(model, filter_name) -%}
    with runs as (
        select
            invocation_id,
            min(commit_version) as commit_version,
            max(run_started_at) as run_started_at,
            {{ "'" ~ filter_name ~ "'" if filter_name else "'all filters'" }} as filter_name,
            sum(rejected_rows) / max(total_rows) as rejected_share
        from ({{ mark_superseded_runs(
            '(select *, ' ~ row_commit_version() ~ ' as commit_version from '
                ~ _filter_stats_relation() ~ ')',
            ['relation'], commit_version='commit_version') }}) as stats
        where
            superseded_by is null
            and model = '{{ model.identifier }}'
            and kind = 'filter'
            and total_rows > 0
            {%- if filter_name %}
            and filter_name = '{{ filter_name }}'
            {%- endif %}
        group by invocation_id
    ),

    latest as (
        select *
        from runs
        order by commit_version desc, run_started_at desc, invocation_id desc
        limit 1
    ),

    previous as (
        select *
        from runs
        order by commit_version desc, run_started_at desc, invocation_id desc
        limit 1 offset 1
    )
{%- endmacro %}

{#- With `filter_name`: a failing row when the model has statistics, but none for it. -#}
{% macro _filter_test_unknown(model, filter_name) -%}
    {%- if filter_name %}
    union all
    select
        max(invocation_id) as invocation_id,
        max(run_started_at) as run_started_at,
        '{{ filter_name }}' as filter_name,
        cast(null as double) as rejected_share,
        'the model has no statistics for filter {{ filter_name }}' as failure
    from {{ _filter_stats_relation() }}
    where model = '{{ model.identifier }}' and kind = 'filter'
    having count(*) > 0 and count_if(filter_name = '{{ filter_name }}') = 0
    {%- endif %}
{%- endmacro %}

{% macro _filter_test_share_argument(test, model, argument, value) -%}
    {%- if value is string or value is none or value < 0 or value > 1 -%}
        {{ exceptions.raise_compiler_error(test ~ " on " ~ model ~ ": " ~ argument
            ~ " must be a share between 0 and 1, got " ~ value) }}
    {%- endif -%}
{%- endmacro %}
