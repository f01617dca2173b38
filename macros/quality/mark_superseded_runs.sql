{#-
    The rule that says which runs of a windowed model stand, for everything that totals
    statistics over runs (`ops.filter_stats_current`, the skew tests, the demo summary
    and the report read it):

        {{ mark_superseded_runs('filter_stats', ['relation'], commit_version='commit_version') }}

    Every row of `relation` (a table of per-run statistics with `execution_time`,
    `window_start` and `window_end` columns) is returned with `superseded_by`: null when
    its run stands, else the first later run of the same model (`partition_by`) that
    processed its rows again, that is one that
    - ran the same execution time (a backfill of that window), or
    - started its window before this run's window ended (null: from the beginning): a
      full refresh, a backfill of an earlier window (it restores the table to before
      that window, so the later windows are merged again), or the run after a failed
      attempt.
    So each window counts once, in its latest run, and summing the standing rows gives
    what the table holds. `run_id` names the run; rows sharing it are one run.

    "Later" is the order the statistics were recorded in: by `commit_version` (default
    `_metadata.row_commit_version`, the commit of `ops.filter_stats` that appended the
    run's rows: the table has row tracking), then `started_at` for runs of one commit.
    Not by `started_at` alone: that is dbt's `run_started_at`, the clock of the host
    that ran it, and a backfill from a host whose clock runs behind would not supersede
    the run it repeats. A CTE or subquery passes a column it selected with
    `row_commit_version()`; `commit_version=none` orders by `started_at` only.
-#}
{% macro mark_superseded_runs(relation, partition_by, run_id='invocation_id',
        started_at='run_started_at', commit_version='_metadata.row_commit_version') -%}
    {{ return(adapter.dispatch('mark_superseded_runs', 'lakehouse')(
        relation, partition_by, run_id, started_at, commit_version)) }}
{%- endmacro %}

{% macro default__mark_superseded_runs(relation, partition_by, run_id, started_at, commit_version) -%}
    {{ _raise_unsupported_adapter('mark_superseded_runs') }}
{%- endmacro %}

{% macro spark__mark_superseded_runs(relation, partition_by, run_id, started_at, commit_version) -%}
    {%- set keys = _cdc_as_list(partition_by, 'partition_by',
        'mark_superseded_runs (' ~ relation ~ ')') -%}
    {%- set order = started_at if commit_version is none else
        "named_struct('commit', " ~ commit_version ~ ", 'started', " ~ started_at ~ ")" -%}
    {%- set runs -%}
        (
            select
                {% for key in keys -%}
                {{ key }},
                {% endfor -%}
                {{ run_id }} as _run_id,
                min({{ order }}) as _run_order,
                execution_time as _execution_time,
                window_start as _window_start,
                window_end as _window_end
            from {{ relation }}
            group by
                {% for key in keys -%}
                {{ key }},
                {% endfor -%}
                {{ run_id }},
                execution_time,
                window_start,
                window_end
        )
    {%- endset -%}
    select
        _marked_rows.*,
        _superseded.superseded_by
    from {{ relation }} as _marked_rows
    left join (
        select
            {% for key in keys -%}
            _earlier.{{ key }},
            {% endfor -%}
            _earlier._run_id,
            min_by(_later._run_id, _later._run_order) as superseded_by
        from {{ runs }} as _earlier
        inner join {{ runs }} as _later
            on
                {% for key in keys -%}
                _later.{{ key }} <=> _earlier.{{ key }}
                and {% endfor -%}
                _later._run_order > _earlier._run_order
                and (
                    _later._execution_time = _earlier._execution_time
                    or (_later._window_start is null and _earlier._window_end is not null)
                    or _later._window_start < _earlier._window_end
                )
        group by
            {% for key in keys -%}
            _earlier.{{ key }},
            {% endfor -%}
            _earlier._run_id
    ) as _superseded
        on
            {% for key in keys -%}
            _marked_rows.{{ key }} <=> _superseded.{{ key }}
            and {% endfor -%}
            _marked_rows.{{ run_id }} = _superseded._run_id
{%- endmacro %}
