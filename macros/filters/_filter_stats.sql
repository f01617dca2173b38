{#- Private helpers: `ops.filter_stats` and the filtered_append statements. -#}

{% macro _filter_stats_relation() -%}
    {{ return(generate_schema_name('ops') ~ '.filter_stats') }}
{%- endmacro %}

{#-
    One row per (invocation, model, filter): the contract's columns first
    (`rejected_rows`: rows whose first failing filter this is), then the filter's
    position, `kind` (`filter`, or `deduplicate` for the duplicates removed),
    `failed_rows` (rows failing this filter, whatever failed before it), the relation
    and the run's execution time and window (the input's commit versions). Appended
    only, with row tracking: `mark_superseded_runs` orders the runs by the commit that
    recorded them, not by `run_started_at` (a clock). Given a model's `options`, a table
    from an earlier version of the project (windows on ingestion time) is refused with
    the fix.
-#}
{% macro _filter_stats_ensure(options=none) -%}
    {%- set relation = _filter_stats_relation() -%}
    {%- do run_query(
        "create table if not exists " ~ relation ~ " ("
        ~ "invocation_id string not null, run_started_at timestamp not null, "
        ~ "model string not null, filter_name string not null, rejected_rows bigint not null, "
        ~ "total_rows bigint not null, filter_position int not null, kind string not null, "
        ~ "failed_rows bigint not null, relation string not null, "
        ~ "execution_time timestamp not null, window_start bigint, window_end bigint, "
        ~ "recorded_at timestamp not null) using delta "
        ~ _delta_tblproperties_clause(_commit_ordered_table_properties())
    ) -%}
    {%- if options is not none -%}
        {%- for column in _cdc_describe(relation)
                if column.name == 'window_start' and column.type != 'bigint' -%}
            {{ _cdc_config_error(options.label, relation ~ " has windows on ingestion time "
                ~ "(window_start " ~ column.type ~ "), from an earlier version of the "
                ~ "project; windows are now Bronze commit versions: drop " ~ relation
                ~ " and rebuild the filtered models once with --full-refresh") }}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro %}

{#- Appends a run's statistics: `rows` is a list of
    {name, position, kind, rejected, failed, total}. -#}
{% macro _filter_stats_insert(rows, execution_time, window) -%}
    {%- set values = [] -%}
    {%- for row in rows -%}
        {%- do values.append("('" ~ invocation_id ~ "', timestamp'"
            ~ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "', '" ~ this.identifier
            ~ "', '" ~ row.name ~ "', " ~ row.rejected ~ ", " ~ row.total ~ ", "
            ~ row.position ~ ", '" ~ row.kind ~ "', " ~ row.failed ~ ", '" ~ this.schema
            ~ "." ~ this.identifier ~ "', timestamp'" ~ execution_time ~ "', "
            ~ _window_sql_point(window.start) ~ ", " ~ _window_sql_point(window.end)
            ~ ", current_timestamp())") -%}
    {%- endfor -%}
    {%- do run_query("insert into " ~ _filter_stats_relation() ~ " values "
        ~ values | join(", ")) -%}
{%- endmacro %}

{#- Counts of a flagged batch: total, kept, and per filter first-match and failed. -#}
{% macro _filter_batch_counts(batch, filters, window_column) -%}
    {%- set expressions = ["count(*)", "count_if(_filter_failed is null)",
                           "max(`" ~ window_column ~ "`)"] -%}
    {%- for filter in filters -%}
        {%- do expressions.append("count_if(_filter_failed = '" ~ filter.name ~ "')") -%}
        {%- do expressions.append("count_if(_filter_flags[" ~ loop.index0 ~ "])") -%}
    {%- endfor -%}
    {%- set row = run_query("select " ~ expressions | join(", ") ~ " from " ~ batch)[0] -%}
    {%- set counts = {'total': row[0] | int, 'kept': row[1] | int, 'newest': row[2],
                      'filters': []} -%}
    {%- for filter in filters -%}
        {%- do counts.filters.append({
            'name': filter.name, 'position': loop.index, 'kind': 'filter',
            'rejected': row[2 * loop.index + 1] | int, 'failed': row[2 * loop.index + 2] | int,
            'total': counts.total}) -%}
    {%- endfor -%}
    {{ return(counts) }}
{%- endmacro %}

{% macro _filter_quarantine_definition() -%}
    {{ return("reason string not null, failed_filters array<string>, record string not null, "
        ~ "window_value bigint, execution_time timestamp not null, "
        ~ "invocation_id string not null, quarantined_at timestamp not null") }}
{%- endmacro %}

{#- Rejected rows replace those of the same window: a re-run does not add copies. -#}
{% macro _filter_quarantine_sql(quarantine, batch, columns, options, window, execution_time) -%}
    {{ _quarantine_window_insert_sql(quarantine, batch, options, window, execution_time,
        ["_filter_failed as reason", "_filter_failures as failed_filters",
         "to_json(struct(" ~ _cdc_column_list(columns.all) ~ ")) as record",
         "`" ~ options.window_column ~ "` as window_value"],
        "_filter_failed is not null") }}
{%- endmacro %}

{#- The kept rows into the table: appended, or with `unique_key`, deduplicated within
    the batch and inserted only where the key is not in the table yet (with
    `dedup_lookback`, among the table's rows whose column is at least `since` or null:
    a bound on the target that Delta's file statistics turn into skipped files). -#}
{% macro _filter_append_sql(target, batch, columns, options, since=none) -%}
    {%- set kept = "(select " ~ _cdc_column_list(columns.carried) ~ " from " ~ batch
        ~ " where _filter_failed is null)" -%}
    {%- if options.unique_key -%}
        merge into {{ target }} as t
        using ({{ deduplicate(kept, options.unique_key, options.dedup_order_by, options.label) }}) as s
        on {{ _cdc_key_match(columns['keys'], 't', 's') }}
        {%- if since is not none %}
            {#- A row without the column is compared too (a NULL would never match). #}
            and (t.`{{ options.dedup_lookback.column }}` >= cast('{{ since }}' as timestamp)
                or t.`{{ options.dedup_lookback.column }}` is null)
        {%- endif %}
        when not matched then insert ({{ _cdc_column_list(columns.carried) }})
        values ({{ _cdc_column_list(columns.carried, 's') }})
    {%- else -%}
        insert into {{ target }} ({{ _cdc_column_list(columns.carried) }})
        select {{ _cdc_column_list(columns.carried) }} from {{ kept }} as kept
    {%- endif -%}
{%- endmacro %}
