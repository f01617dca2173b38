{#-
    The Filter Interceptor: labels each row of `relation` with the filters it fails,
    in one pass, instead of dropping rows in a `where` whose plan node merges every
    condition into one.

        {{ filter_interceptor('stg_visits', [
            {'name': 'missing_page', 'condition': "coalesce(trim(page), '') != ''"},
            {'name': 'unsupported_device', 'condition': "device_type in ('desktop', 'mobile')"},
        ], mode='all') }}

    Each filter is a condition a row must satisfy; a condition that is false or NULL
    fails (`(condition) is not true`, as a `where` would drop the row). Returns a select
    of every column of `relation` plus:
    - `_filter_flags` array<boolean>: per filter, in order, whether the row fails it;
    - `_filter_failed` string: the first failing filter's name (null: the row passes);
    - `_filter_failures` array<string>: every failing filter's name in `all` mode
      (null in `first` mode).
    The `filtered_append` materialization computes this once per batch and derives the
    kept rows, the quarantine and `ops.filter_stats` from it.
-#}
{% macro filter_interceptor(relation, filters, mode='first', label='filter_interceptor') -%}
    {{ return(adapter.dispatch('filter_interceptor', 'lakehouse')(relation, filters, mode, label)) }}
{%- endmacro %}

{% macro default__filter_interceptor(relation, filters, mode, label) -%}
    {{ _raise_unsupported_adapter('filter_interceptor') }}
{%- endmacro %}

{% macro spark__filter_interceptor(relation, filters, mode, label) -%}
    {%- do _filter_validate(filters, mode, label) -%}
    select
        *,
        case
            {%- for filter in filters %}
            when _filter_flags[{{ loop.index0 }}] then '{{ filter.name }}'
            {%- endfor %}
        end as _filter_failed,
        {%- if mode == 'all' %}
        filter(
            array(
                {%- for filter in filters %}
                if(_filter_flags[{{ loop.index0 }}], '{{ filter.name }}', null){{ ',' if not loop.last }}
                {%- endfor %}
            ),
            name -> name is not null
        ) as _filter_failures
        {%- else %}
        cast(null as array<string>) as _filter_failures
        {%- endif %}
    from (
        select
            *,
            array(
                {%- for filter in filters %}
                ({{ filter.condition }}) is not true{{ ',' if not loop.last }}
                {%- endfor %}
            ) as _filter_flags
        from {{ relation }} as _filter_input
    ) as _filter_flagged
{%- endmacro %}

{#- Fails at compile time, naming the model, unless `filters` is a non-empty list of
    {name, condition} with unique lower-case names, and `mode` is first or all. -#}
{% macro _filter_validate(filters, mode, label) -%}
    {%- if mode not in ('first', 'all') -%}
        {{ exceptions.raise_compiler_error(label ~ ": filter_mode must be 'first' or 'all', got '"
            ~ mode ~ "'") }}
    {%- endif -%}
    {%- if filters is string or filters is mapping or filters is not sequence
        or filters | length == 0 -%}
        {{ exceptions.raise_compiler_error(label ~ ": filters must be a non-empty list of "
            ~ "{name, condition}, got " ~ filters) }}
    {%- endif -%}
    {%- set seen = [] -%}
    {%- for filter in filters -%}
        {%- if filter is not mapping or not (filter.get('condition') is string
            and filter.get('condition') | trim) -%}
            {{ exceptions.raise_compiler_error(label ~ ": filter " ~ loop.index
                ~ " needs a name and a non-empty condition, got " ~ filter) }}
        {%- endif -%}
        {%- if not (filter.get('name') is string
            and modules.re.match('^[a-z][a-z0-9_]*$', filter.name)) -%}
            {{ exceptions.raise_compiler_error(label ~ ": filter name '" ~ filter.get('name')
                ~ "' must be lower-case letters, digits and underscores") }}
        {%- endif -%}
        {%- if filter.name in seen -%}
            {{ exceptions.raise_compiler_error(label ~ ": filter name '" ~ filter.name
                ~ "' is used twice") }}
        {%- endif -%}
        {%- do seen.append(filter.name) -%}
    {%- endfor -%}
{%- endmacro %}
