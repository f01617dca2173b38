{#- The benchmark's change rows, as every benchmark model reads them (ephemeral:
    inlined into each). The input table holds exactly the change columns (id, op, lsn,
    name, email, amount, updated_at, _ingested_at; see bench_cdc_merge.py). -#}
{{ config(materialized='ephemeral') }}

select * from {{ source('bench', 'cdc_input') }}
