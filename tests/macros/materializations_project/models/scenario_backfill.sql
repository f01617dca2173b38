{{ config(unique_key=['id'], sequence_by=['lsn']) }}

select id, op, lsn, name, _ingested_at from {{ source('scenario', 'cdc_input_backfill') }}
where {{ var('backfill_filter', 'true') }}
