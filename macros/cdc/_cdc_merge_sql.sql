{#- Private helpers of the cdc_merge materialization: the statements it runs. -#}

{#- The Spark type of the `sequence_by` struct, e.g. struct<lsn:bigint,line:int>. -#}
{% macro _cdc_sequence_type(changes, options) -%}
    {%- set described = _cdc_describe("query select " ~ _cdc_sequence_struct(options.sequence_by)
        ~ " as _cdc_sequence from " ~ changes) -%}
    {{ return((described | first).type) }}
{%- endmacro %}

{#-
    Creates (or, on a full refresh, replaces) the table, its tombstones and quarantine,
    empty, with the model's configs (`_window_create_tables`).
-#}
{% macro _cdc_merge_create(target, tombstones, quarantine, changes, columns, options) -%}
    {%- set sequence = '_cdc_sequence ' ~ _cdc_sequence_type(changes, options) -%}
    {%- set flag = ", `" ~ options.soft_delete_column ~ "` boolean"
        if options.delete_mode == 'soft' else "" -%}
    {%- do _window_create_tables([
        (target, _cdc_column_definitions(columns.carried) ~ ", " ~ sequence ~ flag),
        (tombstones, _cdc_column_definitions(columns['keys']) ~ ", " ~ sequence
            ~ ", _cdc_deleted_by string"),
        (quarantine, _cdc_quarantine_definition()),
    ], options) -%}
{%- endmacro %}

{% macro _cdc_quarantine_definition() -%}
    {{ return("reason string not null, record string not null, "
        ~ "window_value bigint, execution_time timestamp not null, "
        ~ "invocation_id string not null, quarantined_at timestamp not null") }}
{%- endmacro %}

{% macro _cdc_column_definitions(columns) -%}
    {%- for column in columns -%}
        `{{ column.name }}` {{ column.type }}{{ ', ' if not loop.last }}
    {%- endfor -%}
{%- endmacro %}

{#-
    The window's change rows, computed once (cached) for every statement of the run:
    the carried columns, the sequence, the delete/truncate flags, the change's time
    (cdc_history's `valid_from`), and why a row is quarantined (`null_key`: every key
    part null; `null_sequence`: every sequence part null; `null_valid_from`). The whole
    row as JSON serves the quarantine and the last tie-break.
-#}
{% macro _cdc_merge_batch_sql(changes, columns, options, window) -%}
    {%- set key_nulls = [] -%}
    {%- for key in columns['keys'] -%}
        {%- do key_nulls.append('`' ~ key.name ~ '` is null') -%}
    {%- endfor -%}
    {%- set sequence_nulls = [] -%}
    {%- for expression in options.sequence_by -%}
        {%- do sequence_nulls.append('(' ~ expression ~ ') is null') -%}
    {%- endfor -%}
    select
        {{ _cdc_column_list(columns.carried) }},
        {{ _cdc_sequence_struct(options.sequence_by) }} as _cdc_sequence,
        coalesce({{ options.delete_condition }}, false) as _cdc_is_delete,
        coalesce({{ options.truncate_condition }}, false) as _cdc_is_truncate,
        `{{ options.window_column }}` as _cdc_window_value,
        to_json(struct({{ _cdc_column_list(columns.all) }})) as _cdc_record,
        {%- if options.get('valid_from') %}
        cast(({{ options.valid_from }}) as timestamp) as _cdc_changed_at,
        {%- endif %}
        case
            when coalesce({{ options.truncate_condition }}, false) then null
            when {{ key_nulls | join(' and ') }} then 'null_key'
            when {{ sequence_nulls | join(' and ') }} then 'null_sequence'
            {%- if options.get('valid_from') %}
            when ({{ options.valid_from }}) is null then 'null_valid_from'
            {%- endif %}
        end as _cdc_quarantine_reason
    from {{ changes }}
    where {{ window.predicate }}
{%- endmacro %}

{#-
    Caches the change rows of the (open) window as `batch` and returns its counts and
    `newest`, the greatest window value read (`_window_close`).
-#}
{% macro _cdc_merge_read_batch(changes, batch, columns, options, window) -%}
    {%- do _cdc_cache(batch, _cdc_merge_batch_sql(changes, columns, options, window)) -%}
    {%- set row = run_query(
        "select count(*), count_if(_cdc_quarantine_reason is not null), "
        ~ "count_if(_cdc_is_truncate), "
        ~ "count_if(_cdc_is_delete and not _cdc_is_truncate and _cdc_quarantine_reason is null), "
        ~ "max(_cdc_window_value) "
        ~ "from " ~ batch)[0] -%}
    {{ return({'changes': row[0] | int, 'quarantined': row[1] | int,
               'truncates': row[2] | int, 'deletes': row[3] | int, 'newest': row[4]}) }}
{%- endmacro %}

{#- Quarantines the batch's rows without a key or sequence; a re-run replaces its
    window's quarantine rows, even with none to add. -#}
{% macro _cdc_merge_quarantine_batch(quarantine, batch, columns, options, plan, window, execution_time, summary) -%}
    {%- if summary.quarantined > 0 or plan.kind == 'rerun' -%}
        {%- do run_query(_cdc_merge_quarantine_sql(
            quarantine, batch, columns, options, window, execution_time)) -%}
    {%- endif -%}
{%- endmacro %}

{#- Quarantined rows replace those of the same window: a re-run does not add copies. -#}
{% macro _cdc_merge_quarantine_sql(quarantine, batch, columns, options, window, execution_time) -%}
    {{ _quarantine_window_insert_sql(quarantine, batch, options, window, execution_time,
        ["_cdc_quarantine_reason as reason", "_cdc_record as record",
         "_cdc_window_value as window_value"],
        "_cdc_quarantine_reason is not null") }}
{%- endmacro %}

{#- Inserts the batch's rows matching `condition` into a quarantine table, replacing
    those of the same window; `selected`: the leading columns, then the run's. -#}
{% macro _quarantine_window_insert_sql(quarantine, batch, options, window, execution_time, selected, condition) -%}
    insert into {{ quarantine }}
    replace where {{ window.predicate | replace('`' ~ options.window_column ~ '`', 'window_value') }}
    select
        {{ selected | join(',\n        ') }},
        timestamp'{{ execution_time }}' as execution_time,
        '{{ invocation_id }}' as invocation_id,
        current_timestamp() as quarantined_at
    from {{ batch }}
    where {{ condition }}
{%- endmacro %}

{#- A truncate empties the table as of its position: rows not newer than it go (as
    the changes not newer than it do). In soft mode they stay, flagged deleted, with the
    sequence of their last change (a late change older than the truncate, flagged too,
    can then still take its place, as it would in a full refresh). -#}
{% macro _cdc_merge_truncate_sql(target, batch, options) -%}
    merge into {{ target }} as t
    using (
        select max(_cdc_sequence) as truncated_at from {{ batch }} where _cdc_is_truncate
    ) as s
    on t._cdc_sequence <= s.truncated_at
    {%- if options.delete_mode == 'hard' %}
    when matched then delete
    {%- else %}
    when matched and not t.`{{ options.soft_delete_column }}` then update set
        t.`{{ options.soft_delete_column }}` = true
    {%- endif %}
{%- endmacro %}

{#-
    The merge: the last change per key by `sequence_by` (ties: a delete wins, then the
    first ingested copy, as an incremental run keeps the copy it saw first, then the
    row's JSON, so the same input always gives the same result), dropped when it is not
    newer than a truncate, or (an insert or update) not newer than the key's tombstone;
    then applied only when newer than the row in the table, or as new and a delete (a
    delete wins a tie in a batch, and so against the table). In soft mode a delete
    updates the row like any change (its row image, flagged deleted), and so does a
    change not newer than a truncate (which deleted it), so that a full refresh gives
    the same rows as the incremental runs. `truncated`: whether the batch
    or the tombstones hold a truncate (`_cdc_merge_truncated`); if not, the query has no
    truncate part.
-#}
{% macro _cdc_merge_target_sql(target, tombstones, batch, columns, options, truncated) -%}
    {%- set soft = options.delete_mode == 'soft' -%}
    {%- set flag = '`' ~ options.soft_delete_column ~ '`' -%}
    merge into {{ target }} as t
    using (
        with
        {%- if truncated %}
        truncated as (
            select max(_cdc_sequence) as _cdc_sequence
            from (
                select _cdc_sequence from {{ tombstones }} where _cdc_deleted_by = 'truncate'
                union all
                select _cdc_sequence from {{ batch }} where _cdc_is_truncate
            ) as markers
        ),
        {%- endif %}

        ranked as (
            select
                *,
                row_number() over (
                    partition by {{ _cdc_column_list(columns['keys']) }}
                    order by _cdc_sequence desc, _cdc_is_delete desc, _cdc_window_value, _cdc_record desc
                ) as _cdc_rank
            from {{ batch }}
            where not _cdc_is_truncate and _cdc_quarantine_reason is null
        )

        select
            changes.*
            {%- if soft %},
            changes._cdc_is_delete
            {%- if truncated %}
                or coalesce(changes._cdc_sequence <= truncated._cdc_sequence, false)
            {%- endif %} as _cdc_deleted
            {%- endif %}
        from ranked as changes
        {%- if truncated %}
        cross join truncated
        {%- endif %}
        left join {{ tombstones }} as tombstone
            on {{ _cdc_key_match(columns['keys'], 'tombstone', 'changes') }}
            and tombstone._cdc_deleted_by = 'delete'
        where
            changes._cdc_rank = 1
            {%- if truncated and not soft %}
            and (truncated._cdc_sequence is null or changes._cdc_sequence > truncated._cdc_sequence)
            {%- endif %}
            and (
                changes._cdc_is_delete
                or tombstone._cdc_sequence is null
                or changes._cdc_sequence > tombstone._cdc_sequence
            )
    ) as s
    on {{ _cdc_key_match(columns['keys'], 't', 's') }}
    {%- if soft %}
    {#- A tie: a delete (or a change a truncate deleted) takes a live row's place, and a
        delete that of a row a truncate flagged (its image differs from the delete's). -#}
    when matched and (s._cdc_sequence > t._cdc_sequence or (s._cdc_sequence >= t._cdc_sequence
            and ((s._cdc_deleted and not t.{{ flag }}) or (s._cdc_is_delete
                and not struct({{ _cdc_column_list(columns.carried, 't') }})
                    <=> struct({{ _cdc_column_list(columns.carried, 's') }}))))) then update set
    {%- else %}
    when matched and s._cdc_is_delete and s._cdc_sequence >= t._cdc_sequence then delete
    when matched and s._cdc_sequence > t._cdc_sequence then update set
    {%- endif %}
    {%- for column in columns.carried %}
        t.`{{ column.name }}` = s.`{{ column.name }}`,
    {%- endfor %}
        {% if soft %}t.{{ flag }} = s._cdc_deleted, {% endif %}t._cdc_sequence = s._cdc_sequence
    {%- if soft %}
    when not matched then insert ({{ _cdc_column_list(columns.carried) }}, _cdc_sequence, {{ flag }})
        values ({{ _cdc_column_list(columns.carried, 's') }}, s._cdc_sequence, s._cdc_deleted)
    {%- else %}
    when not matched and not s._cdc_is_delete then
        insert ({{ _cdc_column_list(columns.carried) }}, _cdc_sequence)
        values ({{ _cdc_column_list(columns.carried, 's') }}, s._cdc_sequence)
    {%- endif %}
{%- endmacro %}

{#- Whether the tombstones hold a truncate (Delta skips the files whose statistics show
    none): without one, and none in the batch, the merge leaves its truncate part out. -#}
{% macro _cdc_merge_truncated(tombstones) -%}
    {{ return(run_query("select exists (select 1 from " ~ tombstones
        ~ " where _cdc_deleted_by = 'truncate')")[0][0]) }}
{%- endmacro %}

{#-
    Tombstones keep what the table no longer shows: the newest delete per key (hard
    mode) and the newest truncate (a row with every key part null), so that a late,
    older change never brings a deleted key back.
-#}
{% macro _cdc_merge_tombstones_sql(tombstones, batch, columns, options) -%}
    merge into {{ tombstones }} as d
    using (
        {%- if options.delete_mode == 'hard' %}
        select
            {{ _cdc_column_list(columns['keys']) }},
            max(_cdc_sequence) as _cdc_sequence,
            'delete' as _cdc_deleted_by
        from {{ batch }}
        where _cdc_is_delete and not _cdc_is_truncate and _cdc_quarantine_reason is null
        group by {{ _cdc_column_list(columns['keys']) }}
        union all
        {%- endif %}
        select
            {%- for key in columns['keys'] %}
            cast(null as {{ key.type }}) as `{{ key.name }}`,
            {%- endfor %}
            max(_cdc_sequence) as _cdc_sequence,
            'truncate' as _cdc_deleted_by
        from {{ batch }}
        where _cdc_is_truncate
        having count(*) > 0
    ) as s
    on {{ _cdc_key_match(columns['keys'], 'd', 's') }} and d._cdc_deleted_by = s._cdc_deleted_by
    when matched and s._cdc_sequence > d._cdc_sequence then update set
        d._cdc_sequence = s._cdc_sequence
    when not matched then insert *
{%- endmacro %}

{#-
    Computes a query once for the statements of a run, cached on local disk: a full
    refresh caches the whole stream, and cached blocks held on the heap (whose size
    Spark only estimates) ran a 16M-row build out of memory.
-#}
{% macro _cdc_cache(name, query) -%}
    {%- do run_query('drop view if exists ' ~ name) -%}
    {%- do run_query("cache table " ~ name ~ " options ('storageLevel' 'DISK_ONLY') as " ~ query) -%}
{%- endmacro %}

{% macro _cdc_uncache(name) -%}
    {%- do run_query('uncache table if exists ' ~ name) -%}
    {%- do run_query('drop view if exists ' ~ name) -%}
{%- endmacro %}
