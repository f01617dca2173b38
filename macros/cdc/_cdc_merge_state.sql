{#-
    Private helpers of the cdc_merge materialization: the run log `ops.cdc_merge_runs`
    and the plan of a run (which window to merge, onto which table version).

    Every attempt appends a `started` row (its window and the versions it starts from)
    and, when it ends, a `succeeded` row with the versions it produced: appends only, so
    the log costs next to nothing per run. A run that creates the table (the first run,
    a full refresh, a dropped table) starts a new lineage: the plan ignores older rows. A table version "ends its lineage at
    point w" when it holds exactly the windows up to w: the base of an attempt whose
    window starts at w, and the result of a succeeded attempt whose window ends at w.
    Compaction and other commits between runs are part of a base, so restoring to a
    base never goes back further than needed.
-#}

{% macro _cdc_merge_state_relation() -%}
    {{ return(generate_schema_name('ops') ~ '.cdc_merge_runs') }}
{%- endmacro %}

{% macro _cdc_timestamp_format() -%}
    {{ return("yyyy-MM-dd HH:mm:ss.SSSSSS") }}
{%- endmacro %}

{% macro _cdc_merge_ensure_state(state) -%}
    {%- do run_query(
        "create table if not exists " ~ state ~ " ("
        ~ "model string not null, attempt_id string not null, "
        ~ "execution_time timestamp not null, run_kind string not null, "
        ~ "window_start timestamp, window_end timestamp, "
        ~ "restored_to_version bigint, base_version bigint not null, "
        ~ "tombstones_base_version bigint not null, version_after bigint, "
        ~ "tombstones_version_after bigint, change_rows bigint, quarantined_rows bigint, "
        ~ "status string not null, recorded_at timestamp not null"
        ~ ") using delta"
    ) -%}
{%- endmacro %}

{#- The run's execution time as `yyyy-MM-dd HH:mm:ss.ffffff` (UTC); default: now. -#}
{% macro _cdc_merge_execution_time(value) -%}
    {%- if value is none or value == '' -%}
        {{ return(run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f')) }}
    {%- endif -%}
    {%- set text = value | string -%}
    {%- set parsed = run_query(
        "select date_format(to_timestamp('" ~ text | replace("\\", "") | replace("'", "")
        ~ "'), '" ~ _cdc_timestamp_format() ~ "')").columns[0].values()[0] -%}
    {%- if parsed is none -%}
        {{ exceptions.raise_compiler_error(
            "cdc_merge: var execution_time '" ~ text ~ "' is not a timestamp "
            ~ "(expected ISO-8601, e.g. 2024-10-07T08:00:00)") }}
    {%- endif -%}
    {{ return(parsed) }}
{%- endmacro %}

{#- `''` stands for "the beginning" (nothing merged yet) in lineage comparisons. -#}
{% macro _cdc_point(value) -%}
    {{ return('' if value is none else value) }}
{%- endmacro %}

{#-
    The plan of this run, from the model's attempts since its last full refresh:
    - a new execution time continues the lineage: its window starts where the last
      attempt's ended (or, if that attempt did not finish, the table is restored to that
      attempt's base and its window is merged again);
    - an execution time that already ran is re-run: the table is restored to the latest
      version whose lineage ends where that execution's recorded window starts, and the
      same window is merged again;
    - an execution time earlier than the last one that never ran is refused.
-#}
{% macro _cdc_merge_plan(state, model_name, execution_time, fresh, kind='cdc_merge') -%}
    {%- set fmt = _cdc_timestamp_format() -%}
    {%- set attempts = [] -%}
    {%- for row in run_query(
        "select date_format(s.execution_time, '" ~ fmt ~ "'), coalesce(f.status, s.status), "
        ~ "date_format(s.window_start, '" ~ fmt ~ "'), date_format(s.window_end, '" ~ fmt
        ~ "'), s.base_version, s.tombstones_base_version, f.version_after, "
        ~ "f.tombstones_version_after, s.run_kind "
        ~ "from " ~ state ~ " as s left join " ~ state ~ " as f on f.model = s.model "
        ~ "and f.attempt_id = s.attempt_id and f.status = 'succeeded' "
        ~ "where s.model = '" ~ model_name ~ "' and s.status = 'started' "
        ~ "order by s.recorded_at, s.attempt_id"
    ) -%}
        {%- if row[8] == 'create' -%}
            {%- do attempts.clear() -%}
        {%- endif -%}
        {%- do attempts.append({
            'execution_time': row[0], 'status': row[1],
            'start': _cdc_point(row[2]), 'end': _cdc_point(row[3]),
            'base': row[4] | int, 'tombstones_base': row[5] | int,
            'after': none if row[6] is none else row[6] | int,
            'tombstones_after': none if row[7] is none else row[7] | int,
        }) -%}
    {%- endfor -%}
    {%- if fresh -%}
        {%- do attempts.clear() -%}
    {%- endif -%}
    {%- set plan = {'kind': 'create' if fresh else 'incremental', 'start': '', 'end': none,
                    'restore': none, 'later': []} -%}
    {%- set known = attempts | map(attribute='execution_time') | unique | list -%}
    {%- if execution_time in known -%}
        {%- set first = (attempts | selectattr('execution_time', 'equalto', execution_time) | list)[0] -%}
        {%- do plan.update({'kind': 'rerun', 'start': first.start, 'end': first.end}) -%}
        {%- do plan.update({'later': known | select('gt', execution_time) | list}) -%}
        {%- set last = attempts[-1] -%}
        {%- if not (last.status == 'succeeded' and last.end == first.start) -%}
            {#- The latest version whose lineage ends at this window's start. -#}
            {%- set found = {'version': none} -%}
            {%- for attempt in attempts -%}
                {%- if attempt.start == first.start -%}
                    {%- do found.update({'version': (attempt.base, attempt.tombstones_base)}) -%}
                {%- endif -%}
                {%- if attempt.status == 'succeeded' and attempt.end == first.start -%}
                    {%- do found.update({'version': (attempt.after, attempt.tombstones_after)}) -%}
                {%- endif -%}
            {%- endfor -%}
            {%- do plan.update({'restore': found.version}) -%}
        {%- endif -%}
    {%- elif known and execution_time < known | max -%}
        {{ exceptions.raise_compiler_error(
            kind ~ " (model " ~ model_name ~ "): execution_time " ~ execution_time
            ~ " is earlier than the last run (" ~ known | max ~ ") and never ran, so "
            ~ "there is no window to backfill. Re-run one of the recorded execution "
            ~ "times (" ~ state ~ "), or use a later one.") }}
    {%- elif attempts -%}
        {%- set last = attempts[-1] -%}
        {%- if last.status == 'succeeded' -%}
            {%- do plan.update({'start': last.end}) -%}
        {%- else -%}
            {%- do plan.update({'start': last.start,
                                'restore': (last.base, last.tombstones_base)}) -%}
        {%- endif -%}
    {%- endif -%}
    {{ return(plan) }}
{%- endmacro %}

{#- The window of change rows this run merges: (start, end] on the window column. -#}
{% macro _cdc_merge_window(changes, window_column, plan) -%}
    {%- set start = plan.start -%}
    {%- if plan.kind == 'rerun' -%}
        {%- set end = plan.end -%}
    {%- else -%}
        {%- set after = "" if start == '' else " where `" ~ window_column
            ~ "` > timestamp'" ~ start ~ "'" -%}
        {%- set end = _cdc_point(run_query(
            "select date_format(max(`" ~ window_column ~ "`), '" ~ _cdc_timestamp_format()
            ~ "') from " ~ changes ~ after).columns[0].values()[0]) -%}
        {%- set end = start if end == '' else end -%}
    {%- endif -%}
    {%- set conditions = [] -%}
    {%- if start != '' -%}
        {%- do conditions.append("`" ~ window_column ~ "` > timestamp'" ~ start ~ "'") -%}
    {%- endif -%}
    {%- do conditions.append("`" ~ window_column ~ "` <= timestamp'" ~ end ~ "'") -%}
    {{ return({
        'start': start, 'end': end, 'is_empty': end == start,
        'predicate': conditions | join(' and '),
    }) }}
{%- endmacro %}

{% macro _cdc_sql_timestamp(point) -%}
    {{ return("null" if point == '' else "timestamp'" ~ point ~ "'") }}
{%- endmacro %}

{% macro _cdc_merge_record(state, status, model_name, execution_time, plan, window, base, tombstones_base, after='null', tombstones_after='null', changes='null', quarantined='null') -%}
    {%- do run_query(
        "insert into " ~ state ~ " values ('" ~ model_name ~ "', '" ~ invocation_id ~ "', "
        ~ "timestamp'" ~ execution_time ~ "', '" ~ plan.kind ~ "', "
        ~ _cdc_sql_timestamp(window.start) ~ ", " ~ _cdc_sql_timestamp(window.end) ~ ", "
        ~ ("null" if plan.restore is none else plan.restore[0]) ~ ", "
        ~ base ~ ", " ~ tombstones_base ~ ", " ~ after ~ ", " ~ tombstones_after ~ ", "
        ~ changes ~ ", " ~ quarantined ~ ", '" ~ status ~ "', current_timestamp())"
    ) -%}
{%- endmacro %}

{#- Restores the table and its tombstones to the plan's versions, or changes nothing. -#}
{% macro _cdc_merge_apply_restore(target, tombstones, plan, kind='cdc_merge') -%}
    {%- if plan.restore is not none -%}
        {%- set pairs = [(target, plan.restore[0]), (tombstones, plan.restore[1])] -%}
        {%- for relation, version in pairs -%}
            {%- do _delta_check_restorable(relation, version) -%}
        {%- endfor -%}
        {%- for relation, version in pairs if _delta_version(relation) != version -%}
            {%- do run_query("restore table " ~ relation ~ " to version as of " ~ version) -%}
        {%- endfor -%}
        {{ log(kind ~ ": restored " ~ target ~ " to version " ~ plan.restore[0]
            ~ " (before the window it merges again)", info=true) }}
    {%- endif -%}
    {%- if plan.later -%}
        {{ log(kind ~ ": " ~ target ~ " no longer holds the windows of the later "
            ~ "execution times " ~ plan.later | join(', ') ~ "; re-run them in order",
            info=true) }}
    {%- endif -%}
{%- endmacro %}

{#-
    The start of a run: its window, the versions it starts from (the table's and its
    side table's: tombstones or change store), recorded as `started`. With nothing in
    the window, the run's main statement says so and nothing is written.
-#}
{% macro _cdc_merge_begin(state, model_name, execution_time, plan, changes, options, target, side) -%}
    {#- The window: rows after the lineage's end (or the recorded window of a re-run). -#}
    {%- set window = _cdc_merge_window(changes, options.window_column, plan) -%}
    {%- set run = {'window': window, 'base': _delta_version(target),
                   'side_base': _delta_version(side)} -%}
    {%- do _cdc_merge_record(state, 'started', model_name, execution_time, plan, window,
        run.base, run.side_base) -%}
    {%- if window.is_empty -%}
        {%- call statement('main') -%}
            select 'no change rows ingested in the window' as status
        {%- endcall -%}
    {%- endif -%}
    {{ return(run) }}
{%- endmacro %}

{#- The end of a run: recorded as `succeeded` with the versions it produced. -#}
{% macro _cdc_merge_end(state, model_name, execution_time, plan, run, target, side, counts, changes) -%}
    {%- do _cdc_merge_record(state, 'succeeded', model_name, execution_time, plan, run.window,
        run.base, run.side_base, _delta_version(target), _delta_version(side),
        counts.changes, counts.quarantined) -%}
    {%- do run_query('drop view if exists ' ~ changes) -%}
    {%- do persist_docs(target, model) -%}
{%- endmacro %}

{#- A side table of the model's table: `<model><suffix>` (tombstones, quarantine, ...). -#}
{% macro _cdc_side_relation(suffix) -%}
    {{ return(this.incorporate(path={'identifier': this.identifier ~ suffix}, type='table')) }}
{%- endmacro %}

{#-
    The start of both materializations: the model's rows, unfiltered, as the view
    `changes` (its columns decide the table's), whether the table is built afresh, the
    run log, and the run's execution time.
-#}
{% macro _cdc_merge_prepare(changes, sql, options, state) -%}
    {%- do run_query('create or replace temporary view ' ~ changes ~ ' as ' ~ sql) -%}
    {%- set prepared = {
        'columns': _cdc_merge_columns(changes, options),
        'fresh': _cdc_existing_is_delta(this, options) is none or should_full_refresh(),
    } -%}
    {%- do _cdc_merge_ensure_state(state) -%}
    {%- do prepared.update(
        {'execution_time': _cdc_merge_execution_time(var('execution_time', none))}) -%}
    {{ return(prepared) }}
{%- endmacro %}
