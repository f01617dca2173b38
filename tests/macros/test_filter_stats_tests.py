"""The generic tests on ops.filter_stats fail exactly when they should.

Fixture statistics for a model `stats_fixture` (three runs: 15% rejected, an empty run,
then 65%) and `stats_quiet` (0%, then 0.5%, then 5%); each test's SQL, compiled by dbt,
must return the failing run and nothing else.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.macros.test_macro_arguments import compile_error
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


@pytest.fixture(scope="module")
def stats(spark, dbt):
    spark.sql("create schema if not exists ops")
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
        "cast(null as timestamp) as window_start",
        "cast(null as timestamp) as window_end",
        "current_timestamp() as recorded_at",
    ).write.format("delta").mode("append").saveAsTable("ops.filter_stats")
    yield
    spark.sql("delete from ops.filter_stats where model like 'stats_%'")


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


def test_small_shares_count_as_the_floor(spark, stats) -> None:
    # 0% then 0.5%: below the 1% floor, not a jump; with a 0.1% floor it is one.
    assert failing(spark, jump("stats_quiet", 2), COLUMNS) == []
    assert [row[0] for row in failing(spark, jump("stats_quiet", 2, floor=0.001), COLUMNS)] == [
        "run-e"
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (share("m", 1.5), "max_share must be a share between 0 and 1, got 1.5"),
        (jump("m", 0.5), "factor must be a number of at least 1, got 0.5"),
    ],
)
def test_bad_arguments_fail_compilation(dbt, call: str, message: str) -> None:
    assert message in compile_error(dbt, "{{ " + call + " }}")
