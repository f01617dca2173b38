{#-
    Table maintenance (`make maintain`, `python -m python_jobs.maintain`): OPTIMIZE then
    VACUUM on every Delta table of the lakehouse, with a file retention that never
    removes what a backfill within the backfill horizon restores.

    Tables: the ones the ingestion job writes by path (sources whose meta has
    `path_root`: the Bronze topics, the dead letters, the ingestion batch log), by path
    under `lakehouse_root`; then every Delta table of the target's `silver`, `gold` and
    `ops` schemas as generate_schema_name names them (models, snapshots, their side
    tables, the run logs), each once.

    OPTIMIZE: a table with Delta clustering is clustered by its own columns (compacted
    when it has none left: Delta refuses a Z-order there); otherwise it is Z-ordered
    by the keys it declares: a model's or snapshot's `unique_key` (side
    tables `<model>__<suffix>` take their model's, where they hold its columns), a Bronze
    table's `loaded_at_field` (the order windows read it in), restricted to the
    partitions ingestion may have appended to since the last OPTIMIZE; a table that
    declares no key is compacted (bin-packing).

    Retention: Delta 4.4 ignores `VACUUM ... RETAIN n HOURS` for n > 0 (its
    retentionWindowIgnore setting) and uses the table property
    `delta.deletedFileRetentionDuration`: so that property is set to the retention,
    which is never shorter than the horizon, and `delta.logRetentionDuration` is raised
    to the horizon where it is shorter, so that every version a backfill within the
    horizon restores keeps its log and its files (macros/utils/_delta_check_restorable).
-#}
{% macro maintain_tables(horizon_hours=none, retain_hours=none, select=none) -%}
    {{ return(adapter.dispatch('maintain_tables', 'lakehouse')(
        horizon_hours, retain_hours, select)) }}
{%- endmacro %}

{% macro default__maintain_tables(horizon_hours, retain_hours, select) -%}
    {{ _raise_unsupported_adapter('maintain_tables') }}
{%- endmacro %}

{% macro spark__maintain_tables(horizon_hours, retain_hours, select) -%}
    {%- set policy = _maintenance_policy(horizon_hours, retain_hours, select) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {{ log("maintain_tables: backfill horizon " ~ '%g' | format(policy.horizon_hours)
        ~ " h, file retention " ~ '%g' | format(policy.retain_hours) ~ " h", info=true) }}
    {%- set done = [] -%}
    {%- for table in _maintenance_path_tables() -%}
        {%- do _maintain_table(table, policy, done) -%}
    {%- endfor -%}
    {%- set keys = _maintenance_declared_keys() -%}
    {%- set existing = run_query("show schemas").columns[0].values() | map('lower') | list -%}
    {%- for layer in ['silver', 'gold', 'ops'] -%}
        {%- set schema = generate_schema_name(layer) -%}
        {%- if schema | lower in existing -%}
            {%- set views = run_query("show views in " ~ schema).columns[1].values()
                | map('lower') | list -%}
            {%- for row in run_query("show tables in " ~ schema)
                    if not row[2] and row[1] | lower not in views -%}
                {%- set identifier = row[1] | lower -%}
                {%- set parent = identifier.rsplit('__', 1)[0] -%}
                {%- do _maintain_table({
                    'sql': schema ~ '.' ~ identifier, 'label': schema ~ '.' ~ identifier,
                    'keys': keys.get(schema | lower ~ '.' ~ identifier)
                        or keys.get(schema | lower ~ '.' ~ parent) or [],
                    'append_only_partitions': false,
                }, policy, done) -%}
            {%- endfor -%}
        {%- endif -%}
    {%- endfor -%}
    {{ log("maintain_tables: " ~ done | length ~ " tables optimized and vacuumed", info=true) }}
    {%- if not done and select is not none -%}
        {{ exceptions.raise_compiler_error(
            "maintain_tables: no Delta table matches select " ~ select) }}
    {%- endif -%}
{%- endmacro %}
