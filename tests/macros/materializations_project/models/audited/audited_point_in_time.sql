{{ config(
    materialized='audited_table',
    unique_key='id',
    incremental_inputs={
        'awap_visits': 'id',
        'awap_team_versions': {'column': 'team_id', 'at': 'at', 'current_flag': 'is_current'},
    },
    incremental_driver='awap_visits',
) }}

-- Each visit with the team version valid at its time: a change of a version reaches
-- only the visits where that version's validity changed.
select v.id, v.at, v.team_id, t.team_name
from {{ ref('awap_visits') }} as v
{{ point_in_time_join(ref('awap_team_versions'), 't', 'v.at', {'v.team_id': 'team_id'}) }}
