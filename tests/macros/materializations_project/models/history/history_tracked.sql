{{ config(
    materialized='cdc_history',
    unique_key=['id'],
    sequence_by=['lsn', 'line'],
    valid_from='timestamp_seconds(lsn)',
    exclude_columns=['op', 'lsn', 'line', '_ingested_at', '_bronze_version'],
    track_columns=['name'],
) }}

{#- Only a change of `name` opens a version; a change of `note` updates it in place. -#}
select id, op, lsn, line, name, note, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_history') }}
