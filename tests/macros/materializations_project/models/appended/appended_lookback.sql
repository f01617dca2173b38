{{ config(
    materialized='filtered_append',
    unique_key=['id'],
    dedup_order_by=['_bronze_version'],
    dedup_lookback={'column': 'seen_at', 'interval': '1 day'},
    filters=[{'name': 'missing_id', 'condition': 'id is not null'}],
) }}

{#- filtered_append with a lookback column that may be null
    (tests/macros/test_filtered_append.py). -#}
select
    id,
    seen_at,
    name,
    _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'append_input_lookback') }}
