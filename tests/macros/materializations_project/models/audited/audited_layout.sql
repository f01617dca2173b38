{{ config(
    materialized='audited_table',
    unique_key='id',
    incremental_inputs={'awap_scores': 'id', 'awap_teams': 'team_id'},
    incremental_driver='awap_scores',
    partition_by='team_id',
    location_root=var('configured_root', none),
) }}

-- audited_driven's rows in a table partitioned by team, at the location the test names:
-- an incremental build's merge reads only the partitions of the keys it recomputes.
select scores.*, teams.team_name
from {{ ref('awap_scores') }} as scores
left join {{ ref('awap_teams') }} as teams on scores.team_id = teams.team_id
