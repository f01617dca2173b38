{#-
    Private: the columns that a Delta table's commits after `version` dropped (`alter
    table ... drop columns`), as its history names them; [] when `version` is none or
    nothing was committed after it (`current`: the version the caller last read). Reads
    the history only when something was: the commits since `current - version` ago, and
    the whole history if more came since. If the log no longer holds every commit after
    `version` (delta.logRetentionDuration), what they did is unknown: the result is then
    ['(unknown: ...)'], so that the caller assumes a drop.
-#}
{% macro _delta_dropped_columns(relation, version, current) -%}
    {%- if version is none or current <= version -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set history = run_query("describe history " ~ relation ~ " limit " ~ (current - version)) -%}
    {%- if history | map(attribute='version') | map('int') | min > version + 1 -%}
        {%- set history = run_query("describe history " ~ relation) -%}
    {%- endif -%}
    {%- set oldest = history | map(attribute='version') | map('int') | min -%}
    {%- if oldest > version + 1 -%}
        {{ return(['(unknown: the log of ' ~ relation ~ ' starts at version ' ~ oldest
            ~ ', after ' ~ version ~ ')']) }}
    {%- endif -%}
    {%- set dropped = [] -%}
    {%- for row in history if row['operation'] == 'DROP COLUMNS' and row['version'] | int > version -%}
        {%- set names = fromjson(fromjson(row['operationParameters']).get('columns', '[]')) -%}
        {%- do dropped.extend(names or ['(unnamed in version ' ~ row['version'] ~ ')']) -%}
    {%- endfor -%}
    {{ return(dropped) }}
{%- endmacro %}
