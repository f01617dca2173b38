{{ config(unique_key=['id'], sequence_by=['lsn', 'line']) }}

{#- From round 2 on, the input has a new column, and the model selects it. -#}
select
    id, op, lsn, line, name,
    {%- if var('scenario_round') | int >= 2 %} email,{% endif %}
    _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_shared') }}
