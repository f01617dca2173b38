{#-
    The windowing core of the three windowed materializations (`cdc_merge`,
    `cdc_history`, `filtered_append`): which rows a run reads, the run log
    `ops.window_runs`, the plan of a run and the restore of a backfill.

    A window is a range of commit versions of the model's input: the rows whose
    `window_column` (default `_bronze_version`, the Delta commit that wrote the row to
    Bronze: `_metadata.row_commit_version`, selected by every staging model) is after
    the last commit the table absorbed, up to the newest commit among the rows the run
    reads (`_window_open`, `_window_close`). Commit versions only grow, whatever the clocks of the writers say, so a
    row is read by exactly one window: a clock stepped back, two hosts' skew, or a
    second writer appending to the same Bronze table lose nothing.

    Every attempt appends a `started` row (its window and the versions it starts from)
    and, when it ends, a `succeeded` row with the versions it produced: appends only,
    taken in the order the log committed them (row tracking), whatever the clocks say.
    A run that creates the table (the first run, a full refresh, a dropped table)
    starts a new lineage: the plan ignores older rows. A table version "ends its
    lineage at point w" when it holds exactly the windows up to w: the base of an
    attempt whose window starts at w, and the result of a succeeded attempt whose
    window ends at w. Compaction and other commits between runs are part of a base, so
    restoring to a base never goes back further than needed.
-#}

{% macro _window_log_relation() -%}
    {{ return(generate_schema_name('ops') ~ '.window_runs') }}
{%- endmacro %}

{% macro _window_timestamp_format() -%}
    {{ return("yyyy-MM-dd HH:mm:ss.SSSSSS") }}
{%- endmacro %}

{#- The run log; `side` is the table's side table whose version a restore also needs
    (tombstones, change store or quarantine). -#}
{% macro _window_log_ensure(log) -%}
    {%- do run_query(
        "create table if not exists " ~ log ~ " ("
        ~ "model string not null, materialization string not null, "
        ~ "attempt_id string not null, execution_time timestamp not null, "
        ~ "run_kind string not null, window_start bigint, window_end bigint, "
        ~ "restored_to_version bigint, base_version bigint not null, "
        ~ "side_base_version bigint not null, version_after bigint, "
        ~ "side_version_after bigint, change_rows bigint, quarantined_rows bigint, "
        ~ "status string not null, recorded_at timestamp not null, "
        ~ _window_log_input_column()
        ~ ") using delta " ~ _delta_tblproperties_clause(_commit_ordered_table_properties())
    ) -%}
{%- endmacro %}

{#- The run log's last column: the Delta table id of the model's input when the run
    read it (`_window_plan`), null when the model has no one source. -#}
{% macro _window_log_input_column() -%}
    {{ return("input_id string comment 'Delta table id of the input the window was read from'") }}
{%- endmacro %}

{#- A run log made by an earlier version of the project (on-run-start,
    `create_ops_tables`): without `input_id`, it gets the column, null in its older
    rows, which no check compares; without row tracking, it gets it
    (`_row_tracking_ensure`: its rows come before every row appended after, ordered
    by `recorded_at` among rows of one version). -#}
{% macro _window_log_migrate(log) -%}
    {%- set names = _cdc_describe(log) | map(attribute='name') | map('lower') | list -%}
    {%- if 'input_id' not in names -%}
        {%- do run_query("alter table " ~ log ~ " add columns ("
            ~ _window_log_input_column() ~ ")") -%}
    {%- endif -%}
    {%- do _row_tracking_ensure(log) -%}
{%- endmacro %}

{#- The run's execution time as `yyyy-MM-dd HH:mm:ss.ffffff` (UTC); default: now. -#}
{% macro _window_execution_time(value, label) -%}
    {%- if value is none or value == '' -%}
        {{ return(run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f')) }}
    {%- endif -%}
    {%- set text = value | string -%}
    {%- set parsed = run_query(
        "select date_format(to_timestamp('" ~ text | replace("\\", "") | replace("'", "")
        ~ "'), '" ~ _window_timestamp_format() ~ "')").columns[0].values()[0] -%}
    {%- if parsed is none -%}
        {{ exceptions.raise_compiler_error(
            label ~ ": var execution_time '" ~ text ~ "' is not a timestamp "
            ~ "(expected ISO-8601, e.g. 2024-10-07T08:00:00)") }}
    {%- endif -%}
    {{ return(parsed) }}
{%- endmacro %}

{#- A window bound as an integer, or none for "the beginning" (nothing read yet). -#}
{% macro _window_point(value) -%}
    {{ return(none if value is none else value | int) }}
{%- endmacro %}

{% macro _window_sql_point(point) -%}
    {{ return("null" if point is none else point | string) }}
{%- endmacro %}

{#-
    The plan of this run, from the model's attempts since its last full refresh:
    - a new execution time continues the lineage: its window starts where the last
      attempt's ended (or, if that attempt did not finish, the table is restored to that
      attempt's base and its window is read again);
    - an execution time that already ran is re-run: the table is restored to the latest
      version whose lineage ends where that execution's recorded window starts, and the
      same window is read again;
    - an execution time earlier than the last one that never ran is refused;
    - if the input (`options.input`) is not the Delta table the lineage's runs read (its
      table id, recorded with each run), the run is refused: `_window_input_recreated`;
    - a run that created the table and did not finish (it may have replaced the table
      and its side tables, or some of them) is followed by a run that creates them
      again (`kind` 'create'), whatever its execution time.
    A finished attempt's window and base versions are those of its `succeeded` row (a
    create records its `started` row before the tables exist, `_window_begin`).
-#}
{% macro _window_plan(log, options, execution_time, fresh) -%}
    {%- set fmt = _window_timestamp_format() -%}
    {#- In the order the log committed them (row tracking), not by `recorded_at`: a
        writer's clock stepped back, or another host's running behind, would put a
        later attempt before an earlier one, and the next window would start from the
        wrong end. `recorded_at`, then `attempt_id`, only order rows of one commit
        version (those a log had before it had row tracking). Ordered here, not by the
        query: a sort in Spark costs a second job. -#}
    {%- set rows = run_query(
        "select date_format(execution_time, '" ~ fmt ~ "'), status, window_start, "
        ~ "window_end, base_version, side_base_version, version_after, "
        ~ "side_version_after, run_kind, attempt_id, date_format(recorded_at, '" ~ fmt
        ~ "'), input_id, _metadata.row_commit_version from " ~ log
        ~ " where model = '" ~ options.model ~ "'")
        | sort(attribute='12,10,9', case_sensitive=true) -%}
    {%- set succeeded = {} -%}
    {%- for row in rows if row[1] == 'succeeded' -%}
        {%- do succeeded.update({row[9]: row}) -%}
    {%- endfor -%}
    {#- An attempt refused because another run of the model wrote the log after it
        planned (`_window_check_alone`) wrote nothing: it is no attempt. -#}
    {%- set refused = rows | selectattr('1', 'equalto', 'refused')
        | map(attribute='9') | list -%}
    {%- set attempts = [] -%}
    {%- for row in rows if row[1] == 'started' and row[9] not in refused -%}
        {%- if row[8] == 'create' -%}
            {%- do attempts.clear() -%}
        {%- endif -%}
        {%- set done = succeeded.get(row[9]) -%}
        {%- set last = row if done is none else done -%}
        {%- do attempts.append({
            'execution_time': row[0], 'status': 'started' if done is none else 'succeeded',
            'kind': row[8], 'start': _window_point(last[2]), 'end': _window_point(last[3]),
            'base': last[4] | int, 'side_base': last[5] | int,
            'after': none if done is none else _window_point(done[6]),
            'side_after': none if done is none else _window_point(done[7]),
            'input_id': row[11],
        }) -%}
    {%- endfor -%}
    {%- if not fresh and not attempts -%}
        {%- do _window_check_unlogged(options) -%}
    {%- endif -%}
    {%- set unfinished = attempts[-1] if attempts and attempts[-1].kind == 'create'
        and attempts[-1].status == 'started' else none -%}
    {%- if not fresh and unfinished is not none -%}
        {#- `log` is the run log's name here: dbt's log() through a macro of its own. -#}
        {%- do _window_log_line(options.kind ~ ": the run of " ~ unfinished.execution_time
            ~ " that created " ~ options.model ~ " did not finish: it is created again") -%}
    {%- endif -%}
    {%- if fresh or unfinished is not none -%}
        {%- do attempts.clear() -%}
    {%- endif -%}
    {#- `seen`: the log's last commit among the rows planned from (-1: none), so that
        the run can see what another run of the model logged since. -#}
    {%- set plan = {'kind': 'create' if fresh or unfinished is not none else 'incremental',
                    'start': none, 'end': none,
                    'restore': none, 'later': [], 'input_id': _window_input_id(options),
                    'seen': rows[-1][12] | int if rows else -1} -%}
    {%- for attempt in attempts
            if attempt.input_id is not none and attempt.input_id != plan.input_id -%}
        {{ _window_input_recreated(options, "its Delta table id was " ~ attempt.input_id
            ~ " when the run of " ~ attempt.execution_time ~ " read it, and is "
            ~ plan.input_id ~ " now") }}
    {%- endfor -%}
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
                    {%- do found.update({'version': (attempt.base, attempt.side_base)}) -%}
                {%- endif -%}
                {%- if attempt.status == 'succeeded' and attempt.end == first.start -%}
                    {%- do found.update({'version': (attempt.after, attempt.side_after)}) -%}
                {%- endif -%}
            {%- endfor -%}
            {%- do plan.update({'restore': found.version}) -%}
        {%- endif -%}
    {%- elif known and execution_time < known | max -%}
        {{ exceptions.raise_compiler_error(
            options.label ~ ": execution_time " ~ execution_time
            ~ " is earlier than the last run (" ~ known | max ~ ") and never ran, so "
            ~ "there is no window to backfill. Re-run one of the recorded execution "
            ~ "times (" ~ log ~ "), or use a later one.") }}
    {%- elif attempts -%}
        {%- set last = attempts[-1] -%}
        {%- if last.status == 'succeeded' -%}
            {%- do plan.update({'start': last.end}) -%}
        {%- else -%}
            {%- do plan.update({'start': last.start,
                                'restore': (last.base, last.side_base)}) -%}
        {%- endif -%}
    {%- endif -%}
    {#- Whether an attempt of the lineage read rows past the window's start (so its side
        table may hold rows of the window): a re-run, the retry of an attempt that did
        not finish, or a run after the re-run of an older window. -#}
    {%- set ends = attempts | map(attribute='end') | reject('none') | list -%}
    {%- do plan.update({'overlaps': ends | length > 0
        and (plan.start is none or ends | max > plan.start)}) -%}
    {#- The side table's version as the lineage's last finished attempt left it (none
        without one): what a run can compare the side table with, to see what changed
        it since (an attempt that died, maintenance). -#}
    {%- set finished = attempts | selectattr('status', 'equalto', 'succeeded') | list -%}
    {%- do plan.update({'finished_side': finished[-1].side_after if finished else none}) -%}
    {{ return(plan) }}
{%- endmacro %}

{#-
    The rows this run reads, (start, end] on the window column (the input's commit
    versions). Before reading, a new window is open-ended (`_window_open`: every row
    committed after `start`); its end is the newest commit among the rows it read
    (`_window_close`), so the input is scanned once per run. A re-run reads its
    recorded window again. With `window_prune_column`, the read is also bounded by the
    input's own commits since `start` (`_window_bound`): it ends at the input's newest
    version and skips the files committed before the window.
-#}
{% macro _window_open(plan, options) -%}
    {%- set window = _window_range(plan.start, plan.end if plan.kind == 'rerun' else none,
        options.window_column, plan.kind == 'rerun') -%}
    {%- if options.prune_column is none or plan.start is none -%}
        {{ return(window) }}
    {%- endif -%}
    {%- set bound = _window_bound(options, plan) -%}
    {%- if bound.get('behind') -%}
        {{ _window_input_recreated(options, bound.reason) }}
    {%- elif bound.reason -%}
        {{ log(options.kind ~ ": the window of " ~ options.model ~ " reads every file of "
            ~ options.input ~ ": " ~ bound.reason, info=true) }}
        {{ return(window) }}
    {%- endif -%}
    {%- set conditions = [_window_range(plan.start, bound.end, options.window_column, true).predicate,
                          bound.predicate] -%}
    {{ log(options.kind ~ ": the window of " ~ options.model ~ " reads the files of "
        ~ options.input ~ " where " ~ conditions | join(' and '), info=true) }}
    {%- do window.update({'predicate': conditions | join(' and ')}) -%}
    {{ return(window) }}
{%- endmacro %}

{#- The bound of a window's read (`_delta_commit_bound` of its input's commits since the
    window's start; a re-run: up to its recorded end). -#}
{% macro _window_bound(options, plan) -%}
    {%- if plan.kind == 'rerun' and plan.end is none -%}
        {{ return({'reason': 'the re-run window has no recorded end'}) }}
    {%- endif -%}
    {{ return(_delta_commit_bound(options.input, options.prune_column, plan.start,
        plan.end if plan.kind == 'rerun' else none)) }}
{%- endmacro %}

{#- The window once its rows are read (`newest`: the greatest window value among
    them, none if none); empty when it ends where it starts. Its predicate is on the
    window column only (the read's bound, if any, is not part of it). -#}
{% macro _window_close(window, plan, newest) -%}
    {%- if plan.kind == 'rerun' -%}
        {{ return(_window_range(window.start, window.end, window.column, true)) }}
    {%- endif -%}
    {%- set end = window.start if newest is none else newest | int -%}
    {{ return(_window_range(window.start, end, window.column, true)) }}
{%- endmacro %}

{% macro _window_range(start, end, window_column, closed) -%}
    {%- set column = '`' ~ window_column ~ '`' -%}
    {%- set conditions = [] -%}
    {%- if start is not none -%}
        {%- do conditions.append(column ~ " > " ~ start) -%}
    {%- endif -%}
    {%- if closed -%}
        {%- do conditions.append(column ~ " <= " ~ _window_sql_point(end)) -%}
    {%- endif -%}
    {{ return({
        'start': start, 'end': end, 'is_empty': closed and end == start,
        'column': window_column, 'predicate': conditions | join(' and ') or 'true',
    }) }}
{%- endmacro %}

{% macro _window_record(log, status, options, execution_time, plan, window, base, side_base, after='null', side_after='null', changes='null', quarantined='null') -%}
    {%- do run_query(
        "insert into " ~ log ~ " values ('" ~ options.model ~ "', '" ~ options.kind ~ "', '"
        ~ invocation_id ~ "', timestamp'" ~ execution_time ~ "', '" ~ plan.kind ~ "', "
        ~ _window_sql_point(window.start) ~ ", " ~ _window_sql_point(window.end) ~ ", "
        ~ ("null" if plan.restore is none else plan.restore[0]) ~ ", "
        ~ base ~ ", " ~ side_base ~ ", " ~ after ~ ", " ~ side_after ~ ", "
        ~ changes ~ ", " ~ quarantined ~ ", '" ~ status ~ "', current_timestamp(), "
        ~ ("null" if plan.input_id is none else "'" ~ plan.input_id ~ "'") ~ ")"
    ) -%}
{%- endmacro %}

{% macro _window_log_line(message) -%}
    {{ log(message, info=true) }}
{%- endmacro %}

{#- Restores the table and its side table to the plan's versions, or changes nothing.
    Checks first that both restores are possible, unless `_window_begin_rerun` did
    (`plan.current`: the tables' versions it found). -#}
{% macro _window_restore(target, side, plan, options) -%}
    {%- if plan.restore is not none -%}
        {%- set pairs = [(target, plan.restore[0]), (side, plan.restore[1])] -%}
        {%- set current = plan.get('current') or _window_check_restorable(target, side, plan) -%}
        {%- for relation, version in pairs if current[relation | string] != version -%}
            {%- do _delta_restore(relation, version) -%}
            {%- do plan.update({'restored': true}) -%}
        {%- endfor -%}
        {{ log(options.kind ~ ": restored " ~ target ~ " to version " ~ plan.restore[0]
            ~ " (before the window it reads again)", info=true) }}
    {%- endif -%}
    {%- if plan.later -%}
        {{ log(options.kind ~ ": " ~ target ~ " no longer holds the windows of the later "
            ~ "execution times " ~ plan.later | join(', ') ~ "; re-run them in order",
            info=true) }}
    {%- endif -%}
{%- endmacro %}

{#- Fails, changing nothing, unless the table and its side table can both be restored
    to the plan's versions; returns their current versions, by relation name. -#}
{% macro _window_check_restorable(target, side, plan) -%}
    {{ return({target | string: _delta_check_restorable(target, plan.restore[0]),
               side | string: _delta_check_restorable(side, plan.restore[1])}) }}
{%- endmacro %}

{#-
    The start of a run, recorded as `started` before the run's first write, so that a run
    that dies after it is repaired by the next one (`_window_plan`):
    - a re-run that restores its table records it before the restore (its window is the
      recorded one; its base, the versions it restores): `_window_begin_rerun`, called
      once the window is open;
    - a create records it before it creates the tables (the table it replaces, if any,
      is no base: -1); the run's base is then the new tables' versions
      (`_window_rebase`);
    - any other run records it once its window is read and closed (the window's end is
      the newest row read); its base is the versions the table has then, or, when it
      repeats an attempt that did not finish, the versions it restored (another run's
      commit since the restore is no part of it).
    `run`: the start `_window_begin_rerun` recorded, if it did. With nothing in the
    window, the run's main statement says so and nothing is written.
-#}
{% macro _window_begin(log, options, execution_time, plan, window, target, side, run=none) -%}
    {%- if run is none -%}
        {%- if plan.kind == 'create' -%}
            {%- set run = {'window': window, 'base': -1, 'side_base': -1} -%}
        {%- elif plan.restore is not none -%}
            {%- set run = {'window': window, 'base': plan.restore[0],
                           'side_base': plan.restore[1]} -%}
        {%- else -%}
            {%- set run = {'window': window, 'base': _delta_version(target),
                           'side_base': _delta_version(side)} -%}
        {%- endif -%}
        {%- do _window_record(log, 'started', options, execution_time, plan, window,
            run.base, run.side_base) -%}
        {%- do _window_check_alone(log, options, execution_time, plan, run) -%}
    {%- endif -%}
    {%- if window.is_empty -%}
        {%- call statement('main') -%}
            select 'no rows committed to the input in the window' as status
        {%- endcall -%}
    {%- endif -%}
    {{ return(run) }}
{%- endmacro %}

{#- A re-run that restores its table: its start, recorded before the restore (see
    `_window_begin`), once the versions it restores are known to be restorable (a
    refused restore changes nothing, the log included); none for any other run. Any
    other run that restores (it repeats an attempt that did not finish) checks first,
    writing nothing, that no other run of the model logged since it planned. -#}
{% macro _window_begin_rerun(log, options, execution_time, plan, window, target, side) -%}
    {%- if plan.kind != 'rerun' or plan.restore is none -%}
        {%- if plan.restore is not none -%}
            {%- do _window_check_alone(log, options, execution_time, plan, none) -%}
        {%- endif -%}
        {{ return(none) }}
    {%- endif -%}
    {%- do plan.update({'current': _window_check_restorable(target, side, plan)}) -%}
    {%- set run = {'window': window, 'base': plan.restore[0], 'side_base': plan.restore[1]} -%}
    {%- do _window_record(log, 'started', options, execution_time, plan, window,
        run.base, run.side_base) -%}
    {%- do _window_check_alone(log, options, execution_time, plan, run) -%}
    {{ return(run) }}
{%- endmacro %}

{#-
    One run of a model at a time: any row another attempt of the model appended to the
    log since this run's plan read it (`plan.seen`) means two runs planned from the same
    log, say a backfill beside the scheduled run on a shared catalog. The later would
    write onto a table the other restores or writes (a window lost, or read twice), so
    it fails, naming the other attempt (the latest). Checked once the run has recorded
    its start (`run`), and, writing nothing, before the restore of a run that repeats an
    attempt that did not finish (`run` none). After its start and before its first
    write, a `refused` row follows the `started` row, and the plans skip such an
    attempt. A run that has restored its tables (`plan.restored`: it took the other's
    attempt, unfinished when it planned, for one that died; the restore may have undone
    the other's merge) is left unfinished instead, its base the versions it restored, so
    that the next run restores them again and reads its window again; unless the other
    run is a full refresh, whose new lineage its restore may have mixed with the old
    one: refused, it asks for a full refresh again. Two runs that record their starts
    at once both fail.
-#}
{% macro _window_check_alone(log, options, execution_time, plan, run) -%}
    {%- set others = run_query(
        "select attempt_id, status, run_kind, date_format(execution_time, '"
        ~ _window_timestamp_format() ~ "'), _metadata.row_commit_version from " ~ log
        ~ " where model = '" ~ options.model ~ "' and attempt_id != '" ~ invocation_id
        ~ "' and _metadata.row_commit_version > " ~ plan.seen) -%}
    {%- if others | length == 0 -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set other = (others | sort(attribute='4'))[-1] -%}
    {%- set found = "another run of " ~ options.model ~ " (attempt " ~ other[0]
        ~ ", execution_time " ~ other[3] ~ ", " ~ other[2] ~ ", " ~ other[1] ~ ") wrote "
        ~ log ~ " after this run read it: two runs of one model at once would each write "
        ~ "onto the table the other changes (a window lost, or read twice). " -%}
    {#- Rows: on_schema_change may have changed the tables' columns before the start. -#}
    {%- set nothing = found ~ "No row was written; run it again once the other run has ended" -%}
    {%- set restored = plan.get('restored', false) -%}
    {%- if run is none -%}
        {#- Before its restore and its start: nothing of this run in the log. -#}
        {{ _cdc_config_error(options.label, nothing) }}
    {%- elif restored and 'create' not in others | map(attribute='2') | list -%}
        {{ _cdc_config_error(options.label, found ~ "This run had restored its tables to "
            ~ "the base of an attempt it took for one that died (versions " ~ plan.restore
            | join(', ') ~ "): it is left unfinished, and the next run restores them again "
            ~ "and reads that window again. Run it once the other run has ended") }}
    {%- endif -%}
    {%- do _window_record(log, 'refused', options, execution_time, plan, run.window,
        run.base, run.side_base) -%}
    {%- if restored -%}
        {{ _cdc_config_error(options.label, found ~ "It is a full refresh, and this run "
            ~ "had restored its tables to a version of the lineage before it (versions "
            ~ plan.restore | join(', ') ~ "): they may hold some of both. Once the other "
            ~ "run has ended, rebuild the model with --full-refresh") }}
    {%- endif -%}
    {{ _cdc_config_error(options.label, nothing) }}
{%- endmacro %}

{#- The run's base from here on: its tables' versions now, once a create has created
    them or a re-run has restored them (a restore is a commit of its own; the version
    a table has when the run does not write it again). Nothing for `run` none. -#}
{% macro _window_rebase(run, target, side) -%}
    {%- if run is not none -%}
        {%- do run.update({'base': _delta_version(target), 'side_base': _delta_version(side)}) -%}
    {%- endif -%}
    {{ return(run) }}
{%- endmacro %}

{#- The end of a run: recorded as `succeeded` with the versions it produced; then the
    model's docs and `grants`, as dbt-spark's own materializations apply them (on open
    source Spark, whose SQL has no GRANT, a model with grants fails there, as a dbt-spark
    `table` does). `written`: whether the run wrote the table and its side table
    (`{'target': bool, 'side': bool}`); one it did not write is still at its base
    version, which is recorded without reading its history again. -#}
{% macro _window_end(log, options, execution_time, plan, run, target, side, counts, changes, written) -%}
    {%- do _window_record(log, 'succeeded', options, execution_time, plan, run.window,
        run.base, run.side_base,
        _delta_version(target) if written.target else run.base,
        _delta_version(side) if written.side else run.side_base,
        counts.changes, counts.quarantined) -%}
    {%- do run_query('drop view if exists ' ~ changes) -%}
    {%- do persist_docs(target, model) -%}
    {%- do apply_grants(target, options.grants, should_revoke=options.revoke_grants) -%}
{%- endmacro %}

{#- The Delta table id of the model's input, none without one input. -#}
{% macro _window_input_id(options) -%}
    {%- if options.input is none -%}
        {{ return(none) }}
    {%- endif -%}
    {{ return(run_query("describe detail " ~ options.input)[0]['id']) }}
{%- endmacro %}

{#-
    Refuses a run whose input is no longer the table its recorded windows are commit
    versions of: the table was dropped and made again (e.g. re-ingested from scratch:
    its versions begin again, so a window would read none of its rows, or only the
    newest) or replaced (`create or replace`: a new table id). Nothing is written; one
    full refresh rebuilds the model from the table as it is.
-#}
{% macro _window_input_recreated(options, detail) -%}
    {{ _cdc_config_error(options.label, "its input " ~ options.input ~ " is not the table "
        ~ "its windows were recorded on (" ~ detail ~ "): it was dropped and made again, "
        ~ "or replaced, so its commit versions do not continue those windows. Rebuild "
        ~ "the model from it once: dbt build --select " ~ model.name ~ " --full-refresh") }}
{%- endmacro %}

{#-
    A table with no run in `ops.window_runs`: built by a version of the project whose
    windows were on ingestion time (its quarantine's `window_value` a timestamp), by
    another materialization, or its runs were deleted from the log. Refused with the
    fix, one full refresh, where the next run cannot know what the table holds: a
    legacy table, and a
    `filtered_append` table, whose rows a run reading every input row again would
    append a second time (without `unique_key`) or count as duplicates. (`cdc_merge`
    and `cdc_history` merge every change again by its sequence: the same table.)
    Checked only then (`_window_plan`).
-#}
{% macro _window_check_unlogged(options) -%}
    {%- set quarantine = _window_side_relation('__quarantine') -%}
    {%- if load_relation(quarantine) is not none -%}
        {%- for column in _cdc_describe(quarantine)
                if column.name == 'window_value' and column.type != 'bigint' -%}
            {{ _cdc_config_error(options.label, quarantine ~ " has windows on ingestion "
                ~ "time (window_value " ~ column.type ~ "), from an earlier version of the "
                ~ "project; windows are now Bronze commit versions: rebuild the model "
                ~ "once with --full-refresh") }}
        {%- endfor -%}
    {%- endif -%}
    {%- if options.kind == 'filtered_append' -%}
        {{ _cdc_config_error(options.label, "the table exists but ops.window_runs has no "
            ~ "run of it (its rows were deleted, or another materialization built it), so "
            ~ "which input rows it holds is not known: reading them all again would append "
            ~ "them twice, or count them as duplicates. Nothing was written. Rebuild the "
            ~ "model once with --full-refresh") }}
    {%- endif -%}
{%- endmacro %}

{#- A side table of the model's table: `<model><suffix>` (tombstones, quarantine, ...). -#}
{% macro _window_side_relation(suffix) -%}
    {{ return(this.incorporate(path={'identifier': this.identifier ~ suffix}, type='table')) }}
{%- endmacro %}

{#-
    The start of every windowed materialization: the model's rows, unfiltered, as the
    view `changes` (its columns decide the table's), whether the table is built afresh,
    the run log, and the run's execution time.
-#}
{% macro _window_prepare(changes, sql, options) -%}
    {%- do run_query('create or replace temporary view ' ~ changes ~ ' as ' ~ sql) -%}
    {#- The model's columns checked first: a full refresh drops a relation that is not
        a Delta table (`_cdc_existing_is_delta`), not for a model that cannot build. -#}
    {%- set columns = _cdc_merge_columns(changes, options) -%}
    {%- set existing = _cdc_existing_is_delta(this, options) -%}
    {%- set prepared = {
        'columns': columns,
        'fresh': existing is none or should_full_refresh(),
        'log': _window_log_relation(),
    } -%}
    {%- do options.update({'revoke_grants': should_revoke(
        existing, full_refresh_mode=should_full_refresh())}) -%}
    {%- do _window_log_ensure(prepared.log) -%}
    {#- python_jobs.run_dbt passes it as LAKEHOUSE_EXECUTION_TIME, not as a var: dbt
        parses the whole project again whenever its vars change. -#}
    {%- do prepared.update({'execution_time': _window_execution_time(
        var('execution_time', env_var('LAKEHOUSE_EXECUTION_TIME', '') or none),
        options.label)}) -%}
    {{ return(prepared) }}
{%- endmacro %}
