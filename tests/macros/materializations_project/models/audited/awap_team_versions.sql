{{ config(materialized='table', tblproperties={'delta.enableChangeDataFeed': 'true'}) }}

-- Teams' versions (team_id, team_name, valid_from, valid_to, is_current), an SCD2
-- history with a change feed; the test changes it in place.
select * from {{ source('scenario', 'awap_team_versions_raw') }}
