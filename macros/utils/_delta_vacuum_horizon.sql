{#-
    Private: the first VACUUM among a Delta table's commits after `version` that may
    have deleted files those commits need, or none. `history`: rows of `describe
    history`, holding `version`. The files a RESTORE to `version` or the change feed of
    the commits after it reads are removed at the earliest by the commit after
    `version`, whose removals (and change files) are stamped during its transaction: a
    VACUUM with retention R run at time T deletes the files removed before T - R, so
    `version`'s own commit, before that transaction, must be younger than every later
    VACUUM's horizon. Returns {version, timestamp, retention_hours} of the VACUUM.
-#}
{% macro _delta_vacuum_horizon(history, version) -%}
    {%- set base = {} -%}
    {%- for row in history if row['version'] | int == version -%}
        {%- do base.update({'timestamp': row['timestamp']}) -%}
    {%- endfor -%}
    {%- if not base -%}
        {{ return(none) }}
    {%- endif -%}
    {%- for row in history if row['version'] | int > version
            and row['operation'] == 'VACUUM START' -%}
        {%- set parameters = fromjson(row['operationParameters']) -%}
        {%- set retention = parameters.get('specifiedRetentionMillis')
            or parameters.get('defaultRetentionMillis') or '0' -%}
        {%- if row['timestamp'] - modules.datetime.timedelta(milliseconds=retention | int)
                > base.timestamp -%}
            {{ return({'version': row['version'] | int, 'timestamp': row['timestamp'],
                'retention_hours': (retention | int / 3600000) | round(2)}) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(none) }}
{%- endmacro %}
