{{
    config(
        materialized='cdc_merge',
        unique_key=['user_id'],
        sequence_by=['_source_lsn', '_source_file', '_line_number', '_partition', '_offset'],
        window_prune_column='_ingested_at',
        exclude_columns=['op', '_source_file', '_line_number', '_partition', '_offset'],
    )
}}

{#- Changes to one user are ordered by the source LSN; a tie (the same change delivered
    twice) goes to the later delivery: landing file and line, or Kafka partition and
    offset. -#}

{#- The columns are listed once, in int_blog__user_changes. -#}
select * from {{ ref('int_blog__user_changes') }}  -- noqa: AM04
