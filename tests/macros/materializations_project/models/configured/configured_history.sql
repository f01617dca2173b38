{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
    partition_by=['name'],
) }}

{#- A history partitioned by a column (tests/macros/test_table_configs.py). -#}
select
    id, op, lsn, name, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_configured') }}
