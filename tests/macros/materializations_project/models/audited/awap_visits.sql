{{ config(materialized='table', tblproperties={'delta.enableChangeDataFeed': 'true'}) }}

-- Visits (id, at, team_id), the driver of audited_point_in_time; changed in place.
select * from {{ source('scenario', 'awap_visits_raw') }}
