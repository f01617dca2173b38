{#-
    Private: how to read only the files that a Delta table's commits after version
    `start` (up to `end`, default the newest) added, by a `column` with statistics in
    it (e.g. Bronze's `_ingested_at`). Delta has no statistics for
    `_metadata.row_commit_version`, so a filter on it alone reads every file.

    Returns {'reason': '', 'end': the last version, 'predicate': SQL}: the predicate is
    `column >= <the smallest value among the rows those commits added>` (a literal; from
    the table's change data feed), or `false` when they added none. With the commit
    versions (start, end], it selects exactly their rows, and Delta skips every file
    whose statistics show only smaller values: the earlier commits' files, unless a
    writer's clock ran behind. Or {'reason': why not}, when the bound would not be
    exact: a commit since `start` that is not an append, more than 99 of them, no
    change data feed, or rows without a value of `column`; the caller then reads
    every file. `behind` is true when the table is at a version before `start` (it was
    made again: a table's versions never go back).
-#}
{% macro _delta_commit_bound(relation, column, start, end=none) -%}
    {%- set history = run_query("describe history " ~ relation ~ " limit 100") -%}
    {%- set current = history[0]['version'] | int -%}
    {%- set end = current if end is none else end -%}
    {%- if current < start -%}
        {{ return({'reason': 'the table is at version ' ~ current ~ ', before the window start '
            ~ start, 'behind': true}) }}
    {%- elif current - start >= history | length -%}
        {{ return({'reason': 'more than ' ~ (history | length - 1) ~ ' commits since the window start'}) }}
    {%- endif -%}
    {%- for row in history if row['version'] | int > start -%}
        {%- if not (row['operation'] in ('WRITE', 'STREAMING UPDATE')
                and 'Append' in row['operationParameters'] | string) -%}
            {{ return({'reason': 'a ' ~ row['operation'] ~ ' at version ' ~ row['version']
                ~ ', not an append'}) }}
        {%- endif -%}
    {%- endfor -%}
    {%- if _delta_properties(relation).get('delta.enableChangeDataFeed', 'false') | lower != 'true' -%}
        {{ return({'reason': 'no change data feed'}) }}
    {%- endif -%}
    {%- if end <= start -%}
        {{ return({'reason': '', 'end': end, 'predicate': 'false'}) }}
    {%- endif -%}
    {%- set quoted = '`' ~ column ~ '`' -%}
    {%- set row = run_query("select count(*), count(" ~ quoted ~ "), typeof(min(" ~ quoted
        ~ ")), cast(min(" ~ quoted ~ ") as string) from table_changes('" ~ relation ~ "', "
        ~ (start + 1) ~ ", " ~ end ~ ")")[0] -%}
    {%- if row[0] | int == 0 -%}
        {{ return({'reason': '', 'end': end, 'predicate': 'false'}) }}
    {%- elif row[1] | int < row[0] | int -%}
        {{ return({'reason': (row[0] - row[1]) ~ ' rows committed since the window start have no '
            ~ column}) }}
    {%- endif -%}
    {{ return({'reason': '', 'end': end, 'predicate': quoted ~ " >= cast('"
        ~ row[3] | replace("'", "\\'") ~ "' as " ~ row[2] ~ ")"}) }}
{%- endmacro %}
