{{
    config(
        materialized='cdc_merge',
        unique_key=['article_id'],
        sequence_by=['_source_lsn', '_source_file', '_line_number', '_partition', '_offset'],
        exclude_columns=['op', '_source_file', '_line_number', '_partition', '_offset'],
    )
}}

{#- Ordered like silver.users: source LSN, then the delivery position. -#}

with changes as (
    select * from {{ ref('stg_blog__articles') }}
),

final as (
    select
        article_id,
        author_id,
        title,
        category,
        status,
        published_at,
        updated_at,
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
