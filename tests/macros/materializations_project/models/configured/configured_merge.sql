{{ config(
    unique_key=['id'],
    sequence_by=['lsn'],
    liquid_clustered_by=['id'],
    tblproperties={'lakehouse.scenario': 'configured'},
    location_root=var('configured_root', none),
) }}

{#- dbt's table configs (tests/macros/test_table_configs.py): clustering by the key,
    a table property, every table of the model under location_root. -#}
select
    id, op, lsn, name, _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_configured') }}
