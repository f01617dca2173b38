{{
    config(
        materialized='cdc_merge',
        unique_key=['user_id'],
        sequence_by=['_source_lsn', '_source_file', '_line_number', '_partition', '_offset'],
        exclude_columns=['op', '_source_file', '_line_number', '_partition', '_offset'],
    )
}}

{#- Changes to one user are ordered by the source LSN; a tie (the same change delivered
    twice) goes to the later delivery: landing file and line, or Kafka partition and
    offset. -#}

with changes as (
    select * from {{ ref('stg_blog__users') }}
),

final as (
    select
        user_id,
        email,
        full_name,
        country,
        plan,
        lifetime_value,
        created_at,
        updated_at,
        preferred_language,
        op,
        _source_committed_at,
        _source_lsn,
        _source_file,
        _line_number,
        _partition,
        _offset,
        _ingested_at
    from changes
)

select * from final
