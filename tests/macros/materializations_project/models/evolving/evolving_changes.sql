{{ config(materialized='view') }}

{#- The input of evolving_merge and evolving_history, its columns changing between runs (tests/macros/test_table_configs.py):
    var evolving_columns adds `name_length`, or drops `name`. -#}
select
    id, op, lsn,
    {%- if var('evolving_columns', 'base') != 'dropped' %}
        name,
    {%- endif %}
    {%- if var('evolving_columns', 'base') in ('added', 'dropped') %}
        length(name) as name_length,
    {%- endif %}
    _ingested_at,
    _metadata.row_commit_version as _bronze_version
from {{ source('scenario', 'cdc_input_evolving') }}
