{#-
    Private helpers of maintain_tables: the retention policy, the tables to maintain,
    the keys each declares, and the maintenance of one table.
-#}

{#- Delta's defaults where a table does not set the property (Delta 4.4). -#}
{% macro _maintenance_delta_defaults() -%}
    {{ return({
        'delta.deletedFileRetentionDuration': 'interval 1 week',
        'delta.logRetentionDuration': 'interval 30 days',
        'delta.dataSkippingNumIndexedCols': '32',
    }) }}
{%- endmacro %}

{#- A number of hours (>= 0) from an argument or a setting, or a one-line error. -#}
{% macro _maintenance_hours(value, name) -%}
    {%- set text = value | string | trim -%}
    {%- if not modules.re.match('^[0-9]+(\\.[0-9]+)?$', text) -%}
        {{ exceptions.raise_compiler_error(
            "maintain_tables: " ~ name ~ " must be a number of hours >= 0, got '" ~ text
            ~ "'") }}
    {%- endif -%}
    {{ return(text | float) }}
{%- endmacro %}

{#- Hours as a Delta interval property value and as milliseconds. -#}
{% macro _maintenance_interval(hours) -%}
    {%- set millis = (hours * 3600000) | round | int -%}
    {%- if millis % 3600000 == 0 -%}
        {{ return({'text': 'interval ' ~ (millis // 3600000) ~ ' hours', 'millis': millis}) }}
    {%- endif -%}
    {{ return({'text': 'interval ' ~ millis ~ ' milliseconds', 'millis': millis}) }}
{%- endmacro %}

{#-
    The policy: the backfill horizon (argument, else env LAKEHOUSE_BACKFILL_HORIZON_HOURS,
    default 168 h = 7 days) and the file retention (argument, default the horizon),
    never shorter than the horizon.
-#}
{% macro _maintenance_policy(horizon_hours, retain_hours, select) -%}
    {%- set horizon = _maintenance_hours(
        env_var('LAKEHOUSE_BACKFILL_HORIZON_HOURS', '168') if horizon_hours is none
        else horizon_hours, 'the backfill horizon (LAKEHOUSE_BACKFILL_HORIZON_HOURS)') -%}
    {%- set retain = horizon if retain_hours is none
        else _maintenance_hours(retain_hours, 'the retention (retain_hours)') -%}
    {%- if retain < horizon -%}
        {{ exceptions.raise_compiler_error(
            "maintain_tables: a retention of " ~ '%g' | format(retain) ~ " h is shorter than "
            ~ "the backfill horizon of " ~ '%g' | format(horizon) ~ " h "
            ~ "(LAKEHOUSE_BACKFILL_HORIZON_HOURS): VACUUM would delete files that a backfill "
            ~ "within the horizon restores; retain at least " ~ '%g' | format(horizon)
            ~ " h, or shorten the horizon") }}
    {%- endif -%}
    {%- set horizon_interval = _maintenance_interval(horizon) -%}
    {%- set retain_interval = _maintenance_interval(retain) -%}
    {#- `select`: names (`schema.table`) with `*` wildcards; none: every table. -#}
    {%- set patterns = ['*'] if select is none else ([select] if select is string else select) -%}
    {%- set alternatives = [] -%}
    {%- for pattern in patterns -%}
        {%- if not modules.re.match('^[a-z0-9_.*]+$', pattern | string | lower) -%}
            {{ exceptions.raise_compiler_error(
                "maintain_tables: select takes names like silver.users or bronze.*, got '"
                ~ pattern ~ "'") }}
        {%- endif -%}
        {%- do alternatives.append(pattern | lower | replace('.', '\\.') | replace('*', '.*')) -%}
    {%- endfor -%}
    {{ return({
        'horizon_hours': horizon, 'retain_hours': retain,
        'horizon': horizon_interval, 'retain': retain_interval,
        'select': modules.re.compile('^(' ~ alternatives | join('|') ~ ')$'),
    }) }}
{%- endmacro %}

{#- Milliseconds of a Delta interval property ('interval 7 days', '168 hours', ...). -#}
{% macro _maintenance_interval_millis(text, relation, property) -%}
    {%- set units = {
        'week': 604800000, 'day': 86400000, 'hour': 3600000, 'minute': 60000,
        'min': 60000, 'second': 1000, 'sec': 1000, 'millisecond': 1, 'msec': 1,
    } -%}
    {%- set value = text | string | trim | lower -%}
    {%- set pattern = '([0-9]+)\\s*(week|day|hour|minute|min|second|sec|millisecond|msec)s?' -%}
    {%- set parts = modules.re.findall(pattern, value) -%}
    {%- if not parts or modules.re.sub(pattern, '', value | replace('interval', ''))
            | trim != '' -%}
        {{ exceptions.raise_compiler_error(
            "maintain_tables: " ~ relation ~ " has " ~ property ~ " = '" ~ text ~ "', "
            ~ "not an interval of weeks, days, hours, minutes or seconds; set it to e.g. "
            ~ "'interval 7 days'") }}
    {%- endif -%}
    {%- set total = namespace(millis=0) -%}
    {%- for amount, unit in parts -%}
        {%- set total.millis = total.millis + (amount | int) * units[unit] -%}
    {%- endfor -%}
    {{ return(total.millis) }}
{%- endmacro %}

{#-
    The tables the ingestion job writes by path: sources whose meta has `path_root`, at
    `<lakehouse_root>/<path_root>/<table>`, keyed by their `loaded_at_field`.
-#}
{% macro _maintenance_path_tables() -%}
    {%- set tables = [] -%}
    {%- for source in graph.sources.values() | sort(attribute='unique_id') -%}
        {%- set path_root = source.config.meta.get('path_root') -%}
        {%- if path_root -%}
            {%- set root = var('lakehouse_root', '') -%}
            {%- if not (root.startswith('/') or '://' in root) -%}
                {{ exceptions.raise_compiler_error(
                    "maintain_tables: var 'lakehouse_root' must be an absolute path or a "
                    ~ "URI, got '" ~ root ~ "'; set LAKEHOUSE_HOME") }}
            {%- endif -%}
            {%- set loaded_at = source.loaded_at_field
                or source.config.get('loaded_at_field') -%}
            {%- do tables.append({
                'sql': "delta.`" ~ root ~ "/" ~ path_root ~ "/" ~ source.identifier ~ "`",
                'label': source.schema ~ '.' ~ source.identifier,
                'keys': [loaded_at] if loaded_at else [],
                'append_only_partitions': true,
            }) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(tables) }}
{%- endmacro %}

{#- `schema.identifier` -> the `unique_key` columns its model or snapshot declares. -#}
{% macro _maintenance_declared_keys() -%}
    {%- set keys = {} -%}
    {%- for node in graph.nodes.values()
            if node.resource_type in ['model', 'snapshot'] and node.config.get('unique_key') -%}
        {%- set key = node.config.get('unique_key') -%}
        {%- do keys.update({
            (node.schema ~ '.' ~ (node.alias or node.name)) | lower:
                [key] if key is string else key | list,
        }) -%}
    {%- endfor -%}
    {{ return(keys) }}
{%- endmacro %}

{#- The table's columns, in order (`describe`, up to its partition information). -#}
{% macro _maintenance_columns(relation) -%}
    {%- set columns = [] -%}
    {%- set ended = namespace(value=false) -%}
    {%- for row in run_query("describe " ~ relation) -%}
        {%- if row[0] is none or row[0] == '' or row[0].startswith('#') -%}
            {%- set ended.value = true -%}
        {%- elif not ended.value -%}
            {%- do columns.append(row[0]) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(columns) }}
{%- endmacro %}

{#-
    The Z-order columns of a table: its declared keys that it holds, that are not
    partition columns, and on which Delta collects file statistics (Z-ordering needs
    them: `delta.dataSkippingStatsColumns`, else the first
    `delta.dataSkippingNumIndexedCols` columns).
-#}
{% macro _maintenance_zorder_columns(relation, keys, partitions, properties) -%}
    {%- if not keys -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set columns = _maintenance_columns(relation) -%}
    {%- set stats = properties.get('delta.dataSkippingStatsColumns') -%}
    {%- if stats -%}
        {%- set indexed = stats.split(',') | map('trim') | list -%}
    {%- else -%}
        {%- set count = properties.get('delta.dataSkippingNumIndexedCols',
            _maintenance_delta_defaults()['delta.dataSkippingNumIndexedCols']) | int -%}
        {%- set indexed = columns if count < 0 else columns[:count] -%}
    {%- endif -%}
    {{ return(keys | select('in', columns) | reject('in', partitions)
        | select('in', indexed) | list) }}
{%- endmacro %}

{#-
    For a Bronze table (append-only, partitioned by ingestion date): only the
    partitions ingestion may have appended to since the last OPTIMIZE among its latest
    commits (a day of margin for clock skew); none found: every partition.
-#}
{% macro _maintenance_partition_filter(relation, partitions) -%}
    {%- if partitions | length != 1 -%}
        {{ return('') }}
    {%- endif -%}
    {%- for row in run_query("describe history " ~ relation ~ " limit 200")
            if row['operation'] == 'OPTIMIZE' -%}
        {{ return(" where `" ~ partitions[0] ~ "` >= date'"
            ~ row['timestamp'].strftime('%Y-%m-%d') ~ "' - interval 1 day") }}
    {%- endfor -%}
    {{ return('') }}
{%- endmacro %}

{#-
    One table: its retention properties, OPTIMIZE (clustering, Z-order by its keys, or
    compaction), then VACUUM with the table's retention; `done` holds the locations
    already maintained (a Bronze table is also registered in the catalog).
-#}
{% macro _maintain_table(table, policy, done) -%}
    {%- set relation = table.sql -%}
    {%- if not policy.select.match(table.label | lower) -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set detail = run_query("describe detail " ~ relation)[0] -%}
    {%- if detail['format'] != 'delta' or detail['location'] in done -%}
        {{ return(none) }}
    {%- endif -%}
    {%- do done.append(detail['location']) -%}
    {%- set properties = _describe_value(detail['properties'], {}) -%}
    {%- set defaults = _maintenance_delta_defaults() -%}
    {#- Retention: files for the retention, the log for at least the horizon. -#}
    {%- set changes = {} -%}
    {%- set files_property = 'delta.deletedFileRetentionDuration' -%}
    {%- if _maintenance_interval_millis(properties.get(files_property, defaults[files_property]),
            table.label, files_property) != policy.retain.millis -%}
        {%- do changes.update({files_property: policy.retain.text}) -%}
    {%- endif -%}
    {%- set log_property = 'delta.logRetentionDuration' -%}
    {%- if _maintenance_interval_millis(properties.get(log_property, defaults[log_property]),
            table.label, log_property) < policy.horizon.millis -%}
        {%- do changes.update({log_property: policy.horizon.text}) -%}
    {%- endif -%}
    {%- if changes -%}
        {%- set assignments = [] -%}
        {%- for name, value in changes | dictsort -%}
            {%- do assignments.append("'" ~ name ~ "' = '" ~ value ~ "'") -%}
        {%- endfor -%}
        {%- do run_query("alter table " ~ relation ~ " set tblproperties ("
            ~ assignments | join(', ') ~ ")") -%}
    {%- endif -%}
    {#- OPTIMIZE: the table's own clustering, else Z-order by its keys, else compaction.
        Delta refuses ZORDER BY on a table with its `clustering` feature, which stays
        when the columns go (`cluster by none`, or an audited table's overwrite whose
        run died before it set them again): such a table is compacted. -#}
    {%- set partitions = _describe_value(detail['partitionColumns'], []) | list -%}
    {%- set clustering = _describe_value(detail['clusteringColumns'], []) | list -%}
    {%- set clusterable = 'clustering' in _describe_value(detail['tableFeatures'], []) | list -%}
    {%- set zorder = [] if clusterable
        else _maintenance_zorder_columns(relation, table['keys'], partitions, properties) -%}
    {%- set statement = "optimize " ~ relation -%}
    {%- if zorder -%}
        {%- if table.append_only_partitions -%}
            {%- set statement = statement
                ~ _maintenance_partition_filter(relation, partitions) -%}
        {%- endif -%}
        {%- set statement = statement ~ " zorder by (`" ~ zorder | join('`, `') ~ "`)" -%}
    {%- endif -%}
    {%- do run_query(statement) -%}
    {%- set files_after = run_query("describe detail " ~ relation)[0]['numFiles'] -%}
    {%- do run_query("vacuum " ~ relation) -%}
    {%- set vacuumed = _describe_value(
        run_query("describe history " ~ relation ~ " limit 1")[0]['operationMetrics'], {}) -%}
    {{ log("maintain_tables: " ~ table.label ~ ": optimize "
        ~ ("clustered by " ~ clustering | join(', ') if clustering
           else "z-ordered by " ~ zorder | join(', ') if zorder
           else "compacted, a clustered table without clustering columns" if clusterable
           else "compacted")
        ~ " (" ~ detail['numFiles'] ~ " files -> " ~ files_after ~ "), vacuum retaining " ~ '%g' | format(policy.retain_hours) ~ " h ("
        ~ vacuumed.get('numDeletedFiles', 0) ~ " files deleted)"
        ~ ("; set " ~ changes.keys() | join(', ') if changes else ""), info=true) }}
{%- endmacro %}
