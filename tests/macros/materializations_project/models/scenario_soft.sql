{{ config(unique_key=['id'], sequence_by=['lsn', 'line'], delete_mode='soft') }}

select id, op, lsn, line, name, _ingested_at from {{ source('scenario', 'cdc_input_shared') }}
