{#- Private helpers of the cdc_history materialization: its options and statements. -#}

{#- cdc_merge's options (keys, sequence, delete and truncate conditions, windows) plus
    `valid_from` and `track_columns`; `delete_mode` does not apply. -#}
{% macro _cdc_history_options(model, config) -%}
    {%- set options = _cdc_merge_options(model, config, 'cdc_history') -%}
    {%- for name in ('delete_mode', 'soft_delete_column') if config.get(name) is not none -%}
        {{ _cdc_config_error(options.label, name ~ " does not apply: a delete closes the "
            ~ "key's current version") }}
    {%- endfor -%}
    {%- set valid_from = config.get('valid_from', '_source_committed_at') -%}
    {%- if not (valid_from is string and valid_from | trim) -%}
        {{ _cdc_config_error(options.label, "valid_from must be a column or SQL expression "
            ~ "(the time of the change), got " ~ valid_from) }}
    {%- endif -%}
    {%- set track = config.get('track_columns') -%}
    {#- `[]` (which _table_config_columns reads as none): no column could open a version. -#}
    {%- if track is not none and not _table_config_columns(track, 'track_columns', options.label) -%}
        {{ _cdc_config_error(options.label, "track_columns [] tracks no column: name the "
            ~ "columns whose change opens a version, or leave it out to track every carried "
            ~ "column") }}
    {%- endif -%}
    {%- do options.update({
        'valid_from': valid_from,
        'track_columns': none if track is none
            else _cdc_as_list(track, 'track_columns', options.label),
        'reserved': ['valid_from', 'valid_to', 'is_current'],
    }) -%}
    {{ return(options) }}
{%- endmacro %}

{#- The columns whose change opens a version: `track_columns`, or every carried column. -#}
{% macro _cdc_history_tracked(columns, options) -%}
    {%- if options.track_columns is none -%}
        {{ return(columns.carried) }}
    {%- endif -%}
    {%- set by_name = {} -%}
    {%- for column in columns.carried -%}
        {%- do by_name.update({column.name | lower: column}) -%}
    {%- endfor -%}
    {%- set tracked = [] -%}
    {%- for name in options.track_columns -%}
        {%- if name | lower not in by_name -%}
            {{ _cdc_config_error(options.label, "track_columns: '" ~ name ~ "' is not a "
                ~ "column the history carries (" ~ by_name.keys() | join(', ') ~ ")") }}
        {%- endif -%}
        {%- do tracked.append(by_name[name | lower]) -%}
    {%- endfor -%}
    {{ return(tracked) }}
{%- endmacro %}

{#-
    The history (carried columns, validity, the opening change's sequence), its change
    store (every change, typed) and its quarantine. Deletion vectors are on for new
    tables (python_jobs/spark.py): closing a few versions marks rows, no file rewrite.
    Not on the change store, only appended to (a re-run's `replace where` aside): every
    run scans it, and the feature would cost each scan a job.
-#}
{% macro _cdc_history_create(target, store, quarantine, changes, columns, options) -%}
    {%- set carried = _cdc_column_definitions(columns.carried) -%}
    {%- set sequence = '_cdc_sequence ' ~ _cdc_sequence_type(changes, options) -%}
    {%- do _window_create_tables([
        (target, carried ~ ", valid_from timestamp not null, valid_to timestamp, "
            ~ "is_current boolean not null, _cdc_closed_by_delete boolean not null, "
            ~ sequence),
        (store, carried ~ ", " ~ sequence ~ ", _cdc_is_delete boolean not null, "
            ~ "_cdc_is_truncate boolean not null, _cdc_changed_at timestamp not null, "
            ~ "_cdc_window_value bigint, _cdc_tiebreak string not null",
            _appended_table_properties()),
        (quarantine, _cdc_quarantine_definition()),
    ], options) -%}
{%- endmacro %}

{#-
    The keys whose history this run recomputes: those of the window's changes and, when
    the run `replaces` rows of its window in the store (an earlier attempt read past the
    window's start: `plan.overlaps`), those of the rows it replaces; with `every_key` (a
    truncate among either, which closes every version open before it, or a column
    dropped), every key.
-#}
{% macro _cdc_history_touched_sql(store, batch, columns, store_window, every_key, replaces) -%}
    {%- set keys = _cdc_column_list(columns['keys']) -%}
    select distinct {{ keys }} from {{ batch }}
    where _cdc_quarantine_reason is null and not _cdc_is_truncate
    {%- if every_key or replaces %}
    union
    select {{ keys }} from {{ store }}
    where not _cdc_is_truncate
    {%- if not every_key %} and ({{ store_window }}){% endif %}
    {%- endif %}
{%- endmacro %}

{#- The window's changes replace the store's rows of the same window. -#}
{% macro _cdc_history_store_sql(store, batch, store_window) -%}
    {%- set names = [] -%}
    {%- for column in _cdc_describe(store) -%}
        {%- if column.name == '_cdc_tiebreak' -%}
            {%- do names.append('sha2(_cdc_record, 256) as _cdc_tiebreak') -%}
        {%- else -%}
            {%- do names.append('`' ~ column.name ~ '`') -%}
        {%- endif -%}
    {%- endfor -%}
    insert into {{ store }}
    replace where {{ store_window }}
    select {{ names | join(', ') }}
    from {{ batch }}
    where _cdc_quarantine_reason is null
{%- endmacro %}

{#-
    The versions of the touched keys, from all their changes in sequence order:
    - one change per (key, sequence): a delete wins a tie, then the first ingested
      copy, then the row's content (a hash of its JSON), so the same input always gives
      the same history;
    - a truncate is a delete of every key at its position (`truncates`: whether the
      store holds any; without, that part of the query is left out);
    - a change opens a version when it is the key's first, follows a delete, or changes
      a tracked column; any other change updates its version in place (the version
      shows its last change's values);
    - a version is valid from its opening change's time to the next version's opening
      or the delete that closes it (null while current; `_cdc_closed_by_delete` tells
      which); a delete of a key that is not live changes nothing.
    One pass over the changes: a version's values are a window over its changes, not
    an aggregate joined back (which read the change store twice).
-#}
{% macro _cdc_history_versions_sql(store, touched, columns, truncates) -%}
    {%- set keys = _cdc_column_list(columns['keys']) -%}
    {%- set key_names = columns['keys'] | map(attribute='name') | map('lower') | list -%}
    {%- set metadata = '_cdc_sequence, _cdc_is_delete, _cdc_changed_at, _cdc_window_value, _cdc_tiebreak' -%}
    with events as (
        select {{ _cdc_column_list(columns.carried, 'c') }}, c._cdc_sequence, c._cdc_is_delete,
            c._cdc_is_truncate, c._cdc_changed_at, c._cdc_window_value, c._cdc_tiebreak
        from {{ store }} as c
        left semi join {{ touched }} as k on {{ _cdc_key_match(columns['keys'], 'c', 'k') }}
        where not c._cdc_is_truncate
        {%- if truncates %}
        union all
        select
            {%- for column in columns.carried %}
            {% if column.name | lower in key_names %}k.{% else %}cast(null as {{ column.type }}) as {% endif %}`{{ column.name }}`,
            {%- endfor %}
            t._cdc_sequence,
            true as _cdc_is_delete,
            false as _cdc_is_truncate,
            t._cdc_changed_at,
            t._cdc_window_value,
            t._cdc_tiebreak
        from {{ touched }} as k
        cross join (select * from {{ store }} where _cdc_is_truncate) as t
        {%- endif %}
    ),

    deduplicated as (
        select * from (
            select
                {{ _cdc_column_list(columns.carried) }},
                {{ metadata }},
                row_number() over (
                    partition by {{ keys }}, _cdc_sequence
                    order by _cdc_is_delete desc, _cdc_window_value, _cdc_tiebreak desc
                ) as _cdc_copy
            -- Every window below is by key: one shuffle by key serves them all.
            from (select * from events distribute by {{ keys }}) as by_key
        ) as copies
        where _cdc_copy = 1
    ),

    ordered as (
        select
            *,
            struct({{ _cdc_column_list(columns.tracked) }}) as _cdc_tracked,
            lag(_cdc_is_delete) over by_key as _cdc_after_delete,
            lag(struct({{ _cdc_column_list(columns.tracked) }})) over by_key as _cdc_tracked_before
        from deduplicated
        window by_key as (partition by {{ keys }} order by _cdc_sequence)
    ),

    boundaries as (
        select
            *,
            case
                when _cdc_is_delete then not coalesce(_cdc_after_delete, true)
                else
                    _cdc_after_delete is null
                    or _cdc_after_delete
                    or not (_cdc_tracked <=> _cdc_tracked_before)
            end as _cdc_is_boundary
        from ordered
    ),

    numbered as (
        select
            *,
            sum(case when _cdc_is_boundary and not _cdc_is_delete then 1 else 0 end) over (
                partition by {{ keys }} order by _cdc_sequence
                rows between unbounded preceding and current row
            ) as _cdc_version
        from boundaries
    ),

    imaged as (
        select
            *,
            max_by(
                case when not _cdc_is_delete then struct({{ _cdc_column_list(columns.carried) }}) end,
                case when not _cdc_is_delete then _cdc_sequence end
            ) over (partition by {{ keys }}, _cdc_version) as _cdc_image
        from numbered
    ),

    opened as (
        select
            _cdc_image,
            _cdc_sequence,
            _cdc_is_delete,
            _cdc_changed_at as valid_from,
            lead(_cdc_changed_at) over by_key as valid_to,
            lead(_cdc_is_delete) over by_key as _cdc_closed_by_delete
        from imaged
        where _cdc_is_boundary
        window by_key as (partition by {{ keys }} order by _cdc_sequence)
    )

    select
        {%- for column in columns.carried %}
        _cdc_image.`{{ column.name }}`,
        {%- endfor %}
        valid_from,
        valid_to,
        valid_to is null as is_current,
        coalesce(_cdc_closed_by_delete, false) as _cdc_closed_by_delete,
        _cdc_sequence
    from opened
    where not _cdc_is_delete
{%- endmacro %}

{#-
    What the merge must change in the history for the touched keys: versions that are
    new (insert), that changed (closed, or their values updated in place: update), and
    that no longer exist (a late change split or moved them: `_cdc_gone`, delete).
    Versions that did not change are left out, so they are not rewritten.
-#}
{% macro _cdc_history_diff_sql(target, versions, touched, columns) -%}
    {%- set written = _cdc_history_written(columns) -%}
    {%- set key_names = columns['keys'] | map(attribute='name') | map('lower') | list -%}
    select
        {%- for column in written %}
        {%- if column.name | lower in key_names %}
        case when n._cdc_sequence is null then o.`{{ column.name }}` else n.`{{ column.name }}` end as `{{ column.name }}`,
        {%- else %}
        n.`{{ column.name }}`,
        {%- endif %}
        {%- endfor %}
        coalesce(n._cdc_sequence, o._cdc_sequence) as _cdc_sequence,
        n._cdc_sequence is null as _cdc_gone
    from {{ versions }} as n
    full outer join (
        select h.*
        from {{ target }} as h
        left semi join {{ touched }} as k on {{ _cdc_key_match(columns['keys'], 'h', 'k') }}
    ) as o
        on {{ _cdc_key_match(columns['keys'], 'n', 'o') }}
        and n._cdc_sequence = o._cdc_sequence
    where
        n._cdc_sequence is null
        or o._cdc_sequence is null
        or not (
            struct({{ _cdc_column_list(written, 'n') }})
            <=> struct({{ _cdc_column_list(written, 'o') }})
        )
{%- endmacro %}

{% macro _cdc_history_written(columns) -%}
    {{ return(columns.carried + [{'name': 'valid_from'}, {'name': 'valid_to'},
        {'name': 'is_current'}, {'name': '_cdc_closed_by_delete'}]) }}
{%- endmacro %}

{#-
    Applies the difference to the history, in one statement: the touched keys, their
    versions and the difference are its source's common table expressions, not views
    (each view was analysed once more when created). `store_before`: the change store
    as the run found it, whose rows in the window touch their keys too when the run
    `replaces` them. Delta's MERGE materializes its source once
    (`merge.materializeSource`) and reads that copy twice.
-#}
{% macro _cdc_history_merge_sql(target, store, store_before, batch, columns, store_window, every_key, truncates, replaces) -%}
    {%- set written = _cdc_history_written(columns) -%}
    merge into {{ target }} as t
    using (
        with _cdc_touched as (
            {{ _cdc_history_touched_sql(store_before, batch, columns, store_window, every_key,
                replaces) }}
        ),

        _cdc_versions as (
            {{ _cdc_history_versions_sql(store, '_cdc_touched', columns, truncates) }}
        )

        {{ _cdc_history_diff_sql(target, '_cdc_versions', '_cdc_touched', columns) }}
    ) as s
    on {{ _cdc_key_match(columns['keys'], 't', 's') }} and t._cdc_sequence = s._cdc_sequence
    when matched and s._cdc_gone then delete
    when matched then update set
    {%- for column in written %}
        t.`{{ column.name }}` = s.`{{ column.name }}`{{ ',' if not loop.last }}
    {%- endfor %}
    when not matched and not s._cdc_gone then
        insert ({{ _cdc_column_list(written) }}, _cdc_sequence)
        values ({{ _cdc_column_list(written, 's') }}, s._cdc_sequence)
{%- endmacro %}
