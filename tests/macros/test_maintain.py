"""Table maintenance (`maintain_tables`, `python -m python_jobs.maintain`) and backfills.

One story on `scenario_backfill` (tests/macros/materializations_project), built once for the
module over the book's four hourly windows: maintenance compacts and vacuums every table
with a retention that covers the backfill horizon, and a backfill inside the horizon
still restores and gives the book's rows, and keeps a raised retention (Delta's RESTORE
brings back the old table properties); with the horizon at 0 (every earlier version
is then outside it, as if the horizon had passed), the backfill fails with the restore
check's message and changes nothing. A retention shorter than the horizon is refused
before anything is touched.
"""

from __future__ import annotations

import json

import pytest

from python_jobs import maintain
from tests.macros.test_cdc_merge import PROJECT, SCHEMA, append_input
from tests.macros.test_cdc_merge_backfill import (
    MODEL,
    A,
    B,
    C,
    M,
    N,
    O,
    build,
    failure,
    ingest,
    rows,
    version,
)

TOMBSTONES = f"{MODEL}__tombstones"
HOURLY = {
    "07:00": (6, [(A, "c", 1, "A")], [(A, "A")]),
    "08:00": (7, [(A, "u", 2, "A-U"), (B, "c", 3, "B")], [(A, "A-U"), (B, "B")]),
    "09:00": (8, [(B, "d", 4, None), (C, "c", 5, "C")], [(A, "A-U"), (C, "C")]),
    "10:00": (
        9,
        [(M, "c", 6, "M"), (N, "c", 7, "N"), (O, "c", 8, "O")],
        [(A, "A-U"), (C, "C"), (M, "M"), (N, "N"), (O, "O")],
    ),
}
FINAL = HOURLY["10:00"][2]


def maintain_tables(dbt, lakehouse_home, expect_fail: bool = False, **arguments):
    """`dbt run-operation maintain_tables` on the scenario project, on the model's table
    and its side tables (the run log and the input are maintained the same way)."""
    arguments.setdefault("select", [f"{MODEL}*"])
    return dbt(
        "run-operation",
        "maintain_tables",
        "--project-dir",
        str(PROJECT),
        "--target-path",
        str(lakehouse_home / "dbt" / "cdc_merge_target"),
        "--args",
        json.dumps(arguments),
        expect_fail=expect_fail,
    )


RETENTION = ("delta.deletedFileRetentionDuration", "delta.logRetentionDuration")


def retention(spark, table: str) -> dict[str, str]:
    """The table's retention properties that are set."""
    return {
        row["key"]: row["value"]
        for row in spark.sql(f"show tblproperties {table}").collect()
        if row["key"] in RETENTION
    }


def num_files(spark, table: str) -> int:
    return spark.sql(f"describe detail {table}").collect()[0]["numFiles"]


def history(spark, table: str, since: int) -> list[tuple]:
    """(operation, parameters) of the table's commits after version `since`, oldest first."""
    return [
        (row["operation"], dict(row["operationParameters"]))
        for row in spark.sql(f"describe history {table}").collect()
        if row["version"] > since
    ][::-1]


@pytest.fixture(scope="module")
def built(spark, dbt, lakehouse_home):
    """`scenario_backfill` after the four hourly runs (each merge adds files)."""
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    append_input(spark, "backfill", SCHEMA, [], 1)
    for at, (hour, changes, expected) in HOURLY.items():
        ingest(spark, hour, 30, changes)
        build(dbt, lakehouse_home, f"2024-10-07T{at}:00")
        assert rows(spark) == expected, at
    return FINAL


def test_a_retention_shorter_than_the_horizon_is_refused(
    built, spark, dbt, lakehouse_home, capsys
) -> None:
    before = (version(spark), num_files(spark, MODEL))

    capsys.readouterr()
    maintain_tables(dbt, lakehouse_home, expect_fail=True, horizon_hours=168, retain_hours=24)
    assert (
        "maintain_tables: a retention of 24 h is shorter than the backfill horizon of 168 h "
        "(LAKEHOUSE_BACKFILL_HORIZON_HOURS)" in capsys.readouterr().out
    )
    # The command refuses it in one line before any session starts.
    assert maintain.main(["--horizon-hours", "168", "--retain-hours", "24"]) == 2
    assert capsys.readouterr().err == (
        "python -m python_jobs.maintain: error: a retention of 24 h is shorter than the "
        "backfill horizon of 168 h (LAKEHOUSE_BACKFILL_HORIZON_HOURS): VACUUM would delete "
        "files that a backfill within the horizon restores; retain at least 168 h, or "
        "shorten the horizon\n"
    )
    assert maintain.main(["--horizon-hours", "a week"]) == 2
    assert "must be a number of hours >= 0, got 'a week'" in capsys.readouterr().err

    assert (rows(spark), version(spark), num_files(spark, MODEL)) == (built, *before)


