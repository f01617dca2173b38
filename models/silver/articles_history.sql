{{
    config(
        materialized='cdc_history',
        unique_key=['article_id'],
        sequence_by=['_source_lsn', '_source_file', '_line_number', '_partition', '_offset'],
        window_prune_column='_ingested_at',
        valid_from='_source_committed_at',
        tblproperties={'delta.enableChangeDataFeed': 'true'},
        exclude_columns=[
            'op', '_source_committed_at', '_source_lsn', '_source_file', '_line_number',
            '_partition', '_offset', '_ingested_at', '_bronze_version',
        ],
    )
}}

{#- The change data feed: gold.dim_articles reads what changed since its last build. -#}

{#- Every business column is tracked, as in silver.users_history. -#}

{#- The columns are listed once, in int_blog__article_changes. -#}
select * from {{ ref('int_blog__article_changes') }}  -- noqa: AM04
