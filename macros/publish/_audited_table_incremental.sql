{#-
    Private: the incremental mode of `audited_table`. With `unique_key` and
    `incremental_inputs` set, a build recomputes only the rows whose inputs changed
    since the last publish, audits them, and merges them into the published table:

        config:
          unique_key: visit_id
          incremental_inputs:          # input model: the column linking its rows to ours
            visits: visit_id
            teams: team_id               # or a history: {column, at, ...} (below)

    The rows recomputed are those whose `<column>` equals the `<column>` of a row of
    `<input>` inserted, updated or deleted since the input version the last publish
    read (the input's Delta change data feed; it must be on: tblproperties
    `delta.enableChangeDataFeed: true`), in the model's new output or in the published
    table.

    With `incremental_driver: <input>` the model promises one output row per row of that
    input, with the same (one-column) key and the other linking columns taken from it
    (a fact and its point-in-time joins). The keys then come without evaluating the
    model: the driver's changed keys, and the published rows whose linking column
    matches another input's changed rows; only the recomputed keys' rows of the driver
    reach the model's joins. An input declared `{column, at, valid_from, valid_to,
    current_flag}` is a history joined at the model's column `at` (a dimension of a
    fact): its changes reach only the rows whose `at` falls where a version's validity
    changed (`_awap_validity_ranges_sql`). With `partition_by`, the merge names the
    partitions of the rows it recomputes (`_awap_partition_predicates`).
    The input versions read are recorded in the table's properties
    (`lakehouse.input.<schema>.<table>` = `<table id>@<version>`) after each publish.
    Anything the change feed cannot describe makes the build a full rebuild, with the
    reason in the log: no recorded version, a full refresh, a changed contract, an
    input replaced, restored (a backfill), vacuumed or further behind than its log
    reaches, or without a change feed.
-#}

{#- The incremental configuration: none (a full rebuild every time), or
    {unique_key: [..], inputs: [{model, column, at, ...}], driver}, validated. -#}
{% macro _awap_incremental_options(label, unique_key, inputs, depends_on=[], driver=none) -%}
    {%- if unique_key is none and inputs is none -%}
        {%- if driver is not none -%}
            {{ exceptions.raise_compiler_error(label ~ ": incremental_driver needs "
                ~ "unique_key and incremental_inputs, got incremental_driver " ~ driver) }}
        {%- endif -%}
        {{ return(none) }}
    {%- endif -%}
    {%- if unique_key is none or inputs is none -%}
        {{ exceptions.raise_compiler_error(label ~ ": unique_key and incremental_inputs go "
            ~ "together (an incremental audited_table recomputes rows by key), got unique_key "
            ~ unique_key ~ ", incremental_inputs " ~ inputs) }}
    {%- endif -%}
    {%- if inputs is not mapping or not inputs -%}
        {{ exceptions.raise_compiler_error(label ~ ": incremental_inputs must map input "
            ~ "models to the column linking their rows to this model's, e.g. "
            ~ "{users_history: user_id}, got " ~ inputs) }}
    {%- endif -%}
    {%- set parsed = {'unique_key': _cdc_as_list(unique_key, 'unique_key', label), 'inputs': []} -%}
    {%- for name, link in inputs.items() -%}
        {%- do parsed.inputs.append(_awap_input_link(label, name, link)) -%}
    {%- endfor -%}
    {#- Every relation the model reads must be an input: a change in one that is not
        would never be recomputed. -#}
    {%- for node in depends_on -%}
        {%- set parts = node.split('.') -%}
        {%- if parts[0] not in ('model', 'snapshot') or parts[-1] not in inputs -%}
            {{ exceptions.raise_compiler_error(label ~ ": the model reads " ~ node
                ~ ", which incremental_inputs does not list: its changes would never be "
                ~ "recomputed (an incremental audited_table reads models with a change "
                ~ "data feed only)") }}
        {%- endif -%}
    {%- endfor -%}
    {%- set links = {} -%}
    {%- for input in parsed.inputs -%}
        {%- do links.update({input.model: input.column}) -%}
    {%- endfor -%}
    {%- do parsed.update({'driver': _awap_driver(label, driver, links, parsed.unique_key)}) -%}
    {%- for input in parsed.inputs if input.at and input.model == parsed.driver -%}
        {{ exceptions.raise_compiler_error(label ~ ": incremental_inputs." ~ input.model
            ~ " is the incremental_driver, linked by the key: it has no `at`") }}
    {%- endfor -%}
    {{ return(parsed) }}
{%- endmacro %}

{#- One entry of `incremental_inputs`: a column name, or a point-in-time input
    `{column, at, valid_from, valid_to, current_flag}` (`_awap_validity_ranges_sql`). -#}
{% macro _awap_input_link(label, name, link) -%}
    {%- set where = label ~ ": incremental_inputs." ~ name -%}
    {%- set named = link is string -%}
    {%- if named -%}
        {%- set link = {'column': link} -%}
    {%- elif link is not mapping -%}
        {{ exceptions.raise_compiler_error(where ~ " must be a column name or {column, at, "
            ~ "valid_from, valid_to, current_flag}, got " ~ link) }}
    {%- endif -%}
    {%- set allowed = ['column', 'at', 'valid_from', 'valid_to', 'current_flag'] -%}
    {%- for key in link if key not in allowed -%}
        {{ exceptions.raise_compiler_error(where ~ ": unknown setting '" ~ key ~ "' (known: "
            ~ allowed | join(', ') ~ ")") }}
    {%- endfor -%}
    {%- if link.get('at') is none -%}
        {%- for key in ['valid_from', 'valid_to', 'current_flag'] if key in link -%}
            {{ exceptions.raise_compiler_error(where ~ ": " ~ key ~ " is for a point-in-time "
                ~ "input and needs `at` (the model's column the input is joined at)") }}
        {%- endfor -%}
    {%- endif -%}
    {%- set parsed = {'model': name, 'column': link.get('column'), 'at': link.get('at'),
        'valid_from': link.get('valid_from', 'valid_from'),
        'valid_to': link.get('valid_to', 'valid_to'), 'current_flag': link.get('current_flag')} -%}
    {%- for key in allowed if key in ('column', 'valid_from', 'valid_to') or link.get(key) is not none -%}
        {%- set value = parsed[key] -%}
        {%- if not (value is string and value | trim) -%}
            {{ exceptions.raise_compiler_error(where ~ ("" if named else "." ~ key)
                ~ " must be a column name, got " ~ value) }}
        {%- endif -%}
        {%- do parsed.update({key: value | trim}) -%}
    {%- endfor -%}
    {{ return(parsed) }}
{%- endmacro %}

{#- The validated `incremental_driver`: none, or an input linked by the whole key. -#}
{% macro _awap_driver(label, driver, inputs, unique_key) -%}
    {%- if driver is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- if driver is not string or driver not in inputs -%}
        {{ exceptions.raise_compiler_error(label ~ ": incremental_driver must name one of "
            ~ "incremental_inputs (" ~ inputs.keys() | join(', ') ~ "), got " ~ driver) }}
    {%- endif -%}
    {%- if unique_key | length != 1 or inputs[driver] | trim | lower != unique_key[0] | lower -%}
        {{ exceptions.raise_compiler_error(label ~ ": incremental_driver " ~ driver
            ~ " must be linked by the unique key, a single column (one output row per "
            ~ "row of it), got unique_key " ~ unique_key | join(', ') ~ " and "
            ~ driver ~ ": " ~ inputs[driver]) }}
    {%- endif -%}
    {{ return(driver) }}
{%- endmacro %}

{#- The property recording which version of `relation` the last publish read. -#}
{% macro _awap_mark_property(relation) -%}
    {{ return('lakehouse.input.' ~ relation.schema ~ '.' ~ relation.identifier) }}
{%- endmacro %}

{#-
    What an incremental build reads: for each input, its relation, its current
    `{id}@{version}`, and the versions to read changes from (the recorded mark + 1 to
    now); or `reason` (why this build rebuilds everything). `columns`: the model's
    output columns; every input column and key must be among them.
-#}
{% macro _awap_incremental_plan(target, incremental, columns, replace, label) -%}
    {%- set names = columns | map(attribute='name') | map('lower') | list -%}
    {%- for column in incremental.unique_key + incremental.inputs | map(attribute='column') | list
            + incremental.inputs | selectattr('at') | map(attribute='at') | list
            if column | lower not in names -%}
        {{ exceptions.raise_compiler_error(label ~ ": column '" ~ column ~ "' (unique_key or "
            ~ "incremental_inputs) is not in the model's output (" ~ names | join(', ') ~ ")") }}
    {%- endfor -%}
    {%- set plan = {'reason': none, 'inputs': []} -%}
    {%- set recorded = {} -%}
    {%- if replace -%}
        {%- do plan.update({'reason': 'a new table, a full refresh or a changed contract'}) -%}
    {%- else -%}
        {%- do recorded.update(_delta_properties(target)) -%}
    {%- endif -%}
    {%- for input in incremental.inputs -%}
        {%- set relation = ref(input.model) -%}
        {%- set described = run_query("describe detail " ~ relation)[0] -%}
        {%- set detail = {'id': described['id'], 'location': described['location'],
            'properties': _delta_properties(relation)} -%}
        {%- set history = run_query("describe history " ~ relation ~ " limit 100") -%}
        {%- set current = history[0]['version'] | int -%}
        {%- set state = {'from': none} -%}
        {%- set mark = recorded.get(_awap_mark_property(relation)) -%}
        {%- if plan.reason is none -%}
            {%- set why = _awap_input_unreadable(relation, detail, history, mark) -%}
            {%- if why -%}
                {%- do plan.update({'reason': why}) -%}
            {%- else -%}
                {%- do state.update({'from': mark.split('@')[1] | int + 1}) -%}
            {%- endif -%}
        {%- endif -%}
        {%- set entry = {'relation': relation, 'location': detail.location, 'from': state['from'],
            'to': current, 'mark': detail['id'] ~ '@' ~ current, 'content': []} -%}
        {%- do entry.update(input) -%}
        {%- if input.at -%}
            {%- do entry.update({'content': _awap_validity_content(relation, input, label)}) -%}
        {%- endif -%}
        {%- do plan.inputs.append(entry) -%}
    {%- endfor -%}
    {{ return(plan) }}
{%- endmacro %}

{#- A point-in-time input's columns but `valid_to` and `current_flag`: a version whose
    images agree on them changed only where it ends. Each named column must exist. -#}
{% macro _awap_validity_content(relation, input, label) -%}
    {%- set names = _cdc_describe(relation) | map(attribute='name') | list -%}
    {%- set lowered = names | map('lower') | list -%}
    {%- for key in ['column', 'valid_from', 'valid_to', 'current_flag']
            if input[key] and input[key] | lower not in lowered -%}
        {{ exceptions.raise_compiler_error(label ~ ": incremental_inputs." ~ input.model ~ "."
            ~ key ~ " '" ~ input[key] ~ "' is not a column of " ~ relation ~ " ("
            ~ names | join(', ') ~ ")") }}
    {%- endfor -%}
    {%- set ending = [input.valid_to | lower, (input.current_flag or '') | lower] -%}
    {%- set kept = [] -%}
    {%- for name in names if name | lower not in ending -%}
        {%- do kept.append(name) -%}
    {%- endfor -%}
    {{ return(kept) }}
{%- endmacro %}

{#- Why the change feed of `relation` cannot say what changed since `mark`, or ''. -#}
{% macro _awap_input_unreadable(relation, detail, history, mark) -%}
    {%- if mark is none -%}
        {{ return('no version of ' ~ relation ~ ' recorded yet') }}
    {%- endif -%}
    {%- set table_id, version = mark.split('@') -%}
    {%- set version = version | int -%}
    {%- set current = history[0]['version'] | int -%}
    {%- if table_id != detail['id'] -%}
        {{ return(relation ~ ' was replaced by another table') }}
    {%- elif detail.properties.get('delta.enableChangeDataFeed', 'false') | lower != 'true' -%}
        {{ return(relation ~ ' has no change data feed (tblproperties '
            ~ 'delta.enableChangeDataFeed: true)') }}
    {%- elif current < version -%}
        {{ return(relation ~ ' is at version ' ~ current ~ ', before the recorded ' ~ version) }}
    {%- elif current - version >= history | length -%}
        {{ return(relation ~ ' has more than ' ~ (history | length - 1)
            ~ ' commits since the last publish') }}
    {%- endif -%}
    {#- A VACUUM (`make maintain`) deletes no file the feed reads unless its horizon
        passed the first commit to read. -#}
    {%- set readable = ['WRITE', 'MERGE', 'UPDATE', 'DELETE', 'OPTIMIZE', 'ADD COLUMNS',
                        'SET TBLPROPERTIES', 'CLUSTER BY', 'VACUUM START', 'VACUUM END'] -%}
    {%- for row in history if row['version'] | int > version -%}
        {%- if row['operation'] not in readable or (row['operation'] == 'SET TBLPROPERTIES'
                and 'enableChangeDataFeed' in row['operationParameters'] | string) -%}
            {{ return(relation ~ ' had a ' ~ row['operation'] ~ ' at version ' ~ row['version']) }}
        {%- endif -%}
    {%- endfor -%}
    {%- set vacuum = _delta_vacuum_horizon(history, version) -%}
    {%- if vacuum is not none -%}
        {{ return(relation ~ "'s VACUUM at version " ~ vacuum.version ~ " (retention "
            ~ vacuum.retention_hours ~ " h) may have deleted files of its changes since "
            ~ "version " ~ version) }}
    {%- endif -%}
    {{ return('') }}
{%- endmacro %}

{#- The keys to recompute: for each input changed since its mark, the keys of the rows
    whose linking column matches a changed row's, in the new output and in the table.
    The change feed is read by path: `table_changes('<table>', ...)` in a query that
    also reads `<table>` (the model's output does) returns the whole table, not its
    changes (Spark 4.2 resolves both to one cached relation). -#}
{% macro _awap_keys_sql(target, input_view, incremental, plan) -%}
    {%- set key_list = [] -%}
    {%- for key in incremental.unique_key -%}
        {%- do key_list.append('`' ~ key ~ '`') -%}
    {%- endfor -%}
    {%- set branches = [] -%}
    {%- for input in plan.inputs if input['from'] <= input.to -%}
        {%- set feed = "table_changes_by_path('" ~ input.location | replace("'", "\\'") ~ "', "
            ~ input['from'] ~ ", " ~ input.to ~ ")" -%}
        {%- set changed = "select `" ~ input.column ~ "` from " ~ feed -%}
        {%- if input.at -%}
            {#- A point-in-time input: the rows whose `at` falls where a version changed. -#}
            {%- for source in ((target,) if incremental.driver else (input_view, target)) -%}
                {%- do branches.append("select o." ~ key_list | join(', o.') ~ " from " ~ source
                    ~ " as o join (" ~ _awap_validity_ranges_sql(feed, input) ~ ") as r on o.`"
                    ~ input.column ~ "` = r.link and o.`" ~ input.at ~ "` >= r.lo and (r.hi is null"
                    ~ " or o.`" ~ input.at ~ "` <= r.hi)") -%}
            {%- endfor -%}
        {%- elif input.model == incremental.driver -%}
            {#- Linked by the key itself: its changed rows' keys are the keys. -#}
            {%- do branches.append(changed) -%}
        {%- else -%}
            {#- With a driver, the published rows are the rows before, with the linking
                columns of their driver rows; a driver row changed since is in its feed. -#}
            {%- for source in ((target,) if incremental.driver else (input_view, target)) -%}
                {%- do branches.append("select " ~ key_list | join(', ') ~ " from " ~ source
                    ~ " where `" ~ input.column ~ "` in (" ~ changed ~ ")") -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if not branches -%}
        {%- do branches.append("select " ~ key_list | join(', ') ~ " from " ~ target
            ~ " where false") -%}
    {%- endif -%}
    select distinct {{ key_list | join(', ') }} from (
        {{ branches | join('\n        union all\n        ') }}
    ) as changed_keys
{%- endmacro %}

{#-
    A point-in-time input's changed times (`link`, `lo`, `hi`; `hi` null: open) from
    its change feed `feed`: the input is a history of versions, each valid on
    [`valid_from`, `valid_to`) (null: open), and the model takes, for each of its rows,
    the version valid at the row's `at` (`point_in_time_join`). A version inserted or
    deleted changes what the rows inside its validity see; so does an update, unless its
    images agree on every column but `valid_to` and `current_flag` (`content`): then
    only the rows between the old and the new `valid_to` see something else. That is
    the common change of a history: a version closed at a new version's start leaves
    the rows before that start as they were. A version's images are paired within one
    commit by link and `valid_from`, and only when the commit holds exactly one of
    each; anything else counts whole. The bounds are kept closed (`<=`), so a model that
    joins with an inclusive end is still recomputed.
-#}
{% macro _awap_validity_ranges_sql(feed, input) -%}
    {%- set content = [] -%}
    {%- for name in input.content -%}
        {%- do content.append("`" ~ name ~ "`") -%}
    {%- endfor -%}
    {#- One pass over the feed, each image told by window functions whether it is half
        of such a pair (its version's images in the commit). No WITH: a cached query
        with CTEs is never matched again (each analysis numbers its CTEs anew), so every
        statement reading the cached keys would compute them again. -#}
    select link,
        if(paired, least(hi_before, hi_after), lo) as lo,
        if(paired, if(hi_before is null or hi_after is null, null,
            greatest(hi_before, hi_after)), hi) as hi
    from (
        select link, lo, hi, _change_type,
            count(*) over version = 2
                and count_if(_change_type = 'update_preimage') over version = 1
                and count_if(_change_type = 'update_postimage') over version = 1
                and size(collect_set(content) over version) = 1 as paired,
            max_by(hi, _change_type = 'update_preimage') over version as hi_before,
            max_by(hi, _change_type = 'update_postimage') over version as hi_after
        from (
            select `{{ input.column }}` as link, `{{ input.valid_from }}` as lo,
                `{{ input.valid_to }}` as hi, _change_type, _commit_version,
                to_json(struct({{ content | join(', ') }}), map(
                    'timestampFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSSXXX',
                    'timestampNTZFormat', 'yyyy-MM-dd HH:mm:ss.SSSSSS')) as content
            from {{ feed }}
        ) as images
        window version as (partition by _commit_version, link, lo)
    ) as images
    where not paired or (_change_type = 'update_preimage' and not hi_before <=> hi_after)
{%- endmacro %}

{#-
    The publication of an incremental build, one commit: each recomputed key's row is
    updated (when it differs) or inserted, and a key the model no longer outputs is
    deleted.
-#}
{% macro _awap_merge_sql(target, staging, keys, columns, unique_key, predicates=[]) -%}
    merge into {{ target }} as t
    using (
        select
            {%- for key in unique_key %}
            k.`{{ key }}` as `_awap_key_{{ loop.index }}`,
            {%- endfor %}
            s.*
        from {{ keys }} as k
        left join (select *, true as _awap_present from {{ staging }}) as s
            on {{ _awap_key_match(unique_key, 'k', 's') }}
    ) as s
    on
    {%- for key in unique_key %}
        t.`{{ key }}` <=> s.`_awap_key_{{ loop.index }}`{{ ' and' if not loop.last }}
    {%- endfor %}
    {%- for predicate in predicates %}
        and {{ predicate }}
    {%- endfor %}
    when matched and s._awap_present is null then delete
    when matched and not (
        {%- for column in columns %}
        t.`{{ column.name }}` <=> s.`{{ column.name }}`{{ ' and' if not loop.last }}
        {%- endfor %}
    ) then update set
    {%- for column in columns %}
        t.`{{ column.name }}` = s.`{{ column.name }}`{{ ',' if not loop.last }}
    {%- endfor %}
    when not matched and s._awap_present then
        insert ({{ _cdc_column_list(columns) }})
        values ({{ _cdc_column_list(columns, 's') }})
{%- endmacro %}

{#-
    The merge's partition pruning, for a table with `partition_by`: for each partition
    column, `t.<column> in (<values>)`, the values of the recomputed keys' rows, as
    published and as recomputed, so Delta reads only those partitions' files to find
    the rows to update or delete (a key's published row is always among them, so none
    is missed and inserted twice). No predicates without `partition_by`, or over 1,000
    combinations of values. The values come back from Spark as JSON text, each cast to
    a string there, and go into the statement as `cast('<text>' as <type>)`: dbt's
    result tables guess types from values, and would read a string partition '007' as
    the number 7.
-#}
{% macro _awap_partition_predicates(target, staging, keys, columns, unique_key, partition_by) -%}
    {%- if not partition_by -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set types = {} -%}
    {%- for column in columns -%}
        {%- do types.update({column.name | lower: column.type}) -%}
    {%- endfor -%}
    {%- set named, selected = [], [] -%}
    {%- for column in partition_by -%}
        {%- do named.append("'" ~ loop.index ~ "', cast(`" ~ column ~ "` as string)") -%}
        {%- do selected.append("`" ~ column ~ "`") -%}
    {%- endfor -%}
    {%- set found = run_query(
        "select distinct to_json(named_struct(" ~ named | join(', ') ~ ")) from ("
        ~ "select " ~ selected | join(', ') ~ " from " ~ target ~ " as t left semi join "
        ~ keys ~ " as k on " ~ _awap_key_match(unique_key, 't', 'k')
        ~ " union all select " ~ selected | join(', ') ~ " from " ~ staging
        ~ ") as touched limit 1001") -%}
    {%- if found | length > 1000 -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set predicates = [] -%}
    {%- for column in partition_by -%}
        {%- set position = loop.index | string -%}
        {%- set values = [] -%}
        {%- set state = {'null': false} -%}
        {%- for row in found -%}
            {%- set value = fromjson(row[0]).get(position) -%}
            {%- if value is none -%}
                {%- do state.update({'null': true}) -%}
            {%- else -%}
                {%- set literal = "cast('" ~ value | replace("\\", "\\\\") | replace("'", "\\'")
                    ~ "' as " ~ types[column | lower] ~ ")" -%}
                {%- if literal not in values -%}
                    {%- do values.append(literal) -%}
                {%- endif -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set tests = [] -%}
        {%- if values -%}
            {%- do tests.append("t.`" ~ column ~ "` in (" ~ values | join(', ') ~ ")") -%}
        {%- endif -%}
        {%- if state.null -%}
            {%- do tests.append("t.`" ~ column ~ "` is null") -%}
        {%- endif -%}
        {%- do predicates.append("(" ~ (tests | join(' or ') if tests else 'false') ~ ")") -%}
    {%- endfor -%}
    {{ return(predicates) }}
{%- endmacro %}

{#- Null-safe equality of the unique key's columns between two relations or aliases. -#}
{% macro _awap_key_match(unique_key, left, right) -%}
    {%- set columns = [] -%}
    {%- for key in unique_key -%}
        {%- do columns.append({'name': key}) -%}
    {%- endfor -%}
    {{ return(_cdc_key_match(columns, left, right)) }}
{%- endmacro %}

{#- After a publish: the configured `tblproperties` (set at creation; set again when
    they differ) and, for an incremental model, the input versions it read. -#}
{% macro _awap_set_properties(target, properties, plan) -%}
    {%- set wanted = {} -%}
    {%- do wanted.update(properties) -%}
    {%- if plan is not none -%}
        {%- for input in plan.inputs -%}
            {%- do wanted.update({_awap_mark_property(input.relation): input.mark}) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if wanted -%}
        {%- set current = _delta_properties(target) -%}
        {%- set differing = {} -%}
        {%- for key, value in wanted.items() if current.get(key) != value | string -%}
            {%- do differing.update({key: value}) -%}
        {%- endfor -%}
        {%- if differing -%}
            {%- do run_query("alter table " ~ target ~ " set "
                ~ _delta_tblproperties_clause(differing)) -%}
        {%- endif -%}
    {%- endif -%}
{%- endmacro %}
