{{ config(materialized='view') }}

with

filter_stats as (
    select
        invocation_id,
        run_started_at,
        model,
        filter_name,
        rejected_rows,
        total_rows,
        filter_position,
        kind,
        failed_rows,
        relation,
        execution_time,
        window_start,
        window_end,
        recorded_at,
        {{ row_commit_version() }} as commit_version
    from {{ source('ops', 'filter_stats') }}
),

marked as (
    {{ mark_superseded_runs('filter_stats', ['relation'], commit_version='commit_version') }}
),

final as (
    select
        invocation_id,
        run_started_at,
        model,
        filter_name,
        rejected_rows,
        total_rows,
        filter_position,
        kind,
        failed_rows,
        relation,
        execution_time,
        window_start,
        window_end,
        recorded_at,
        commit_version
    from marked
    where superseded_by is null
)

select * from final
