{{ config(materialized='ephemeral') }}

{#- The change rows of `articles` as silver consumes them: the business columns, the
    operation, and where the change was committed and delivered. Shared by the
    current state (silver.articles) and the history (silver.articles_history). -#}

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
        _ingested_at,
        _bronze_version
    from changes
)

select * from final
