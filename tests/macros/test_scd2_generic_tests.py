"""The SCD2 generic tests (macros/quality/test_scd2_*.sql) find exactly the bad versions.

One fixture relation holds a clean key and a key breaking each rule; each test's SQL,
compiled by dbt, must return the breaking versions and nothing else. Times are whole
seconds since the epoch, so a version reads (key, valid_from, valid_to).
"""

from __future__ import annotations

import pytest

FIXTURE = "silver.scd2_fixture"
# (id, valid_from, valid_to, is_current, closed_by_delete)
ROWS = [
    (1, 1, 2, False, False),  # clean: versions meet, one current
    (1, 2, None, True, False),
    (2, 1, 3, False, False),  # overlap: the first ends after the second begins
    (2, 2, None, True, False),
    (3, 1, None, True, False),  # two current versions (also an overlap)
    (3, 2, None, True, False),
    (4, 1, 2, False, False),  # a gap, the key was not deleted
    (4, 3, None, True, False),
    (5, 1, 2, False, True),  # a gap after a delete, then a re-insert: fine
    (5, 3, None, True, False),
    (6, 1, 2, True, False),  # flagged current while closed
    (6, 2, None, True, False),
]


@pytest.fixture(scope="module")
def fixture_relation(spark):
    spark.sql("create schema if not exists silver")
    spark.createDataFrame(
        ROWS, "id int, vf long, vt long, is_current boolean, closed_by_delete boolean"
    ).selectExpr(
        "id",
        "timestamp_seconds(vf) as valid_from",
        "timestamp_seconds(vt) as valid_to",
        "is_current",
        "closed_by_delete",
    ).write.format("delta").mode("overwrite").saveAsTable(FIXTURE)
    yield FIXTURE
    spark.sql(f"drop table if exists {FIXTURE}")


def failing(spark, call: str, columns: str) -> list[tuple]:
    """The rows the test's SQL (compiled by dbt in-process) returns, sorted."""
    from python_jobs.run_dbt import invoke

    result = invoke(["compile", "--inline", "{{ " + call + " }}"])
    assert result.success, result.exception
    sql = result.result.results[0].node.compiled_code
    rows = spark.sql(f"select {columns} from ({sql}) as failures").collect()
    return sorted(tuple(row) for row in rows)


def test_no_overlap_finds_overlapping_versions(spark, fixture_relation) -> None:
    call = f"spark__test_scd2_no_overlap('{fixture_relation}', ['id'], 'valid_from', 'valid_to')"
    got = failing(spark, call, "id, unix_seconds(valid_from)")
    assert got == [(2, 1), (3, 1)]


def test_one_current_finds_several_current_versions_and_wrong_flags(
    spark, fixture_relation
) -> None:
    call = f"spark__test_scd2_one_current('{fixture_relation}', ['id'], 'valid_to', 'is_current')"
    assert failing(spark, call, "id, failing_rows, failure") == [
        (3, 2, "several current versions"),
        (6, 1, "is_current disagrees with valid_to"),
    ]
    # Without is_current, only the count of open versions is checked.
    call = f"spark__test_scd2_one_current('{fixture_relation}', 'id', 'valid_to', none)"
    assert failing(spark, call, "id, failure") == [(3, "several current versions")]


def test_no_gaps_finds_gaps_not_explained_by_a_delete(spark, fixture_relation) -> None:
    call = (
        f"spark__test_scd2_no_gaps('{fixture_relation}', ['id'], 'valid_from', 'valid_to', "
        "'closed_by_delete')"
    )
    assert failing(spark, call, "id, unix_seconds(valid_to)") == [(4, 2)]
    call = f"spark__test_scd2_no_gaps('{fixture_relation}', ['id'], 'valid_from', 'valid_to')"
    assert failing(spark, call, "id, unix_seconds(valid_to)") == [(4, 2), (5, 2)]
