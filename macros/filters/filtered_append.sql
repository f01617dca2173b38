{#-
    The `filtered_append` materialization: the Filter Interceptor and the Windowed
    Deduplicator over an append-only stream of events.

        {{ config(
            materialized='filtered_append',
            filters=[{'name': 'missing_page', 'condition': "coalesce(trim(page), '') != ''"}],
            filter_mode='all',
            unique_key=['visit_id'],
            dedup_order_by=['_bronze_version', '_source_file', '_line_number'],
        ) }}
        select visit_id, page, _bronze_version, _source_file, _line_number
        from {{ ref('stg_blog__visits') }}

    Each run reads the model's rows committed to its input since the last run (the
    window on `window_column`, the Bronze commit version, recorded in `ops.window_runs`
    as for `cdc_merge`: macros/windows), labels them
    once with `filter_interceptor` (cached), and from that one computation:
    - appends the rows that pass every filter (with `unique_key`: one per key, the
      first by `dedup_order_by`, and only keys not in the table yet: duplicates within
      and across batches go);
    - keeps the rejected rows in `<model>__quarantine` (the first failing filter as
      `reason`, every failing filter in `all` mode, the row as JSON);
    - appends one row per filter (and one for the duplicates) to `ops.filter_stats`,
      zero counts included, once the table is written.
    `exclude_columns` are seen by the filters and kept in the quarantine's record but
    not written to the table. Re-running an execution time restores the table to its
    version before that window and processes the window again (a backfill).
-#}
{% materialization filtered_append, adapter='spark' -%}
    {%- set options = _filtered_append_options(model, config) -%}
    {%- set target = this.incorporate(type='table') -%}
    {%- set quarantine = _window_side_relation('__quarantine') -%}
    {%- set changes = this.identifier ~ '__filter_input' -%}
    {%- set batch = this.identifier ~ '__filter_batch' -%}

    {{ run_hooks(pre_hooks) }}

    {%- set prepared = _window_prepare(changes, sql, options) -%}
    {%- set columns = prepared.columns -%}
    {%- set log = prepared.log -%}
    {%- set execution_time = prepared.execution_time -%}
    {%- do _filter_stats_ensure(options) -%}
    {%- set plan = _window_plan(log, options, execution_time, prepared.fresh) -%}
    {#- Before any write: opening the window may refuse the run (`_window_open`). Each
        run records its start before its first write (`_window_begin`). -#}
    {%- set window = _window_open(plan, options) -%}
    {%- set run = _window_begin_rerun(log, options, execution_time, plan, window, target,
        quarantine) -%}
    {%- do _window_restore(target, quarantine, plan, options) -%}
    {%- set run = _window_rebase(run, target, quarantine) -%}
    {%- set columns = _window_sync_columns([] if plan.kind == 'create' else [target],
        changes, columns, options) -%}

    {%- do _cdc_cache(batch, filter_interceptor(
        "(select * from " ~ changes ~ " where " ~ window.predicate ~ ")",
        options.filters, options.filter_mode, options.label)) -%}
    {%- set counts = _filter_batch_counts(batch, options.filters, options.window_column) -%}
    {%- set window = _window_close(window, plan, counts.newest) -%}
    {%- set run = _window_begin(log, options, execution_time, plan, window, target,
        quarantine, run) -%}
    {%- if plan.kind == 'create' -%}
        {%- do _window_create_tables([
            (target, _cdc_column_definitions(columns.carried)),
            (quarantine, _filter_quarantine_definition()),
        ], options) -%}
        {%- set run = _window_rebase(run, target, quarantine) -%}
    {%- endif -%}
    {%- set duplicates = {'removed': 0} -%}
    {%- set written = {'target': not window.is_empty, 'side': false} -%}
    {%- if not window.is_empty -%}
        {%- if counts.total > counts.kept or plan.kind == 'rerun' -%}
            {%- do run_query(_filter_quarantine_sql(
                quarantine, batch, columns, options, window, execution_time)) -%}
            {%- do written.update({'side': true}) -%}
        {%- endif -%}
        {%- set since = _filter_dedup_since(batch, columns, options) -%}
        {%- call statement('main', fetch_result=true) -%}
            {{ _filter_append_sql(target, batch, columns, options, since) }}
        {%- endcall -%}
        {%- if options.unique_key -%}
            {%- set metrics = load_result('main').table -%}
            {%- set inserted = metrics[0][metrics.column_names.index('num_inserted_rows')] | int -%}
            {%- do duplicates.update({'removed': counts.kept - inserted}) -%}
        {%- endif -%}
    {%- endif -%}
    {%- do _cdc_uncache(batch) -%}
    {%- set stats = counts.filters -%}
    {%- if options.unique_key -%}
        {%- do stats.append({'name': options.dedup_name,
            'position': stats | length + 1, 'kind': 'deduplicate',
            'rejected': duplicates.removed, 'failed': duplicates.removed,
            'total': counts.kept}) -%}
    {%- endif -%}
    {%- do _filter_stats_insert(stats, execution_time, window) -%}

    {%- do _window_end(log, options, execution_time, plan, run, target, quarantine,
        {'changes': counts.total, 'quarantined': counts.total - counts.kept}, changes,
        written) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target]}) }}
{%- endmaterialization %}

