{#-
    Private: RESTORE a Delta table to `version`, keeping its retention. Delta's RESTORE
    brings back that version's metadata, table properties included: a
    `delta.logRetentionDuration` that `make maintain` raised since (to a backfill horizon
    past Delta's 30 days) would fall back, and the log a backfill within the horizon
    needs could be cleaned up before the next maintenance. Each retention property is
    set back to the value the newest commit other than a RESTORE gave it: a SET, an
    UNSET, or a create or replace (which gives Delta's default to what it leaves out),
    read from the table's history, which a RESTORE leaves as it is (a retry after a run
    that died between the two finds it there too); else to its value before the
    restore. One more commit where the restore changed one, none otherwise. A checkpoint
    that Delta writes at the RESTORE's own commit cleans the log up by the restored
    retention: raise it in the table's `tblproperties` config to keep it from the first
    version on.
-#}
{% macro _delta_restore(relation, version) -%}
    {%- set retention = ['delta.deletedFileRetentionDuration', 'delta.logRetentionDuration'] -%}
    {%- set wanted = _delta_properties(relation) -%}
    {%- set history = run_query("describe history " ~ relation) -%}
    {%- for name in retention -%}
        {%- set found = namespace(done=false) -%}
        {%- for row in history if not found.done and row['operation'] != 'RESTORE' -%}
            {%- set operation = row['operation'] -%}
            {%- set parameters = _describe_value(row['operationParameters'], {}) -%}
            {#- `properties`: a SET's map, an UNSET's list of keys, a create's or
                replace's whole configuration. -#}
            {%- set given = _describe_value(parameters.get('properties'), {}) -%}
            {%- set created = operation.startswith('CREATE') or 'REPLACE' in operation -%}
            {%- if (operation == 'UNSET TBLPROPERTIES' and name in given)
                    or (created and given is mapping and name not in given) -%}
                {%- do wanted.pop(name, none) -%}
                {%- set found.done = true -%}
            {%- elif operation != 'UNSET TBLPROPERTIES' and given is mapping
                    and name in given -%}
                {%- do wanted.update({name: given[name]}) -%}
                {%- set found.done = true -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endfor -%}
    {%- do run_query("restore table " ~ relation ~ " to version as of " ~ version) -%}
    {%- set restored = _delta_properties(relation) -%}
    {%- set kept = [] -%}
    {%- set dropped = [] -%}
    {%- for name in retention if wanted.get(name) != restored.get(name) -%}
        {%- if wanted.get(name) is none -%}
            {%- do dropped.append("'" ~ name ~ "'") -%}
        {%- else -%}
            {%- do kept.append("'" ~ name ~ "' = '"
                ~ wanted[name] | replace("\\", "\\\\") | replace("'", "\\'") ~ "'") -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if kept -%}
        {%- do run_query("alter table " ~ relation ~ " set tblproperties ("
            ~ kept | join(', ') ~ ")") -%}
    {%- endif -%}
    {%- if dropped -%}
        {%- do run_query("alter table " ~ relation ~ " unset tblproperties if exists ("
            ~ dropped | join(', ') ~ ")") -%}
    {%- endif -%}
{%- endmacro %}
