{{ config(
    materialized='audited_table',
    liquid_clustered_by='id',
    grants=var('audited_grants', {}),
) }}

-- The scores in a table clustered by id (liquid_clustered_by), rebuilt in full each time.
select id, name, score from {{ ref('awap_scores') }}
