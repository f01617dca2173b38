{{ config(
    materialized='audited_table',
    audits=[{'name': 'score_below_1000', 'condition': 'score < 1000'}],
) }}

select id, name, score from {{ source('scenario', 'awap_input') }}
