{{ config(
    materialized='audited_table',
    unique_key='id',
    incremental_inputs={'awap_scores': 'id', 'awap_teams': 'team_id'},
    audits=[{'name': 'score_below_1000', 'condition': 'score < 1000'}],
) }}

select
    s.id,
    s.name,
    s.score,
    s.team_id,
    t.team_name
from {{ ref('awap_scores') }} as s
left join {{ ref('awap_teams') }} as t on s.team_id = t.team_id
