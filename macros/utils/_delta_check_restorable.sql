{#-
    Private: fails, changing nothing, unless a Delta table can be restored to `version`:
    the version must still be in the table's log (delta.logRetentionDuration), and no
    VACUUM since may have deleted its files. A VACUUM with retention R run at time T
    deletes the files removed before T - R; the files of `version` are removed at the
    earliest by the commit after it, so that commit must be younger than every later
    VACUUM's horizon. Returns the table's current version (its history's newest).
-#}
{% macro _delta_check_restorable(relation, version) -%}
    {%- set history = run_query("describe history " ~ relation) -%}
    {%- set by_version = {} -%}
    {%- for row in history -%}
        {%- do by_version.update({row['version'] | int: row}) -%}
    {%- endfor -%}
    {%- set unchanged = "; nothing was changed" -%}
    {%- if version not in by_version -%}
        {{ exceptions.raise_compiler_error(
            "cannot restore " ~ relation ~ " to version " ~ version ~ ": its log keeps "
            ~ "versions " ~ by_version.keys() | min ~ " to " ~ by_version.keys() | max
            ~ " only (delta.logRetentionDuration)" ~ unchanged) }}
    {%- endif -%}
    {%- set successor = by_version.get(version + 1) -%}
    {%- if successor is not none -%}
        {%- for row in history if row['version'] | int > version
                and row['operation'] == 'VACUUM START' -%}
            {%- set parameters = fromjson(row['operationParameters']) -%}
            {%- set retention = parameters.get('specifiedRetentionMillis')
                or parameters.get('defaultRetentionMillis') or '0' -%}
            {%- set horizon = row['timestamp']
                - modules.datetime.timedelta(milliseconds=retention | int) -%}
            {%- if horizon > successor['timestamp'] -%}
                {{ exceptions.raise_compiler_error(
                    "cannot restore " ~ relation ~ " to version " ~ version ~ ": it is past "
                    ~ "the retention horizon, the VACUUM of " ~ row['timestamp']
                    ~ " (version " ~ row['version'] ~ ", retention "
                    ~ (retention | int / 3600000) | round(2) ~ " h) may have deleted its "
                    ~ "files" ~ unchanged) }}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(by_version.keys() | max) }}
{%- endmacro %}
