{{ config(materialized='table', tblproperties={'delta.enableChangeDataFeed': 'true'}) }}

-- An input of audited_incremental with a change feed; the test changes it in place.
select * from {{ source('scenario', 'awap_teams_raw') }}
