{{
    config(
        materialized='incremental',
        incremental_strategy='merge',
        unique_key=['topic', 'column_name'],
        on_schema_change='fail',
    )
}}

{#- Every top-level column of the row images that each CDC topic delivered to Bronze:
    when it was first seen, and whether the topic's staging model decodes it (outputs a
    column of that name). Bronze keeps a record's row images whole, so a column added
    in the source reaches Bronze untouched; one that no staging model decodes is schema
    drift, listed by ops.schema_drift, shown by the report, warned about by its test.
    Each run reads only the Bronze rows committed after the newest commit it read for
    the topic (`_metadata.row_commit_version`, as the windowed models do), and only the
    files of those commits (`bronze_committed_after`): its cost follows the new rows, and
    ingestion pays nothing. A topic whose staging model does
    not exist yet is left for a later run. -#}

{%- set cdc_topics = [
    ('blog.public.users', source('blog', 'blog_public_users'), ref('stg_blog__users')),
    ('blog.public.articles', source('blog', 'blog_public_articles'), ref('stg_blog__articles')),
] -%}

{#- The columns each staging model decodes: its output, without `op` and the `_`
    metadata columns. Known only once the model exists (at execution). -#}
{%- set decoded = {} -%}
{%- if execute -%}
    {%- for topic, bronze, staging in cdc_topics -%}
        {%- set built = adapter.get_relation(
            database=staging.database, schema=staging.schema, identifier=staging.identifier) -%}
        {%- set names = [] -%}
        {%- for column in (adapter.get_columns_in_relation(built) if built else []) -%}
            {%- if column.name != 'op' and not column.name.startswith('_') -%}
                {%- do names.append(column.name | lower) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- if names -%}
            {%- do decoded.update({topic: names}) -%}
        {%- endif -%}
    {%- endfor -%}
{%- endif -%}
{%- set decoded_cases = [] -%}
{%- for topic, names in decoded.items() -%}
    {%- do decoded_cases.append("when '" ~ topic ~ "' then lower(column_name) in ('"
        ~ names | join("', '") ~ "')") -%}
{%- endfor -%}
{#- Whether the topic's staging model decodes the column (null: it does not exist). -#}
{%- set decoded_sql = ('case topic ' ~ decoded_cases | join(' ') ~ ' end')
    if decoded_cases else 'cast(null as boolean)' -%}
{%- set detected_at = "cast('" ~ run_started_at.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "' as timestamp)" -%}

{#- Per topic: the rows committed after the newest commit read (all on the first run),
    reading only the files of those commits where the bound is exact
    (`bronze_committed_after`); none while its staging model does not exist. -#}
{%- set last_read = {} -%}
{%- if execute and is_incremental() -%}
    {%- for row in run_query("select topic, max(last_seen_bronze_version) from " ~ this
            ~ " group by topic") -%}
        {%- do last_read.update({row[0]: row[1]}) -%}
    {%- endfor -%}
{%- endif -%}
{%- set conditions = {} -%}
{%- for topic, bronze, staging in cdc_topics -%}
    {%- set start = last_read.get(topic) -%}
    {%- if topic not in decoded -%}
        {%- do conditions.update({topic: 'false'}) -%}
    {%- elif start is none -%}
        {%- do conditions.update({topic: 'true'}) -%}
    {%- else -%}
        {%- do conditions.update({topic: bronze_committed_after(bronze, start)}) -%}
    {%- endif -%}
{%- endfor %}

with

bronze_rows as (
    {%- for topic, bronze, staging in cdc_topics %}
        select
            '{{ topic }}' as topic,
            _ingested_at,
            _batch_id,
            source_committed_at,
            {{ bronze_commit_version() }} as bronze_version,
            json_object_keys(coalesce(after, before)) as column_names
        from {{ bronze }}
        where {{ conditions[topic] }}
        {{ 'union all' if not loop.last }}
    {%- endfor %}
),

key_sets as (
    {#- One row per distinct set of columns: a topic's key sets are few, its rows many. -#}
    select
        topic,
        column_names,
        min(struct(bronze_version, _ingested_at, _batch_id, source_committed_at)) as first_row,
        max(bronze_version) as last_version
    from bronze_rows
    where column_names is not null
    group by topic, column_names
),

exploded as (
    select
        topic,
        first_row,
        last_version,
        explode(column_names) as column_name  -- noqa: RF04
    from key_sets
),

seen as (
    select
        topic,
        column_name,
        min(first_row) as first_row,
        max(last_version) as last_seen_bronze_version
    from exploded
    group by topic, column_name
),

observed as (
    select
        topic,
        column_name,
        first_row,
        last_seen_bronze_version,
        cast(null as timestamp) as drift_detected_at,
        cast(null as timestamp) as drift_resolved_at,
        cast(null as boolean) as was_decoded,
        false as recorded
    from seen
    {%- if is_incremental() %}
    union all
    select
        topic,
        column_name,
        struct(
            first_seen_bronze_version as bronze_version,
            first_seen_at as _ingested_at,
            first_seen_batch_id as _batch_id,
            first_seen_source_committed_at as source_committed_at
        ) as first_row,
        last_seen_bronze_version,
        drift_detected_at,
        drift_resolved_at,
        decoded as was_decoded,
        true as recorded
    from {{ this }}
    {%- endif %}
),

merged as (
    select
        topic,
        column_name,
        min(first_row) as first_row,
        max(last_seen_bronze_version) as last_seen_bronze_version,
        max(not recorded) as seen_now,
        max(drift_detected_at) as drift_detected_at,
        max(drift_resolved_at) as drift_resolved_at,
        max(was_decoded) as was_decoded,
        {{ decoded_sql }} as decoded
    from observed
    group by topic, column_name
),

final as (
    select
        topic,
        column_name,
        first_row._ingested_at as first_seen_at,
        first_row.bronze_version as first_seen_bronze_version,
        first_row._batch_id as first_seen_batch_id,
        first_row.source_committed_at as first_seen_source_committed_at,
        last_seen_bronze_version,
        decoded,
        coalesce(
            drift_detected_at, case when not decoded then {{ detected_at }} end
        ) as drift_detected_at,
        case
            when decoded and drift_detected_at is not null
                then coalesce(drift_resolved_at, {{ detected_at }})
        end as drift_resolved_at
    from merged
    -- Rows of the topics whose staging model exists; of those, only what changed.
    where
        decoded is not null
        and (seen_now or not (decoded <=> was_decoded))
)

select * from final
