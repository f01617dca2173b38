{#-
    The `cdc_merge` materialization: a model's change rows (one row per change event)
    become a current-state Delta table, one row per live key.

        {{ config(
            materialized='cdc_merge',
            unique_key=['user_id'],
            sequence_by=['_source_lsn', '_source_file', '_line_number'],
        ) }}
        select user_id, email, op, _source_lsn, _source_file, _line_number, _bronze_version
        from {{ ref('stg_blog__users') }}

    Each run merges only the rows committed to its input since the last run (the
    window, on `window_column`: the Bronze commit version `_bronze_version`) and
    records, per `execution_time`, the window it merged and the Delta versions before
    and after it in `ops.window_runs` (macros/windows). Re-running an execution time
    that already ran restores the table (and its tombstones) to the version it had
    before that window, then merges the window again: the Stateful Merger. Semantics
    and configuration: macros/cdc/_cdc__macros.yml and docs/materializations.md.
-#}
{% materialization cdc_merge, adapter='spark' -%}
    {%- set options = _cdc_merge_options(model, config) -%}
    {%- set target = this.incorporate(type='table') -%}
    {%- set tombstones = _window_side_relation('__tombstones') -%}
    {%- set quarantine = _window_side_relation('__quarantine') -%}
    {%- set changes = this.identifier ~ '__cdc_changes' -%}
    {%- set batch = this.identifier ~ '__cdc_batch' -%}

    {{ run_hooks(pre_hooks) }}

    {%- set prepared = _window_prepare(changes, sql, options) -%}
    {%- set columns = prepared.columns -%}
    {%- set log = prepared.log -%}
    {%- set execution_time = prepared.execution_time -%}

    {%- set plan = _window_plan(log, options, execution_time, prepared.fresh) -%}
    {#- Before any write: opening the window may refuse the run (`_window_open`). Each
        run records its start before its first write (`_window_begin`). -#}
    {%- set window = _window_open(plan, options) -%}
    {%- set run = _window_begin_rerun(log, options, execution_time, plan, window, target,
        tombstones) -%}
    {%- do _window_restore(target, tombstones, plan, options) -%}
    {%- set run = _window_rebase(run, target, tombstones) -%}
    {%- set columns = _window_sync_columns([] if plan.kind == 'create' else [target],
        changes, columns, options) -%}

    {%- set summary = _cdc_merge_read_batch(changes, batch, columns, options, window) -%}
    {%- set window = _window_close(window, plan, summary.newest) -%}
    {%- set run = _window_begin(log, options, execution_time, plan, window, target,
        tombstones, run) -%}
    {%- if plan.kind == 'create' -%}
        {%- do _cdc_merge_create(target, tombstones, quarantine, changes, columns, options) -%}
        {%- set run = _window_rebase(run, target, tombstones) -%}
    {%- endif -%}
    {%- set counts = {'changes': 0, 'quarantined': 0} -%}
    {%- set written = {'target': not window.is_empty, 'side': false} -%}
    {%- if not window.is_empty -%}
        {%- do counts.update(summary) -%}
        {%- do _cdc_merge_quarantine_batch(quarantine, batch, columns, options, plan, window,
            execution_time, summary) -%}
        {%- if summary.truncates > 0 -%}
            {%- do run_query(_cdc_merge_truncate_sql(target, batch, options)) -%}
        {%- endif -%}
        {%- set truncated = summary.truncates > 0 or _cdc_merge_truncated(tombstones) -%}
        {%- call statement('main') -%}
            {{ _cdc_merge_target_sql(target, tombstones, batch, columns, options, truncated) }}
        {%- endcall -%}
        {%- if summary.truncates > 0 or (summary.deletes > 0 and options.delete_mode == 'hard') -%}
            {%- do run_query(_cdc_merge_tombstones_sql(tombstones, batch, columns, options)) -%}
            {%- do written.update({'side': true}) -%}
        {%- endif -%}
    {%- endif -%}
    {%- do _cdc_uncache(batch) -%}

    {%- do _window_end(log, options, execution_time, plan, run, target, tombstones, counts,
        changes, written) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target]}) }}
{%- endmaterialization %}

{% materialization cdc_merge, default -%}
    {{ _raise_unsupported_adapter('cdc_merge') }}
{%- endmaterialization %}
