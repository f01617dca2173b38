{{
    config(
        materialized='cdc_history',
        unique_key=['user_id'],
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

{#- The change data feed: gold.dim_users reads what changed since its last build. -#}

{#- Every business column is tracked: any change opens a version, valid from the
    change's commit time in the source. Ordered like silver.users. -#}

{#- The columns are listed once, in int_blog__user_changes. -#}
select * from {{ ref('int_blog__user_changes') }}  -- noqa: AM04
