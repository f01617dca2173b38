"""The generic tests on ops.filter_stats fail exactly when they should.

Fixture statistics for a model `stats_fixture` (three runs: 15% rejected, an empty run,
then 65%), `stats_quiet` (0%, then 0.5%, then 5%), two models whose latest run is a
backfill (WINDOWED) and one whose backfill came from a host with a clock behind (SKEWED);
each test's SQL, compiled by dbt, must return the failing run and nothing else.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.macros.test_scd2_generic_tests import failing

# (model, invocation, hour, filter, rejected_rows, total_rows)
STATS = [
    ("stats_fixture", "run-a", 1, "bad_time", 10, 100),
    ("stats_fixture", "run-a", 1, "bad_page", 5, 100),
    ("stats_fixture", "run-b", 2, "bad_time", 0, 0),
    ("stats_fixture", "run-b", 2, "bad_page", 0, 0),
    ("stats_fixture", "run-c", 3, "bad_time", 60, 100),
    ("stats_fixture", "run-c", 3, "bad_page", 5, 100),
    ("stats_quiet", "run-d", 1, "bad_time", 0, 1000),
    ("stats_quiet", "run-e", 2, "bad_time", 5, 1000),
]

# Runs with windows: (model, invocation, hour started, execution hour, window start version
# (None: from the beginning), window end version, rejected_rows of 100). The latest run of
# each is a backfill of its second window (execution hour 2 again): it must be compared
# with the run of the window before (10%), not with the run it superseded (50%), nor, in
# `stats_later`, with the run of hour 3, whose window the backfill took the table back
# before (20%: under 3x 50%, so comparing with it would pass).
WINDOWED = [
    ("stats_backfill", "run-f", 1, 1, None, 1, 10),
    ("stats_backfill", "run-g", 2, 2, 1, 2, 50),
    ("stats_backfill", "run-h", 3, 2, 1, 2, 50),
    ("stats_later", "run-i", 1, 1, None, 1, 10),
    ("stats_later", "run-j", 2, 2, 1, 2, 50),
    ("stats_later", "run-k", 3, 3, 2, 3, 20),
    ("stats_later", "run-l", 4, 2, 1, 2, 50),
    ("stats_skewed", "run-m", 1, 1, None, 1, 10),
    ("stats_skewed", "run-n", 2, 2, 1, 2, 50),
]

# Recorded by a later commit of ops.filter_stats than WINDOWED: the backfill of
# stats_skewed's second window (40%), from a host whose clock said midnight, before the
# runs it follows. The order of the commits makes it the latest run, superseding run-n.
SKEWED = [("stats_skewed", "run-o", 0, 2, 1, 2, 40)]


def _hour(hour: int | None) -> datetime | None:
    return None if hour is None else datetime(2024, 10, 7, hour)


@pytest.fixture(scope="module")
def stats(spark, dbt):
    spark.sql("create schema if not exists ops")
    # A table from before row tracking (as the property is off) gets it from on-run-start.
    dbt("run-operation", "create_ops_tables")
    spark.sql(
        "alter table ops.filter_stats set tblproperties ('delta.enableRowTracking' = 'false')"
    )
    dbt("run-operation", "create_ops_tables")
    rows = [
        (inv, datetime(2024, 10, 7, hour), model, name, rejected, total, i, "filter", rejected)
        for i, (model, inv, hour, name, rejected, total) in enumerate(STATS)
    ]
    spark.createDataFrame(
        rows,
        "invocation_id string, run_started_at timestamp, model string, filter_name string, "
        "rejected_rows long, total_rows long, filter_position int, kind string, "
        "failed_rows long",
    ).selectExpr(
        "*",
        "concat('silver.', model) as relation",
        "run_started_at as execution_time",
        "cast(null as bigint) as window_start",
        "cast(null as bigint) as window_end",
        "current_timestamp() as recorded_at",
    ).write.format("delta").mode("append").saveAsTable("ops.filter_stats")
    for runs in (WINDOWED, SKEWED):
        _append_windowed(spark, runs)
    yield
    spark.sql("delete from ops.filter_stats where model like 'stats_%'")


def _append_windowed(spark, runs) -> None:
    """Appends `runs` (WINDOWED's shape) to ops.filter_stats in one commit."""
    rows = [
        (inv, _hour(hour), model, "bad_time", rejected, 100, 1, "filter", rejected,
         f"silver.{model}", _hour(execution), start, end)
        for model, inv, hour, execution, start, end, rejected in runs
    ]  # fmt: skip
    spark.createDataFrame(
        rows,
        "invocation_id string, run_started_at timestamp, model string, filter_name string, "
        "rejected_rows long, total_rows long, filter_position int, kind string, "
        "failed_rows long, relation string, execution_time timestamp, "
        "window_start bigint, window_end bigint",
    ).selectExpr("*", "current_timestamp() as recorded_at").write.format("delta").mode(
        "append"
    ).saveAsTable("ops.filter_stats")


def test_the_statistics_get_row_tracking_from_on_run_start(spark, stats) -> None:
    properties = dict(spark.sql("show tblproperties ops.filter_stats").collect())
    assert properties["delta.enableRowTracking"] == "true"


def relation(model: str) -> str:
    return f"api.Relation.create(schema='silver', identifier='{model}')"


def share(model: str, max_share: float, filter_name: str | None = None) -> str:
    name = "none" if filter_name is None else f"'{filter_name}'"
    return f"spark__test_filter_rejected_share({relation(model)}, {max_share}, {name})"


def jump(model: str, factor: float, filter_name: str | None = None, floor=0.01) -> str:
    name = "none" if filter_name is None else f"'{filter_name}'"
    return f"spark__test_filter_rejected_share_jump({relation(model)}, {factor}, {name}, {floor})"


COLUMNS = "invocation_id, filter_name, round(rejected_share, 3), failure"


def test_rejected_share_of_the_latest_run(spark, stats) -> None:
    # The latest run that saw rows is run-c: 65% in all, 60% bad_time, 5% bad_page.
    assert failing(spark, share("stats_fixture", 0.5), COLUMNS) == [
        ("run-c", "all filters", 0.65, "rejected share above 0.5")
    ]
    assert failing(spark, share("stats_fixture", 0.7), COLUMNS) == []
    assert failing(spark, share("stats_fixture", 0.5, "bad_time"), COLUMNS) == [
        ("run-c", "bad_time", 0.6, "rejected share above 0.5")
    ]
    assert failing(spark, share("stats_fixture", 0.05, "bad_page"), COLUMNS) == []


def test_a_filter_without_statistics_fails(spark, stats) -> None:
    assert failing(spark, share("stats_fixture", 0.5, "bad_typo"), COLUMNS) == [
        ("run-c", "bad_typo", None, "the model has no statistics for filter bad_typo")
    ]


def test_a_jump_against_the_previous_run_fails(spark, stats) -> None:
    # run-c (65%) against run-a (15%): the empty run-b is skipped.
    assert failing(spark, jump("stats_fixture", 3), COLUMNS) == [
        (
            "run-c",
            "all filters",
            0.65,
            "rejected share jumped more than 3x from 0.15 (invocation run-a)",
        )
    ]
    assert failing(spark, jump("stats_fixture", 5), COLUMNS) == []
    assert failing(spark, jump("stats_fixture", 3, "bad_page"), COLUMNS) == []


def test_a_backfill_is_compared_with_the_previous_window_not_the_run_it_replaced(
    spark, stats
) -> None:
    # run-h re-ran run-g's window: both 50%, but the window before was 10%.
    assert failing(spark, jump("stats_backfill", 3), COLUMNS) == [
        (
            "run-h",
            "all filters",
            0.5,
            "rejected share jumped more than 3x from 0.1 (invocation run-f)",
        )
    ]
    # run-l re-ran hour 2's window after hour 3's run (20%), which it took back: 10% again.
    assert failing(spark, jump("stats_later", 3), COLUMNS) == [
        (
            "run-l",
            "all filters",
            0.5,
            "rejected share jumped more than 3x from 0.1 (invocation run-i)",
        )
    ]
    assert failing(spark, jump("stats_later", 5), COLUMNS) == []
    # The share test reads the same latest run.
    assert failing(spark, share("stats_later", 0.4), COLUMNS) == [
        ("run-l", "all filters", 0.5, "rejected share above 0.4")
    ]


def test_a_backfill_from_a_host_with_a_clock_behind_is_still_the_latest_run(spark, stats) -> None:
    # run-o started "before" run-m and run-n by its clock, but ops.filter_stats recorded it
    # after them: it replaced run-n (50%) and is compared with run-m's 10%.
    assert failing(spark, jump("stats_skewed", 3), COLUMNS) == [
        (
            "run-o",
            "all filters",
            0.4,
            "rejected share jumped more than 3x from 0.1 (invocation run-m)",
        )
    ]
    assert failing(spark, share("stats_skewed", 0.3), COLUMNS) == [
        ("run-o", "all filters", 0.4, "rejected share above 0.3")
    ]


def test_superseded_runs_are_marked_with_the_run_that_replaced_them(spark, stats) -> None:
    call = "mark_superseded_runs('ops.filter_stats', ['relation'])"
    rows = failing(spark, call, "distinct invocation_id, superseded_by")
    assert [row for row in rows if row[0] in {r[1] for r in WINDOWED + SKEWED}] == [
        ("run-f", None),
        ("run-g", "run-h"),  # the same execution time, re-run
        ("run-h", None),
        ("run-i", None),
        ("run-j", "run-l"),
        ("run-k", "run-l"),  # its window started where run-l's ended: merged again later
        ("run-l", None),
        ("run-m", None),
        ("run-n", "run-o"),  # re-run by run-o, recorded after it whatever its clock said
        ("run-o", None),
    ]
    # Runs without windows (the fixtures above) supersede nothing. (Only the fixtures'
    # runs: the worker's ops.filter_stats also holds the runs of tests that built
    # filtered models before this file, backfills among them.)
    assert {row[1] for row in rows if row[0] in {r[1] for r in STATS}} == {None}


def test_small_shares_count_as_the_floor(spark, stats) -> None:
    # 0% then 0.5%: below the 1% floor, not a jump; with a 0.1% floor it is one.
    assert failing(spark, jump("stats_quiet", 2), COLUMNS) == []
    assert [row[0] for row in failing(spark, jump("stats_quiet", 2, floor=0.001), COLUMNS)] == [
        "run-e"
    ]
