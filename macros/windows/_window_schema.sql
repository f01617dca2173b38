{#- Private: a windowed model's columns against its tables (`on_schema_change`). -#}

{#-
    Compares the model's carried columns with its table's (`relations`: the table
    first, then side tables that carry the same columns, e.g. the history's change
    store, each first realigned with the table: `_window_align_columns`) and applies
    `on_schema_change`:
    - `append_new_columns` (the default): a new column is added to each table, null
      for the rows already there; a column the model no longer selects stays, and the
      rows written from now on hold null in it (a merge leaves an updated row's old
      value);
    - `ignore`: the tables keep their columns; a new column is not written;
    - `fail`: any added or removed column fails the run, naming them;
    - `sync_all_columns`: new columns are added and removed ones dropped (Delta column
      mapping is switched on for that, once).
    In every mode, a column whose type changed, a key the table lacks, or a changed
    `sequence_by` fails the run: they need a full refresh. Returns the columns the run
    writes (`columns`, with `carried` narrowed under `ignore`), `dropped`, the
    columns dropped from the model's table, and `kept`, those its table keeps though the
    model no longer selects them (`ignore`, `append_new_columns`).
-#}
{% macro _window_sync_columns(relations, changes, columns, options) -%}
    {%- set mode = options.on_schema_change -%}
    {%- set sequence_type = _cdc_sequence_type(changes, options)
        if options.get('sequence_by') else none -%}
    {%- set owned = options.get('reserved', []) | map('lower') | list -%}
    {%- if options.get('delete_mode') == 'soft' -%}
        {%- do owned.append(options.soft_delete_column | lower) -%}
    {%- endif -%}
    {%- set model_names = columns.carried | map(attribute='name') | map('lower') | list -%}
    {%- set result = {'carried': columns.carried, 'dropped': [], 'kept': []} -%}
    {%- set first = {} -%}
    {%- for relation in relations -%}
        {%- set existing = {} -%}
        {%- set table_names = [] -%}
        {%- for column in _cdc_describe(relation) -%}
            {%- do existing.update({column.name | lower: column.type}) -%}
            {%- if not column.name.startswith('_cdc_') and column.name | lower not in owned -%}
                {%- do table_names.append(column.name) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- if loop.first -%}
            {%- for name in table_names -%}
                {%- do first.update({name | lower: {'name': name, 'type': existing[name | lower]}}) -%}
            {%- endfor -%}
        {%- else -%}
            {%- set table_names = _window_align_columns(relation, relations[0], first,
                existing, table_names, options) -%}
        {%- endif -%}
        {%- if sequence_type is not none and existing.get('_cdc_sequence') != sequence_type -%}
            {{ _cdc_config_error(options.label, "sequence_by changed (the table's sequence is "
                ~ existing.get('_cdc_sequence') ~ ", the model's " ~ sequence_type
                ~ "); run with --full-refresh") }}
        {%- endif -%}
        {%- for key in columns.get('keys', []) if key.name | lower not in existing -%}
            {{ _cdc_config_error(options.label, "key column '" ~ key.name ~ "' is not in "
                ~ relation ~ " (unique_key changed); run with --full-refresh") }}
        {%- endfor -%}
        {%- set added = [] -%}
        {%- for column in columns.carried -%}
            {%- set current = existing.get(column.name | lower) -%}
            {%- if current is none -%}
                {%- do added.append(column) -%}
            {%- elif current != column.type -%}
                {{ _cdc_config_error(options.label, "column '" ~ column.name
                    ~ "' changed type from " ~ current ~ " to " ~ column.type
                    ~ "; run with --full-refresh") }}
            {%- endif -%}
        {%- endfor -%}
        {#- Names compare as Spark resolves them, whatever their case. -#}
        {%- set removed = [] -%}
        {%- for name in table_names if name | lower not in model_names -%}
            {%- do removed.append(name) -%}
        {%- endfor -%}
        {%- set added_names = added | map(attribute='name') | list -%}
        {%- if loop.first and mode in ('ignore', 'append_new_columns') -%}
            {%- for name in removed -%}
                {%- do result.kept.append({'name': name, 'type': existing[name | lower]}) -%}
            {%- endfor -%}
        {%- endif -%}
        {%- if mode == 'fail' and (added or removed) -%}
            {{ _cdc_config_error(options.label, "the model's columns differ from "
                ~ relation ~ "'s (added: " ~ (added_names | join(', ') or 'none')
                ~ "; removed: " ~ (removed | join(', ') or 'none')
                ~ ") and on_schema_change is 'fail'; set on_schema_change to "
                ~ "'append_new_columns' or 'sync_all_columns', or run with --full-refresh") }}
        {%- elif mode == 'ignore' -%}
            {%- if loop.first and added -%}
                {%- do result.update({'carried': columns.carried
                    | rejectattr('name', 'in', added_names) | list}) -%}
                {{ log(options.label ~ ": on_schema_change 'ignore': not written: "
                    ~ added_names | join(', '), info=true) }}
            {%- endif -%}
        {%- else -%}
            {%- if added -%}
                {{ log(options.label ~ ": added to " ~ relation ~ ": "
                    ~ _window_add_columns(relation, added), info=true) }}
            {%- endif -%}
            {%- if mode == 'sync_all_columns' and removed -%}
                {%- do _window_drop_columns(relation, removed) -%}
                {%- if loop.first -%}
                    {%- do result.update({'dropped': removed}) -%}
                {%- endif -%}
                {{ log(options.label ~ ": dropped from " ~ relation ~ ": "
                    ~ removed | join(', '), info=true) }}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set synced = {} -%}
    {%- do synced.update(columns) -%}
    {%- do synced.update(result) -%}
    {{ return(synced) }}
{%- endmacro %}

{#-
    A side table (`relation`) that carries the model's columns as its table (`first`)
    does: each run alters the table first, so any difference is left by a run that died
    between the two (its adds, its drops): the side table gets the columns it lacks,
    with the table's types, and loses those the table no longer has (a drop that the
    history's next run finds in the side table's log, and recomputes every key for), in
    every `on_schema_change` mode. `existing` (name -> type) is updated in place; returns
    the side table's carried column names after it.
-#}
{% macro _window_align_columns(relation, table, first, existing, table_names, options) -%}
    {%- set missing = [] -%}
    {%- for name, column in first | dictsort if name not in existing -%}
        {%- do missing.append(column) -%}
        {%- do existing.update({name: column.type}) -%}
    {%- endfor -%}
    {%- set extra = [] -%}
    {%- for name in table_names if name | lower not in first -%}
        {%- do extra.append(name) -%}
        {%- do existing.pop(name | lower) -%}
    {%- endfor -%}
    {%- if missing -%}
        {%- do _window_add_columns(relation, missing) -%}
    {%- endif -%}
    {%- if extra -%}
        {%- do _window_drop_columns(relation, extra) -%}
    {%- endif -%}
    {%- if missing or extra -%}
        {{ log(options.label ~ ": " ~ relation ~ " realigned with " ~ table
            ~ " (a run died between their changes): added "
            ~ (missing | map(attribute='name') | join(', ') or 'none') ~ "; dropped "
            ~ (extra | join(', ') or 'none'), info=true) }}
    {%- endif -%}
    {{ return(table_names | reject('in', extra) | list
        + missing | map(attribute='name') | list) }}
{%- endmacro %}

{#- Adds `columns` ({name, type}) to a Delta table; returns their definitions. -#}
{% macro _window_add_columns(relation, columns) -%}
    {%- set definitions = [] -%}
    {%- for column in columns -%}
        {%- do definitions.append('`' ~ column.name ~ '` ' ~ column.type) -%}
    {%- endfor -%}
    {%- do run_query("alter table " ~ relation ~ " add columns ("
        ~ definitions | join(', ') ~ ")") -%}
    {{ return(definitions | join(', ')) }}
{%- endmacro %}

{#- Drops columns of a Delta table; dropping needs column mapping by name, switched on
    here the first time (a metadata-only commit: the data files stay as they are). -#}
{% macro _window_drop_columns(relation, names) -%}
    {%- set mapping = {'mode': none} -%}
    {%- for row in run_query("show tblproperties " ~ relation) -%}
        {%- if row[0] == 'delta.columnMapping.mode' -%}
            {%- do mapping.update({'mode': row[1]}) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if mapping.mode != 'name' -%}
        {%- do run_query("alter table " ~ relation
            ~ " set tblproperties ('delta.columnMapping.mode' = 'name')") -%}
    {%- endif -%}
    {%- set quoted = [] -%}
    {%- for name in names -%}
        {%- do quoted.append('`' ~ name ~ '`') -%}
    {%- endfor -%}
    {%- do run_query("alter table " ~ relation ~ " drop columns (" ~ quoted | join(', ') ~ ")") -%}
{%- endmacro %}
