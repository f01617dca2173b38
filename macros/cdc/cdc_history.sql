{#-
    The `cdc_history` materialization: a model's change rows (one row per change event)
    become an SCD Type 2 Delta table, one row per version of each key.

        {{ config(
            materialized='cdc_history',
            unique_key=['user_id'],
            sequence_by=['_source_lsn', '_source_file', '_line_number'],
            valid_from='_source_committed_at',
        ) }}
        select user_id, email, plan, op, _source_lsn, _source_file, _line_number,
            _source_committed_at, _bronze_version
        from {{ ref('stg_blog__users') }}

    Every change is kept in `<model>__changes` (typed, one row per change event); each
    run appends the rows committed to its input since the last run (the same windows
    and run log as `cdc_merge`, macros/windows), then recomputes the whole history of the keys the window touched from
    their changes, in `sequence_by` order, and merges only the versions that differ.
    So a late change is placed where its sequence falls, a re-run or backfill of any
    window replaces that window's changes and gives the same history, and a full
    refresh equals the incremental result by construction. Semantics and
    configuration: macros/cdc/_cdc__macros.yml and docs/materializations.md.
-#}
{% materialization cdc_history, adapter='spark' -%}
    {%- set options = _cdc_history_options(model, config) -%}
    {%- set target = this.incorporate(type='table') -%}
    {%- set store = _window_side_relation('__changes') -%}
    {%- set quarantine = _window_side_relation('__quarantine') -%}
    {%- set changes = this.identifier ~ '__cdc_changes' -%}
    {%- set batch = this.identifier ~ '__cdc_batch' -%}

    {{ run_hooks(pre_hooks) }}

    {%- set prepared = _window_prepare(changes, sql, options) -%}
    {%- set columns = prepared.columns -%}
    {%- do _cdc_history_tracked(columns, options) -%}
    {%- set log = prepared.log -%}
    {%- set execution_time = prepared.execution_time -%}

    {#- No restore: the history is a function of the change store, and a crashed or
        re-run window replaces its own rows there. -#}
    {%- set plan = _window_plan(log, options, execution_time, prepared.fresh) -%}
    {%- do plan.update({'restore': none}) -%}
    {#- Before any write: opening the window may refuse the run (`_window_open`). Each
        run records its start before its first write (`_window_begin`). -#}
    {%- set window = _window_open(plan, options) -%}
    {%- set columns = _window_sync_columns([] if plan.kind == 'create' else [target, store],
        changes, columns, options) -%}
    {#- A column the tables keep but the model no longer selects is carried, null in the
        window's changes: the versions before it keep their values and stay apart. -#}
    {%- if columns.kept -%}
        {%- do run_query('create or replace temporary view ' ~ changes ~ ' as select *, '
            ~ _cdc_null_columns(columns.kept) ~ ' from (' ~ sql ~ ') as model') -%}
        {%- do columns.update({'carried': columns.carried + columns.kept}) -%}
    {%- endif -%}
    {%- do columns.update({'tracked': _cdc_history_tracked(columns, options)}) -%}

    {%- set summary = _cdc_merge_read_batch(changes, batch, columns, options, window) -%}
    {%- set window = _window_close(window, plan, summary.newest) -%}
    {%- set run = _window_begin(log, options, execution_time, plan, window, target,
        store) -%}
    {%- if plan.kind == 'create' -%}
        {%- do _cdc_history_create(target, store, quarantine, changes, columns, options) -%}
        {%- set run = _window_rebase(run, target, store) -%}
    {%- endif -%}
    {%- set counts = {'changes': 0, 'quarantined': 0} -%}
    {#- A dropped column can make versions that differed only in it equal: every key's
        history is recomputed then, so it equals a full refresh's. Dropped by this run,
        or since the last finished run: by a run that died after its `alter table` and
        before it recorded its start, or by hand (the change store's history says). -#}
    {%- set dropped = columns.dropped -%}
    {%- if plan.kind != 'create' and not dropped -%}
        {%- set dropped = _delta_dropped_columns(store, plan.finished_side, run.side_base) -%}
        {%- if dropped -%}
            {%- do _window_log_line(options.label ~ ": " ~ store ~ " lost columns since the "
                ~ "last finished run (" ~ dropped | join(', ')
                ~ "): every key's history is recomputed") -%}
        {%- endif -%}
    {%- endif -%}
    {%- set writes = not window.is_empty or dropped | length > 0 -%}
    {%- if writes -%}
        {%- do counts.update(summary) -%}
        {%- if not window.is_empty -%}
            {%- do _cdc_merge_quarantine_batch(quarantine, batch, columns, options, plan,
                window, execution_time, summary) -%}
        {%- endif -%}
        {%- set store_window = window.predicate
            | replace('`' ~ options.window_column ~ '`', '_cdc_window_value') -%}
        {#- The store as this run found it (its version at the run's start): the keys
            of the window's rows that the append below replaces are touched too. -#}
        {%- set store_before = store ~ ' version as of ' ~ run.side_base -%}
        {#- Truncates the store holds: any (the versions apply them only then), and in
            the window the append replaces (its keys are then every key). Read before
            the append, so the current store is the store as this run found it (no time
            travel); Delta skips the files whose statistics show no truncate. -#}
        {%- set held = run_query("select count(*) > 0, count_if(" ~ store_window ~ ") > 0 from "
            ~ store ~ " where _cdc_is_truncate")[0] -%}
        {%- set every_key = summary.truncates > 0 or dropped | length > 0 or held[1] -%}
        {%- set truncates = summary.truncates > 0 or held[0] -%}
        {#- A window with nothing in it (a run that only drops a column) appends nothing
            (its `replace where` range is empty, which Spark fails to plan as an
            overwrite of a Delta table). -#}
        {%- if not window.is_empty -%}
            {%- do run_query(_cdc_history_store_sql(store, batch, store_window)) -%}
        {%- endif -%}
        {%- call statement('main') -%}
            {{ _cdc_history_merge_sql(target, store, store_before, batch, columns, store_window,
                every_key, truncates, plan.overlaps) }}
        {%- endcall -%}
    {%- endif -%}
    {%- do _cdc_uncache(batch) -%}

    {%- do _window_end(log, options, execution_time, plan, run, target, store, counts,
        changes, {'target': writes, 'side': writes}) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target]}) }}
{%- endmaterialization %}

{% materialization cdc_history, default -%}
    {{ _raise_unsupported_adapter('cdc_history') }}
{%- endmaterialization %}
