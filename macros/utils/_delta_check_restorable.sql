{#-
    Private: fails, changing nothing, unless a Delta table can be restored to `version`:
    the version must still be in the table's log (delta.logRetentionDuration), and no
    VACUUM since may have deleted its files (`_delta_vacuum_horizon`). Returns the
    table's current version (its history's newest).
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
    {%- set vacuum = _delta_vacuum_horizon(history, version) -%}
    {%- if vacuum is not none -%}
        {{ exceptions.raise_compiler_error(
            "cannot restore " ~ relation ~ " to version " ~ version ~ ": it is past "
            ~ "the retention horizon, the VACUUM of " ~ vacuum.timestamp
            ~ " (version " ~ vacuum.version ~ ", retention " ~ vacuum.retention_hours
            ~ " h) may have deleted its files" ~ unchanged) }}
    {%- endif -%}
    {{ return(by_version.keys() | max) }}
{%- endmacro %}
