{{ config(materialized='view') }}

{#- Schema drift: the columns of the CDC topics' row images that reached Bronze while
    the topic's staging model did not decode them, when each was first seen, and
    whether it is decoded now (docs/operations.md, "A schema change in the source"). -#}

with

source_columns as (
    select
        topic,
        column_name,
        first_seen_at,
        first_seen_bronze_version,
        first_seen_batch_id,
        first_seen_source_committed_at,
        decoded,
        drift_detected_at,
        drift_resolved_at
    from {{ ref('source_columns') }}
),

final as (
    select
        topic,
        column_name,
        first_seen_at,
        first_seen_bronze_version,
        first_seen_batch_id,
        first_seen_source_committed_at,
        decoded,
        drift_detected_at,
        drift_resolved_at
    from source_columns
    where drift_detected_at is not null
)

select * from final
