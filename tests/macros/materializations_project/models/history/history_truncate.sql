{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', '_ingested_at', '_bronze_version'],
) }}

{#- A truncate closes every version open before it (its own input: it empties all). -#}
select id, op, lsn, name, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_history_truncate') }}
