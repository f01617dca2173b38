{#- Private helpers of the audited_table materialization. -#}

{#- The enforced contract's constraints: not-null columns and named check expressions
    (column-level and model-level); none without an enforced contract. -#}
{% macro _awap_constraints(model) -%}
    {%- set found = {'not_null': [], 'checks': []} -%}
    {%- if not config.get('contract').enforced -%}
        {{ return(found) }}
    {%- endif -%}
    {%- for name, column in model.columns.items() -%}
        {%- for constraint in column.constraints -%}
            {%- if constraint.type == 'not_null' -%}
                {%- do found.not_null.append(column.name) -%}
            {%- elif constraint.type == 'check' -%}
                {%- do found.checks.append({
                    'name': constraint.name or (column.name ~ '_check_' ~ loop.index),
                    'expression': constraint.expression}) -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endfor -%}
    {%- for constraint in model.constraints -%}
        {%- if constraint.type == 'not_null' -%}
            {%- do found.not_null.extend(constraint.columns) -%}
        {%- elif constraint.type == 'check' -%}
            {%- do found.checks.append({
                'name': constraint.name or (this.identifier ~ '_check_' ~ loop.index),
                'expression': constraint.expression}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(found) }}
{%- endmacro %}

{#- Column definitions with NOT NULL where the contract says so. -#}
{% macro _awap_definition(columns, constraints) -%}
    {%- set required = constraints.not_null | map('lower') | list -%}
    {%- set definitions = [] -%}
    {%- for column in columns -%}
        {%- do definitions.append('`' ~ column.name ~ '` ' ~ column.type
            ~ (' not null' if column.name | lower in required else '')) -%}
    {%- endfor -%}
    {{ return(definitions | join(', ')) }}
{%- endmacro %}

{#- Creates (or, `replace`, replaces) a Delta table with the contract's definition, its
    check constraints and `properties` in one commit: Delta keeps a CHECK constraint as
    the table property `delta.constraints.<name>`, and enforces one set at creation as it
    does one added by ALTER (which would cost each check a scan and a commit). Unlike
    ALTER, creation does not analyse the expressions: `_awap_validate_checks` does, first.
    A replaced table keeps none of the old table's constraints. `clauses`: the table
    configs' (`_table_config_clauses`), after `using delta`. -#}
{% macro _awap_create_table(relation, definition, constraints, properties={}, replace=false, clauses=[]) -%}
    {%- set all = {} -%}
    {%- for check in constraints.checks -%}
        {%- do all.update({'delta.constraints.' ~ check.name | lower: check.expression}) -%}
    {%- endfor -%}
    {%- do all.update(properties) -%}
    {%- do run_query(("create or replace table " if replace else "create table ") ~ relation
        ~ " (" ~ definition ~ ") using delta"
        ~ (" " ~ clauses | join(' ') if clauses else "")
        ~ (" " ~ _delta_tblproperties_clause(all) if all else "")) -%}
{%- endmacro %}

{#- Each check expression must resolve against the model's columns and be boolean, as
    Delta's ALTER TABLE ADD CONSTRAINT requires: one analysis of `input` (no Spark job);
    Spark's own message for an expression that does not resolve. -#}
{% macro _awap_validate_checks(input, constraints, label) -%}
    {%- if constraints.checks -%}
        {%- set selected = [] -%}
        {%- for check in constraints.checks -%}
            {%- do selected.append("(" ~ check.expression ~ ") as `_check_" ~ loop.index ~ "`") -%}
        {%- endfor -%}
        {%- set described = run_query("describe query select " ~ selected | join(', ')
            ~ " from " ~ input) -%}
        {%- for check in constraints.checks -%}
            {%- set data_type = described[loop.index0][1] -%}
            {%- if data_type != 'boolean' -%}
                {{ exceptions.raise_compiler_error(label ~ ": check constraint '" ~ check.name
                    ~ "' (" ~ check.expression ~ ") is " ~ data_type
                    ~ ", not a boolean expression") }}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro %}

{#- A check expression as Delta stores it, whitespace aside: Delta writes a space
    inside each parenthesis (`is_current = ( valid_to is null )`). -#}
{% macro _awap_check_text(expression) -%}
    {{ return(expression.split() | join(' ') | replace('( ', '(') | replace(' )', ')') | lower) }}
{%- endmacro %}

{#- The table's check constraints: {name: expression}. -#}
{% macro _awap_current_checks(relation) -%}
    {%- set checks = {} -%}
    {%- for row in run_query("show tblproperties " ~ relation) -%}
        {%- if row[0].startswith('delta.constraints.') -%}
            {%- do checks.update({row[0][18:]: _awap_check_text(row[1])}) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(checks) }}
{%- endmacro %}

{#- Whether publishing must replace the table: it is missing or not Delta, a full
    refresh, or its columns or check constraints differ from the model's. -#}
{% macro _awap_needs_replace(target, columns, constraints) -%}
    {%- set existing = load_relation(target) -%}
    {%- if existing is none or not existing.is_delta or should_full_refresh() -%}
        {{ return(true) }}
    {%- endif -%}
    {%- if _cdc_describe(target) != columns -%}
        {{ return(true) }}
    {%- endif -%}
    {%- set desired = {} -%}
    {%- for check in constraints.checks -%}
        {%- do desired.update({check.name | lower: _awap_check_text(check.expression)}) -%}
    {%- endfor -%}
    {{ return(_awap_current_checks(target) != desired) }}
{%- endmacro %}

{#- Whether an overwrite of `target` is to be followed by `liquid_clustered_by`'s
    `cluster by`: Delta 4.4's overwrite drops a table's clustering columns and keeps its
    `clustering` table feature, so a table created clustered (by this run, or by an
    earlier one, even one that died between its overwrite and the `cluster by`) gets
    them back. A table created without clustering keeps its layout, as every table
    config applies at creation. (A merge keeps them; a run that died before its
    `cluster by` recorded no marks, so the next run overwrites too.) -#}
{% macro _awap_reclusters(target, configs, replace) -%}
    {%- if not configs.liquid_clustered_by -%}
        {{ return(false) }}
    {%- elif replace -%}
        {{ return(true) }}
    {%- endif -%}
    {%- set features = run_query("describe detail " ~ target)[0]['tableFeatures'] -%}
    {{ return('clustering' in _describe_value(features, []) | list) }}
{%- endmacro %}

{#- The declared audits: a list of {name, condition}; every row must satisfy each. -#}
{% macro _awap_declared_audits(audits, label) -%}
    {%- if audits is string or audits is mapping or audits is not sequence -%}
        {{ exceptions.raise_compiler_error(label ~ ": audits must be a list of "
            ~ "{name, condition}, got " ~ audits) }}
    {%- endif -%}
    {%- for audit in audits -%}
        {%- if audit is not mapping or not audit.get('name')
            or not (audit.get('condition') is string and audit.condition | trim) -%}
            {{ exceptions.raise_compiler_error(label ~ ": audit " ~ loop.index
                ~ " needs a name and a non-empty condition, got " ~ audit) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(audits) }}
{%- endmacro %}

{#-
    Runs the audits on `relation` and returns the blocking failures as text. The
    model's generic data tests are called with `relation` as their model; an argument that is
    `ref('<model>')` or `source(...)` (a relationships test's `to`) is that table, and a
    test whose arguments hold other Jinja runs after publication as usual, not here. Warn-severity failures are logged.
-#}
{% macro _awap_run_audits(relation, audits, label) -%}
    {%- set failed = [] -%}
    {%- for audit in audits -%}
        {%- set failures = run_query("select count_if((" ~ audit.condition ~ ") is not true) from "
            ~ relation)[0][0] | int -%}
        {%- if failures > 0 -%}
            {%- do failed.append("audit " ~ audit.name ~ " (" ~ failures
                ~ " rows fail: " ~ audit.condition ~ ")") -%}
        {%- endif -%}
    {%- endfor -%}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'test' and node.get('attached_node') == model.unique_id
        and node.get('test_metadata') -%}
        {%- set meta = node.test_metadata -%}
        {%- set kwargs = {} -%}
        {%- set runnable = {'ok': true} -%}
        {%- for key, value in meta.kwargs.items() if key != 'model' -%}
            {%- set referenced = _awap_ref_argument(value) -%}
            {%- if referenced is not none -%}
                {%- set value = referenced -%}
            {%- elif value is string and ('{{' in value or 'ref(' in value
                    or 'source(' in value) -%}
                {%- do runnable.update({'ok': false}) -%}
            {%- endif -%}
            {%- do kwargs.update({key: value}) -%}
        {%- endfor -%}
        {%- set test_macro = context.get('test_' ~ meta.name) -%}
        {%- if runnable.ok and test_macro is not none -%}
            {%- set where = node.config.get('where') -%}
            {%- do kwargs.update({'model': relation if not where
                else "(select * from " ~ relation ~ " where " ~ where ~ ") as audit_subquery"}) -%}
            {%- set test_sql = test_macro(**kwargs) -%}
            {%- set fail_calc = node.config.get('fail_calc', 'count(*)') -%}
            {%- set row = run_query(
                "select " ~ fail_calc ~ ", coalesce((" ~ fail_calc ~ ") "
                ~ node.config.get('error_if', '!= 0') ~ ", false), coalesce((" ~ fail_calc ~ ") "
                ~ node.config.get('warn_if', '!= 0') ~ ", false) from (" ~ test_sql
                ~ ") as audit_test")[0] -%}
            {%- set blocking = row[1] and node.config.get('severity', 'error') | lower == 'error' -%}
            {%- if blocking -%}
                {%- do failed.append("test " ~ node.name ~ " (" ~ row[0] ~ " failures)") -%}
            {%- elif row[2] -%}
                {{ log(label ~ ": audit warning: test " ~ node.name ~ " (" ~ row[0]
                    ~ " failures)", info=true) }}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(failed) }}
{%- endmacro %}

{#- The relation of a test argument that is exactly `ref('<model>')` or
    `source('<source>', '<table>')`, looked up in the graph (it need not be a declared
    dependency); none for any other value. -#}
{% macro _awap_ref_argument(value) -%}
    {%- set name = "\\s*['\"]([A-Za-z0-9_]+)['\"]\\s*" -%}
    {%- set pattern = "\\s*(?:\\{\\{\\s*)?(ref|source)\\(" ~ name ~ "(?:," ~ name
        ~ ")?\\)(?:\\s*\\}\\})?\\s*" -%}
    {%- set match = modules.re.fullmatch(pattern, value) if value is string else none -%}
    {%- if match and match.group(1) == 'ref' and match.group(3) is none -%}
        {%- for node in graph.nodes.values()
            if node.resource_type in ('model', 'snapshot', 'seed') and node.name == match.group(2) -%}
            {{ return(api.Relation.create(database=node.database, schema=node.schema,
                identifier=node.alias, type='table')) }}
        {%- endfor -%}
    {%- elif match and match.group(1) == 'source' and match.group(3) is not none -%}
        {%- for node in graph.sources.values()
            if node.source_name == match.group(2) and node.name == match.group(3) -%}
            {{ return(api.Relation.create(database=node.database, schema=node.schema,
                identifier=node.identifier, type='table')) }}
        {%- endfor -%}
    {%- endif -%}
    {{ return(none) }}
{%- endmacro %}
