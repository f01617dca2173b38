{{ config(
    materialized='audited_table',
    unique_key='id',
    incremental_inputs={'awap_scores': 'id', 'awap_teams': 'team_id'},
    incremental_driver='awap_scores',
    audits=[{'name': 'score_below_1000', 'condition': 'score < 1000'}],
) }}

-- audited_incremental's rows, written as a fact model is (CTEs, a left join to a
-- dimension), with the scores as the driver: one row per score, team_id from it.
with scores as (
    select * from {{ ref('awap_scores') }}
),

teams as (
    select * from {{ ref('awap_teams') }}
)

select scores.*, teams.team_name
from scores
left join teams on scores.team_id = teams.team_id
