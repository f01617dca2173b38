{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn', 'line'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', 'line', '_ingested_at'],
    track_columns=['name'],
) }}

{#- Only a change of `name` opens a version; a change of `note` updates it in place. -#}
select id, op, lsn, line, name, note, _ingested_at
from {{ source('scenario', 'cdc_input_history') }}
