{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', '_ingested_at'],
) }}

{#- A truncate closes every version open before it (its own input: it empties all). -#}
select id, op, lsn, name, _ingested_at
from {{ source('scenario', 'cdc_input_history_truncate') }}
