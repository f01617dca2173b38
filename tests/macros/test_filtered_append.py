"""filtered_append (models/appended/appended_lookback.sql in the scenario project):
deduplication bounded by `dedup_lookback` on a column that may be null - a row whose
column is null is compared like any other, so its exact copy in a later window is not
appended again; and a table whose runs were deleted from the run log is refused until a
full refresh, not read into again. (silver.visits, whose lookback column is never null
after its filters, is tested in tests/silver/test_visits.py.)"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.helpers import append_with_commit_versions, delta_version
from tests.macros.test_audited_table import failure
from tests.macros.test_cdc_merge import run_project

INPUT = "silver.append_input_lookback"
SCHEMA = "id bigint, seen_at timestamp, name string, _ingested_at timestamp"


def _append(spark, rows: list[tuple]) -> None:
    ingested = datetime(2024, 10, 8)
    frame = spark.createDataFrame([(*row, ingested) for row in rows], SCHEMA)
    append_with_commit_versions(frame, INPUT)


def _table(spark) -> list[tuple]:
    rows = spark.sql("select id, seen_at, name from silver.appended_lookback").collect()
    return sorted(tuple(r) for r in rows)


def test_a_null_lookback_value_is_compared_and_a_lost_run_log_is_refused(
    spark, dbt, clean_lakehouse, lakehouse_home: Path
) -> None:
    spark.sql("create schema if not exists silver")
    spark.sql(f"drop table if exists {INPUT}")
    day = datetime(2024, 10, 5)
    _append(spark, [(1, None, "a"), (2, day, "b")])
    run_project(dbt, lakehouse_home, {}, "--select", "appended_lookback")
    first = [(1, None, "a"), (2, day, "b")]
    assert _table(spark) == first

    # Exact copies of both rows, and a new row two days later: the lookback reaches
    # back to 2024-10-04 (a day before the window's earliest `seen_at`).
    later = datetime(2024, 10, 7)
    _append(spark, [(1, None, "a"), (2, day, "b"), (3, later, "c")])
    run_project(dbt, lakehouse_home, {}, "--select", "appended_lookback")
    assert _table(spark) == [*first, (3, later, "c")]
    duplicates = spark.sql(
        "select rejected_rows from ops.filter_stats "
        "where model = 'appended_lookback' and filter_name = 'duplicate_id' "
        "order by recorded_at"
    ).collect()
    assert [r[0] for r in duplicates] == [0, 2]

    # The run log loses the model's runs: the next run cannot know what the table holds
    # (reading every input row again would count them all as duplicates), so it is
    # refused, nothing written, until a full refresh, which gives the same rows.
    spark.sql("delete from ops.window_runs where model = 'silver.appended_lookback'")
    before = delta_version(spark, "silver.appended_lookback")
    result = run_project(dbt, lakehouse_home, {}, "--select", "appended_lookback", expect_fail=True)
    assert (
        "filtered_append (model silver.appended_lookback): the table exists but "
        "ops.window_runs has no run of it (its rows were deleted, or another "
        "materialization built it)"
    ) in failure(result)
    assert delta_version(spark, "silver.appended_lookback") == before
    run_project(dbt, lakehouse_home, {}, "--select", "appended_lookback", "--full-refresh")
    assert _table(spark) == [*first, (3, later, "c")]