{% materialization filtered_append, default -%}
    {{ _raise_unsupported_adapter('filtered_append') }}
{%- endmaterialization %}

{#- The model's filtered_append configuration: the shared window options plus the
    filters and deduplication, validated, with defaults filled in. -#}
{% macro _filtered_append_options(model, config) -%}
    {%- set options = _window_options(model, config, 'filtered_append', []) -%}
    {%- set label = options.label -%}
    {%- set unique_key = config.get('unique_key') -%}
    {%- do options.update({
        'filters': config.get('filters'),
        'filter_mode': config.get('filter_mode', 'first'),
        'unique_key': _table_config_columns(unique_key, 'unique_key', label),
        'delete_mode': 'hard',
        'reserved': ['_filter_flags', '_filter_failed', '_filter_failures'],
    }) -%}
    {%- do _filter_validate(options.filters, options.filter_mode, label) -%}
    {%- if options.unique_key -%}
        {#- The deduplication's row in ops.filter_stats, beside the filters'. -#}
        {%- do options.update({'dedup_name': 'duplicate_' ~ options.unique_key | join('_')}) -%}
        {%- if options.dedup_name in options.filters | map(attribute='name') | list -%}
            {{ exceptions.raise_compiler_error(label ~ ": filter name '" ~ options.dedup_name
                ~ "' is the deduplication's in ops.filter_stats (the duplicates by "
                ~ options.unique_key | join(', ') ~ "): name the filter otherwise") }}
        {%- endif -%}
        {%- do options.update({'dedup_order_by': _cdc_as_list(
            config.get('dedup_order_by'), 'dedup_order_by', label)}) -%}
    {%- endif -%}
    {%- do options.update({'dedup_lookback': _filter_dedup_lookback(
        config.get('dedup_lookback'), options.unique_key, label)}) -%}
    {{ return(options) }}
{%- endmacro %}

{#- `dedup_lookback`: none, or {column, interval} (e.g. {column: event_time, interval:
    '1 day'}), validated: the deduplication compares a batch's keys only with the
    table's rows whose `column` is at most `interval` before the batch's earliest. -#}
{% macro _filter_dedup_lookback(lookback, unique_key, label) -%}
    {%- if lookback is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set units = ['second', 'seconds', 'minute', 'minutes', 'hour', 'hours', 'day', 'days',
        'week', 'weeks'] -%}
    {%- set interval = lookback.get('interval') if lookback is mapping else none -%}
    {%- set parts = (interval | string).split() -%}
    {%- if not (lookback is mapping and lookback.get('column') is string
            and lookback.column | trim and interval is string and parts | length == 2
            and parts[0].isdigit() and parts[1] | lower in units) -%}
        {{ exceptions.raise_compiler_error(label ~ ": dedup_lookback must be {column, "
            ~ "interval} with an interval such as '1 day' (a whole number of seconds, "
            ~ "minutes, hours, days or weeks), got " ~ lookback) }}
    {%- endif -%}
    {%- if not unique_key -%}
        {{ exceptions.raise_compiler_error(label ~ ": dedup_lookback bounds the "
            ~ "deduplication: it needs unique_key") }}
    {%- endif -%}
    {{ return({'column': lookback.column | trim, 'interval': parts[0] ~ ' ' ~ parts[1] | lower}) }}
{%- endmacro %}

{#- With `dedup_lookback`: the earliest `column` among the batch's kept rows, minus the
    interval, as text (none when there is no lookback or no such row). -#}
{% macro _filter_dedup_since(batch, columns, options) -%}
    {%- set lookback = options.dedup_lookback -%}
    {%- if lookback is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- if lookback.column | lower not in columns.carried | map(attribute='name') | map('lower') | list -%}
        {{ exceptions.raise_compiler_error(options.label ~ ": dedup_lookback.column '"
            ~ lookback.column ~ "' is not a column of the table") }}
    {%- endif -%}
    {{ return(run_query("select cast(min(`" ~ lookback.column ~ "`) - interval "
        ~ lookback.interval ~ " as string) from " ~ batch
        ~ " where _filter_failed is null")[0][0]) }}
{%- endmacro %}
