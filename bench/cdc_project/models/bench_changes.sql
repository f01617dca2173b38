{#- The benchmark's change rows, as every benchmark model reads them (ephemeral:
    inlined into each). The input table holds exactly the change columns (id, op, lsn,
    name, email, amount, updated_at, _ingested_at; see bench_cdc_merge.py), plus each
    row's commit version (row tracking is on, as on Bronze), the window column. -#}
{{ config(materialized='ephemeral') }}

select
    *,
    _metadata.row_commit_version as _bronze_version
from {{ source('bench', 'cdc_input') }}
