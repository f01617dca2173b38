{{ config(unique_key=['id'], sequence_by=['lsn'], delete_mode='soft') }}

select id, op, lsn, name, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_truncate') }}
