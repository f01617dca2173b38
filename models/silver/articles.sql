{{
    config(
        materialized='cdc_merge',
        unique_key=['article_id'],
        sequence_by=['_source_lsn', '_source_file', '_line_number', '_partition', '_offset'],
        window_prune_column='_ingested_at',
        exclude_columns=['op', '_source_file', '_line_number', '_partition', '_offset'],
    )
}}

{#- Ordered like silver.users: source LSN, then the delivery position. -#}

{#- The columns are listed once, in int_blog__article_changes. -#}
select * from {{ ref('int_blog__article_changes') }}  -- noqa: AM04
