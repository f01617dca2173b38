{#-
    The `audited_table` materialization: Audit-Write-Audit-Publish for a table model.

        {{ config(materialized='audited_table',
                  audits=[{'name': 'positive_visits', 'condition': 'visits > 0'}]) }}

    1. Write: the model's rows go to `<model>__staging`, a Delta table created with the
       model's enforced contract (column types, `not_null` and `check` constraints as
       Delta constraints), so a row that violates them is rejected by the storage.
    2. Audit: the model's own data tests (generic tests whose arguments are plain
       values: unique, not_null, accepted_values, the scd2_* tests, ...) and the
       declared `audits` (conditions every row must satisfy) run on the staging table.
       Error-severity failures (dbt's `error_if`, `where` and `fail_calc` apply) stop the
       run with the reasons, and the published table stays exactly as it was (same
       Delta version); the staging table is left for inspection.
    3. Publish: the staging rows replace the published table's in one commit
       (`insert overwrite`, which the table's own constraints check again). A new table,
       or one whose columns or check constraints changed, is first replaced by the
       contract's definition, checks and tblproperties in one commit (open-source Delta
       sets NOT NULL only at creation), so that publication takes two commits, readers
       seeing an empty table in between. A new `not_null` on an existing table needs --full-refresh.

    Incremental (`unique_key` and `incremental_inputs`, optionally `incremental_driver`;
    _audited_table_incremental.sql): only the rows whose inputs changed since the last
    publish are written to staging and audited, and step 3 merges them by key in one
    commit.
    `tblproperties` (e.g. the change data feed a downstream incremental model reads)
    are set when the table is created and kept set after each publish. dbt's table
    configs `partition_by`, `liquid_clustered_by` and `location_root` apply when the
    table is created (the first build, a full refresh, a changed contract), `grants`
    after every build, as on the windowed materializations (`_table_configs`); the
    staging table is the warehouse's own, unpartitioned.
-#}
{% materialization audited_table, adapter='spark' -%}
    {%- set label = "audited_table (model " ~ this.schema ~ '.' ~ this.identifier ~ ")" -%}
    {%- set target = this.incorporate(type='table') -%}
    {%- set staging = this.incorporate(path={'identifier': this.identifier ~ '__staging'},
        type='table') -%}
    {%- set input = this.identifier ~ '__audit_input' -%}
    {%- set keys = this.identifier ~ '__audit_keys' -%}
    {%- set audits = _awap_declared_audits(config.get('audits', []), label) -%}
    {%- set incremental = _awap_incremental_options(label, config.get('unique_key'),
        config.get('incremental_inputs'), model.depends_on.nodes,
        config.get('incremental_driver')) -%}
    {%- set configs = _table_configs(config, label) -%}
    {%- set properties = configs.tblproperties -%}
    {%- set existing = load_relation(target) -%}

    {{ run_hooks(pre_hooks) }}

    {%- if config.get('contract').enforced -%}
        {{ get_assert_columns_equivalent(sql) }}
    {%- endif -%}
    {%- do run_query('create or replace temporary view ' ~ input ~ ' as ' ~ sql) -%}
    {%- set columns = _cdc_describe(input) -%}
    {%- set constraints = _awap_constraints(model) -%}
    {%- do _awap_validate_checks(input, constraints, label) -%}
    {%- set replace = _awap_needs_replace(target, columns, constraints) -%}
    {%- set plan = none if incremental is none
        else _awap_incremental_plan(target, incremental, columns, replace, label) -%}
    {%- if plan is not none and plan.reason is not none -%}
        {{ log(label ~ ": a full rebuild: " ~ plan.reason, info=true) }}
    {%- endif -%}
    {%- set merging = plan is not none and plan.reason is none -%}

    {#- 1. Write into staging, under the contract's constraints: every row, or (merging)
        the rows of the keys whose inputs changed. -#}
    {%- set definition = _awap_definition(columns, constraints) -%}
    {%- do run_query("drop table if exists " ~ staging) -%}
    {%- do _awap_create_table(staging, definition, constraints) -%}
    {%- if merging -%}
        {%- do _cdc_cache(keys, _awap_keys_sql(target, input, incremental, plan)) -%}
        {%- set recomputed = run_query("select count(*) from " ~ keys)[0][0] | int -%}
        {{ log(label ~ ": incremental: " ~ recomputed ~ " keys to recompute", info=true) }}
        {%- if recomputed > 0 -%}
            {%- do run_query("insert into " ~ staging ~ " select " ~ _cdc_column_list(columns)
                ~ " from " ~ input ~ " left semi join " ~ keys ~ " as k on "
                ~ _awap_key_match(incremental.unique_key, input, 'k')) -%}
            {%- set pruning = _awap_partition_predicates(target, staging, keys, columns,
                incremental.unique_key, configs.partition_by) -%}
        {%- endif -%}
    {%- else -%}
        {%- do run_query("insert into " ~ staging ~ " select " ~ _cdc_column_list(columns)
            ~ " from " ~ input) -%}
    {%- endif -%}

    {#- 2. Audit the staging table (nothing to audit when no key changed). -#}
    {%- set failed = [] if merging and recomputed == 0
        else _awap_run_audits(staging, audits, label) -%}
    {%- if failed -%}
        {#- The keys view reads the input view: dropped first. -#}
        {%- if merging -%}
            {%- do _cdc_uncache(keys) -%}
        {%- endif -%}
        {%- do run_query('drop view if exists ' ~ input) -%}
        {{ exceptions.raise_compiler_error(label ~ ": not published, audits failed: "
            ~ failed | join('; ') ~ ". "
            ~ (target ~ " is unchanged at version " ~ _delta_version(target)
               if existing is not none else target ~ " was not created")
            ~ "; the rejected candidate is in " ~ staging ~ ".") }}
    {%- endif -%}

    {#- 3. Publish: one commit (a merge of the recomputed keys, or an overwrite), or (new
        table, changed columns or checks) the table is replaced with the contract's
        definition first. Then the clustering columns, which an overwrite drops. -#}
    {%- set reclustered = not merging and _awap_reclusters(target, configs, replace) -%}
    {%- if merging -%}
        {%- call statement('main') -%}
            {%- if recomputed > 0 %}
            {{ _awap_merge_sql(target, staging, keys, columns, incremental.unique_key, pruning) }}
            {%- else %}
            select 'no input changed since the last publish' as status
            {%- endif %}
        {%- endcall -%}
        {%- do _cdc_uncache(keys) -%}
    {%- else -%}
        {%- if replace -%}
            {%- if existing is not none and not existing.is_delta -%}
                {%- do adapter.drop_relation(existing) -%}
            {%- endif -%}
            {%- do _awap_create_table(target, definition, constraints, properties,
                replace=true, clauses=_table_config_clauses(target, configs, true)) -%}
        {%- endif -%}
        {%- call statement('main') -%}
            insert overwrite table {{ target }}
            select {{ _cdc_column_list(columns) }} from {{ staging }}
            {%- if configs.partition_by %}
            {#- Each partition's rows in one task: a file per partition, not per task. #}
            distribute by {{ configs.partition_by | join(', ') }}
            {%- endif %}
        {%- endcall -%}
    {%- endif -%}
    {%- if reclustered -%}
        {%- do run_query("alter table " ~ target ~ " cluster by ("
            ~ configs.liquid_clustered_by | join(', ') ~ ")") -%}
    {%- endif -%}
    {%- do run_query('drop view if exists ' ~ input) -%}
    {%- do _awap_set_properties(target, properties, plan) -%}
    {%- do run_query('drop table if exists ' ~ staging) -%}
    {%- do persist_docs(target, model) -%}
    {%- do apply_grants(target, configs.grants,
        should_revoke=should_revoke(existing, full_refresh_mode=should_full_refresh())) -%}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target]}) }}
{%- endmaterialization %}

{% materialization audited_table, default -%}
    {{ _raise_unsupported_adapter('audited_table') }}
{%- endmaterialization %}
