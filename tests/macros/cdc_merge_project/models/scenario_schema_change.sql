{{ config(unique_key=['id'], sequence_by=['lsn']) }}

{#- From round 2 on, the source has a new column, and the model selects it. -#}
select
    id, op, lsn, name,
    {%- if var('scenario_round') | int >= 2 %} email,{% endif %}
    _ingested_at
from {{ source('scenario', 'cdc_input_schema_change') }}