def test_a_clustered_table_without_clustering_columns_is_compacted(
    built, spark, dbt, lakehouse_home, capsys
) -> None:
    """A side table of the model (its key `id`) created clustered, whose overwrite
    dropped its clustering columns (as an audited table's run that died before its
    `cluster by` leaves it): Delta keeps the clustering feature and refuses a Z-order
    there, so maintenance compacts it (the Z-order by `id` failed the whole command)."""
    table = f"{MODEL}__reclustered"
    spark.sql(
        f"create or replace table {table} (id bigint, name string) using delta cluster by (id)"
    )
    for values in ("(1, 'a')", "(2, 'b')", "(3, 'c')"):
        spark.sql(f"insert into {table} values {values}")
    spark.sql(f"insert overwrite {table} select * from {table}")
    spark.sql(f"insert into {table} values (4, 'd')")
    detail = spark.sql(f"describe detail {table}").collect()[0]
    assert (detail["clusteringColumns"], "clustering" in detail["tableFeatures"]) == ([], True)
    start = spark.sql(f"describe history {table} limit 1").collect()[0]["version"]

    capsys.readouterr()
    maintain_tables(dbt, lakehouse_home, select=[table])
    assert history(spark, table, start)[0] == (
        "OPTIMIZE",
        {"predicate": "[]", "clusterBy": "[]", "zOrderBy": "[]", "auto": "false"},
    )
    assert num_files(spark, table) == 1
    [line] = [line for line in capsys.readouterr().out.splitlines() if f"{table}:" in line]
    assert line.endswith(
        f"maintain_tables: {table}: optimize compacted, a clustered table without "
        "clustering columns (4 files -> 1), vacuum retaining 168 h (0 files deleted)"
    ), line
    assert sorted(tuple(r) for r in spark.sql(f"select * from {table}").collect()) == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
        (4, "d"),
    ]
    spark.sql(f"drop table {table}")


def test_maintenance_keeps_what_a_backfill_within_the_horizon_restores(
    built, spark, dbt, lakehouse_home, fail_statement
) -> None:
    start = version(spark)
    files = num_files(spark, MODEL)
    assert files > 1

    # Maintenance with the default horizon (168 h): compaction Z-ordered by the model's
    # unique_key, then VACUUM with the table's retention at 7 days.
    maintain_tables(dbt, lakehouse_home)
    assert num_files(spark, MODEL) == 1
    assert history(spark, MODEL, start) == [
        ("OPTIMIZE", {"predicate": "[]", "zOrderBy": '["id"]', "clusterBy": "[]", "auto": "false"}),
        (
            "VACUUM START",
            {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(168 * 3600 * 1000)},
        ),
        ("VACUUM END", {"status": "COMPLETED"}),
    ]
    assert rows(spark) == built
    # Its side tables are maintained too.
    assert [op for op, _ in history(spark, TOMBSTONES, 0)][-2:] == ["VACUUM START", "VACUUM END"]

    # A backfill inside the horizon restores the version before 08:00 and re-merges.
    for at in ("08:00", "09:00", "10:00"):
        build(dbt, lakehouse_home, f"2024-10-07T{at}:00")
        assert rows(spark) == HOURLY[at][2], f"backfill {at}"

    # A horizon past Delta's 30 days of log: maintenance raises the tables' log and file
    # retention. A backfill's RESTORE brings back the properties of the version it
    # restores; the backfill keeps the raised ones (the model's and its tombstones').
    maintain_tables(dbt, lakehouse_home, horizon_hours=1000, retain_hours=1000)
    raised = {name: "interval 1000 hours" for name in RETENTION}
    assert retention(spark, MODEL) == retention(spark, TOMBSTONES) == raised
    # The first try dies between the model's RESTORE and the retention set back (a
    # test-only fault): the restored version's properties (none set); its retry sets
    # them back from the table's history.
    disarm = fail_statement(
        rf"alter table \S*{MODEL.split('.')[1]} set tblproperties", "after the restore"
    )
    result = build(dbt, lakehouse_home, "2024-10-07T10:00:00", expect_fail=True)
    disarm()
    assert "injected fault after the restore" in failure(result)
    assert retention(spark, MODEL) == {}
    build(dbt, lakehouse_home, "2024-10-07T10:00:00")
    assert rows(spark) == FINAL
    assert [op for op, _ in history(spark, MODEL, 0)][-3:] == [
        "RESTORE",
        "SET TBLPROPERTIES",
        "MERGE",
    ]
    assert retention(spark, MODEL) == retention(spark, TOMBSTONES) == raised
    # An operator unsets the model's file retention; the next backfill keeps it unset
    # (the newest commit naming it is the UNSET) and the log retention raised.
    files, log = RETENTION
    spark.sql(f"alter table {MODEL} unset tblproperties ('{files}')")
    build(dbt, lakehouse_home, "2024-10-07T10:00:00")
    assert rows(spark) == FINAL
    assert retention(spark, MODEL) == {log: raised[log]}

    # The horizon passes: with a horizon (and retention) of 0 hours every earlier
    # version is outside it. Maintenance sets the tables' file retention to 0 and
    # vacuums the files of the versions before the compaction.
    maintain_tables(dbt, lakehouse_home, horizon_hours=0)
    vacuums = [params for op, params in history(spark, MODEL, 0) if op == "VACUUM START"]
    assert vacuums[-1] == {"retentionCheckEnabled": "true", "defaultRetentionMillis": "0"}
    before = version(spark)
    result = build(dbt, lakehouse_home, "2024-10-07T08:00:00", expect_fail=True)
    message = failure(result)
    assert f"cannot restore {MODEL} to version" in message
    assert "past the retention horizon" in message and "nothing was changed" in message
    assert (rows(spark), version(spark)) == (FINAL, before)
