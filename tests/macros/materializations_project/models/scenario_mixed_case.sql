{{ config(unique_key=['id'], sequence_by=['lsn']) }}

{#- A column named in mixed case: the table keeps the case, the model's runs must still
    find it theirs (tests/macros/test_cdc_merge.py, mixed_case). -#}
select id, op, lsn, name as customerName, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_truncate') }}
