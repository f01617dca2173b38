"""Backfills of the cdc_merge materialization (the Stateful Merger), step by step.

One story on `scenario_backfill` (tests/macros/materializations_project): the book's worked
example of four hourly runs, a compaction between runs, backfills in order, a re-run
with nothing new, a refused execution time, a restore past the retention horizon, a
crash between the table's two writes, and a lost run log. Each step states the rows
the table must hold after it. Then runs that die after their first write (a backfill
after its restore, a full refresh after replacing the table), a view where the table
goes, and a writer whose clock runs behind.
"""

from __future__ import annotations

from datetime import datetime

from tests.helpers import append_with_commit_versions, delta_version
from tests.macros.test_cdc_merge import SCHEMA, append_input, read_rows, run_project

MODEL = "silver.scenario_backfill"
A, B, C, M, N, O = 1, 2, 3, 13, 14, 15  # noqa: E741 (the keys of the book's example)


def build(dbt, lakehouse_home, execution_time: str, expect_fail: bool = False, **variables):
    return run_project(
        dbt,
        lakehouse_home,
        {"execution_time": execution_time, **variables},
        "--select",
        "scenario_backfill",
        expect_fail=expect_fail,
    )


def rows(spark) -> list[tuple]:
    return read_rows(spark, MODEL, "id, name")


def version(spark) -> int:
    return delta_version(spark, MODEL)


def ingest(spark, hour: int, minute: int, changes: list[tuple]) -> None:
    """Appends change rows to the input, one commit, as ingested at hour:minute on the
    test day."""
    frame = spark.createDataFrame(
        [(*change, datetime(2024, 10, 7, hour, minute)) for change in changes],
        f"{SCHEMA}, _ingested_at timestamp",
    )
    append_with_commit_versions(frame, "silver.cdc_input_backfill")


def quarantined(spark) -> list[tuple]:
    return read_rows(
        spark, f"{MODEL}__quarantine", "reason, cast(execution_time as string) as execution_time"
    )


TOMBSTONES = f"{MODEL}__tombstones"


def recorded_after(spark) -> tuple:
    """The table and tombstone versions the model's last succeeded run recorded."""
    row = spark.sql(
        "select version_after, side_version_after from ops.window_runs "
        f"where model = '{MODEL}' and status = 'succeeded' "
        "order by _metadata.row_commit_version desc limit 1"
    ).first()
    return tuple(row)


def run_log(spark) -> list[tuple]:
    """The model's run log in commit order: (execution time, kind, window start, status)."""
    return [
        tuple(r)
        for r in spark.sql(
            "select date_format(execution_time, 'HH:mm'), run_kind, window_start, status "
            f"from ops.window_runs where model = '{MODEL}' "
            "order by _metadata.row_commit_version"
        ).collect()
    ]


def failure(result) -> str:
    return " ".join(str(node.message) for node in result.result.results)


def test_backfills_restore_the_table_then_merge_the_window_again(
    spark, dbt, lakehouse_home, clean_lakehouse
) -> None:
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    append_input(spark, "backfill", SCHEMA, [], 1)  # the input table, empty

    # Four hourly runs, each over what was ingested in the half hour before it.
    hourly = {
        "07:00": (6, [(A, "c", 1, "A")], [(A, "A")]),
        "08:00": (7, [(A, "u", 2, "A-U"), (B, "c", 3, "B")], [(A, "A-U"), (B, "B")]),
        "09:00": (
            8,
            [(B, "d", 4, None), (C, "c", 5, "C"), (None, "c", 5, "keyless")],
            [(A, "A-U"), (C, "C")],
        ),
        "10:00": (
            9,
            [(M, "c", 6, "M"), (N, "c", 7, "N"), (O, "c", 8, "O")],
            [(A, "A-U"), (C, "C"), (M, "M"), (N, "N"), (O, "O")],
        ),
    }
    for at, (hour, changes, expected) in hourly.items():
        ingest(spark, hour, 30, changes)
        build(dbt, lakehouse_home, f"2024-10-07T{at}:00")
        assert rows(spark) == expected, at

    assert quarantined(spark) == [("null_key", "2024-10-07 09:00:00")]

    # A compaction between runs is a commit of its own; backfills are not disturbed.
    spark.sql(f"optimize {MODEL}")
    # Backfilling 08:00 shows the table as it was after 08:00, then the later windows
    # are re-run in order, each from the state the one before left. The backfill runs
    # with the model fixed to drop keyless rows: 09:00's quarantine rows are replaced.
    for at, (_, _, expected) in list(hourly.items())[1:]:
        build(dbt, lakehouse_home, f"2024-10-07T{at}:00", backfill_filter="id is not null")
        assert rows(spark) == expected, f"backfill {at}"
        # The versions it recorded are those its tables have: a restore is a commit,
        # also of the tombstones the window does not write again.
        assert recorded_after(spark) == (version(spark), delta_version(spark, TOMBSTONES)), at
    assert quarantined(spark) == []
    final = hourly["10:00"][2]

    # A new run with nothing ingested changes nothing, not even the Delta version.
    before = version(spark)
    build(dbt, lakehouse_home, "2024-10-07T11:00:00")
    assert (rows(spark), version(spark)) == (final, before)

    # An execution time earlier than the last run that never ran has no window.
    result = build(dbt, lakehouse_home, "2024-10-07T07:30:00", expect_fail=True)
    assert "is earlier than the last run (2024-10-07 11:00:00.000000) and never ran" in failure(
        result
    )
    assert (rows(spark), version(spark)) == (final, before)

    # Past the retention horizon: the files of the version before 08:00 are vacuumed.
    spark.sql(
        f"alter table {MODEL} set tblproperties "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    spark.sql(f"optimize {MODEL}")
    spark.sql(f"vacuum {MODEL} retain 0 hours")
    before, logged = version(spark), run_log(spark)
    result = build(dbt, lakehouse_home, "2024-10-07T08:00:00", expect_fail=True)
    message = failure(result)
    assert f"cannot restore {MODEL} to version" in message
    assert "past the retention horizon" in message and "nothing was changed" in message
    # Nothing, the run log included: the next run goes on from the last one.
    assert (rows(spark), version(spark), run_log(spark)) == (final, before, logged)


def test_a_crash_between_the_two_writes_is_repaired_by_the_next_run(
    spark, dbt, lakehouse_home, clean_lakehouse, fail_statement
) -> None:
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    ingest(spark, 6, 30, [(A, "c", 1, "A"), (B, "c", 2, "B")])
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")

    # The run merges the delete of A into the table, then dies before it records the
    # tombstone (and before its run is marked succeeded).
    ingest(spark, 7, 30, [(A, "d", 3, None), (C, "c", 4, "C")])
    disarm = fail_statement(
        rf"\bmerge into\s+\S*{MODEL.split('.')[1]}__tombstones\b", "after the merge into the table"
    )
    result = build(dbt, lakehouse_home, "2024-10-07T08:00:00", expect_fail=True)
    assert "injected fault" in failure(result)
    disarm()
    assert rows(spark) == [(B, "B"), (C, "C")]
    assert read_rows(spark, f"{MODEL}__tombstones", "id") == []

    # A late, stale update of A arrives. The next run restores the table to the failed
    # run's base and merges its window again with the new rows: A stays deleted.
    ingest(spark, 8, 30, [(A, "u", 2, "A-stale")])
    build(dbt, lakehouse_home, "2024-10-07T09:00:00")
    assert rows(spark) == [(B, "B"), (C, "C")]
    assert read_rows(spark, f"{MODEL}__tombstones", "id") == [(A,)]

    # The run log is lost: the next run re-reads every change and, merging by sequence,
    # leaves the table exactly as it was - it never empties a table that has data.
    spark.sql(f"delete from ops.window_runs where model = '{MODEL}'")
    build(dbt, lakehouse_home, "2024-10-07T10:00:00")
    assert rows(spark) == [(B, "B"), (C, "C")]


def test_a_backfill_that_dies_after_its_restore_is_repaired_by_the_next_run(
    spark, dbt, lakehouse_home, clean_lakehouse, fail_statement
) -> None:
    """The re-run of 07:00 restores the table to its state before 07:00's window, then
    dies reading the window (a crash, or a schema check that fails). The next run, a
    new execution time, restores that state again and merges from 07:00's window on:
    nothing the restore took out is lost."""
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    ingest(spark, 6, 30, [(A, "c", 1, "A")])
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")
    ingest(spark, 7, 30, [(B, "c", 2, "B")])
    build(dbt, lakehouse_home, "2024-10-07T08:00:00")

    disarm = fail_statement(
        r"\bcache table\s+\S*scenario_backfill__cdc_batch\b", "after the restore"
    )
    result = build(dbt, lakehouse_home, "2024-10-07T07:00:00", expect_fail=True)
    assert "injected fault after the restore" in failure(result)
    disarm()
    assert rows(spark) == []

    ingest(spark, 8, 30, [(C, "c", 3, "C")])
    build(dbt, lakehouse_home, "2024-10-07T09:00:00")
    assert rows(spark) == [(A, "A"), (B, "B"), (C, "C")]
    # The re-run recorded its start before its restore: 09:00 read from its start.
    assert run_log(spark)[4:] == [
        ("07:00", "rerun", None, "started"),
        ("09:00", "incremental", None, "started"),
        ("09:00", "incremental", None, "succeeded"),
    ]


def test_a_full_refresh_that_dies_after_replacing_the_table_is_redone_by_the_next_run(
    spark, dbt, lakehouse_home, clean_lakehouse, fail_statement
) -> None:
    """A full refresh replaces the table (empty), then dies before it has read anything
    (here: replacing the tombstones). The next run, an ordinary one, builds the table
    again from every change, not from the last recorded window's end."""
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    ingest(spark, 6, 30, [(A, "c", 1, "A"), (B, "c", 2, "B")])
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")
    ingest(spark, 7, 30, [(A, "d", 3, None)])
    build(dbt, lakehouse_home, "2024-10-07T08:00:00")
    assert read_rows(spark, f"{MODEL}__tombstones", "id") == [(A,)]

    disarm = fail_statement(
        r"\bcreate or replace table\s+\S*scenario_backfill__tombstones\b", "after the replace"
    )
    result = run_project(
        dbt,
        lakehouse_home,
        {"execution_time": "2024-10-07T08:30:00"},
        "--select",
        "scenario_backfill",
        "--full-refresh",
        expect_fail=True,
    )
    assert "injected fault after the replace" in failure(result)
    disarm()
    assert rows(spark) == []

    ingest(spark, 8, 30, [(C, "c", 4, "C")])
    build(dbt, lakehouse_home, "2024-10-07T09:00:00")
    assert rows(spark) == [(B, "B"), (C, "C")]
    assert read_rows(spark, f"{MODEL}__tombstones", "id") == [(A,)]
    # The full refresh recorded its start before it replaced anything: 09:00 created.
    assert run_log(spark)[4:] == [
        ("08:30", "create", None, "started"),
        ("09:00", "create", None, "started"),
        ("09:00", "create", None, "succeeded"),
    ]


def test_a_relation_that_is_not_a_delta_table_is_refused_then_replaced_by_a_full_refresh(
    spark, dbt, lakehouse_home, clean_lakehouse
) -> None:
    """Where the model's table goes stands a view (the model was one before): a build
    is refused and leaves it; a full refresh drops it and builds the table."""
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    ingest(spark, 6, 30, [(A, "c", 1, "A")])
    spark.sql(f"create view {MODEL} as select 1 as id, 'view' as name")

    result = build(dbt, lakehouse_home, "2024-10-07T07:00:00", expect_fail=True)
    assert (
        f"{MODEL} exists and is not a Delta table; drop it or run with --full-refresh"
        in failure(result)
    ), failure(result)
    assert rows(spark) == [(1, "view")]

    run_project(
        dbt,
        lakehouse_home,
        {"execution_time": "2024-10-07T07:00:00"},
        "--select",
        "scenario_backfill",
        "--full-refresh",
    )
    assert spark.sql(f"describe detail {MODEL}").first().format == "delta"
    assert rows(spark) == [(A, "A")]


def two_hourly_runs(spark, dbt, lakehouse_home) -> None:
    """The input made empty, then A ingested and built at 07:00 (window (none, 1]), B at
    08:00 (window (1, 2])."""
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    append_input(spark, "backfill", SCHEMA, [], 1)  # the input table, empty
    ingest(spark, 6, 30, [(A, "c", 1, "A")])
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")
    ingest(spark, 7, 30, [(B, "c", 2, "B")])
    build(dbt, lakehouse_home, "2024-10-07T08:00:00")


def test_runs_follow_the_logs_commits_whatever_the_clock_says(
    spark, dbt, lakehouse_home, clean_lakehouse, rewrite_statement
) -> None:
    """A backfill recorded by a writer whose clock runs an hour behind (another host, or
    a clock stepped back): its run-log rows carry the oldest `recorded_at` of all. The
    next run still follows the backfill, the log's last commit: it reads from the end
    of the backfilled window, so the window the backfill took out of the table (08:00's)
    is merged again. Ordered by `recorded_at`, it would start after 08:00's window and
    lose B for good."""
    two_hourly_runs(spark, dbt, lakehouse_home)
    assert rows(spark) == [(A, "A"), (B, "B")]

    undo = rewrite_statement(
        r"\binsert into\s+\S*window_runs\b",
        "current_timestamp()",
        "current_timestamp() - interval 1 hour",
    )
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")
    undo()
    assert rows(spark) == [(A, "A")]
    recorded = spark.sql(
        "select date_format(execution_time, 'HH:mm') as at from ops.window_runs "
        f"where model = '{MODEL}' and status = 'succeeded' order by recorded_at"
    ).collect()
    assert [r.at for r in recorded] == ["07:00", "07:00", "08:00"]

    ingest(spark, 8, 30, [(C, "c", 3, "C")])
    build(dbt, lakehouse_home, "2024-10-07T09:00:00")
    assert rows(spark) == [(A, "A"), (B, "B"), (C, "C")]
    windows = spark.sql(
        "select date_format(execution_time, 'HH:mm') as at, window_start, window_end "
        f"from ops.window_runs where model = '{MODEL}' and status = 'succeeded' "
        "order by _metadata.row_commit_version"
    ).collect()
    assert [tuple(r) for r in windows] == [
        ("07:00", None, 1),
        ("08:00", 1, 2),
        ("07:00", None, 1),
        ("09:00", 1, 3),
    ]


STARTED = r"\binsert into\s+\S*window_runs\b.*'started'"  # a run's start, in the run log


def log_another_backfill_of_eight(spark, status: str, kind: str = "rerun") -> None:
    """A run-log row of another attempt, 'other-<kind>', as another process re-running
    08:00 (or running a full refresh, `kind` 'create') writes it: its window and base
    copied from 08:00's own start."""
    spark.sql(
        f"insert into ops.window_runs select model, materialization, 'other-{kind}', "
        f"execution_time, '{kind}', window_start, window_end, base_version, base_version, "
        "side_base_version, base_version, side_base_version, null, null, "
        f"'{status}', current_timestamp(), input_id from ops.window_runs "
        f"where model = '{MODEL}' and status = 'started' and attempt_id not like 'other-%' "
        "and execution_time = timestamp'2024-10-07 08:00:00'"
    )


def test_a_run_another_run_of_the_model_overtook_is_refused_before_it_writes(
    spark, dbt, lakehouse_home, clean_lakehouse, before_statement
) -> None:
    """Two runs of the model at once, as a shared catalog allows: the scheduled 09:00
    run has planned its window (after 08:00's) when a backfill of 08:00 records its
    start, about to restore the table to before 08:00's window. Had 09:00 merged its
    window onto that restored table, the next run would start after 09:00's window and
    08:00's rows would never come back. 09:00 sees the other attempt in the run log
    once it has recorded its own start, and stops, nothing written."""
    two_hourly_runs(spark, dbt, lakehouse_home)
    ingest(spark, 8, 30, [(C, "c", 3, "C")])
    before = version(spark)

    disarm = before_statement(STARTED, lambda: log_another_backfill_of_eight(spark, "started"))
    result = build(dbt, lakehouse_home, "2024-10-07T09:00:00", expect_fail=True)
    disarm()
    assert (
        f"another run of {MODEL} (attempt other-rerun, execution_time 2024-10-07 "
        "08:00:00.000000, rerun, started) wrote ops.window_runs after this run read it"
    ) in failure(result)
    assert "No row was written; run it again once the other run has ended" in failure(result)
    assert (rows(spark), version(spark)) == ([(A, "A"), (B, "B")], before)
    assert run_log(spark)[4:] == [
        ("08:00", "rerun", 1, "started"),
        ("09:00", "incremental", 2, "started"),
        ("09:00", "incremental", 2, "refused"),
    ]

    # The backfill never finished (it died): the next run repairs it, restoring its base
    # and reading from its window, 08:00's. The refused attempt is no attempt: planned
    # from it, the run would read from 09:00's window start.
    build(dbt, lakehouse_home, "2024-10-07T10:00:00")
    assert rows(spark) == [(A, "A"), (B, "B"), (C, "C")]
    assert run_log(spark)[7:] == [
        ("10:00", "incremental", 1, "started"),
        ("10:00", "incremental", 1, "succeeded"),
    ]


def nine_restoring_beside(
    spark, dbt, lakehouse_home, before_statement, status: str, kind: str = "rerun"
) -> str:
    """A backfill of 08:00 has logged its start (and not finished) when 09:00 plans, so
    09:00 restores the table to its base; just before 09:00 logs its own start, another
    attempt logs a row (`status`, `kind`). Returns 09:00's failure."""
    two_hourly_runs(spark, dbt, lakehouse_home)
    ingest(spark, 8, 30, [(C, "c", 3, "C")])
    log_another_backfill_of_eight(spark, "started")
    disarm = before_statement(STARTED, lambda: log_another_backfill_of_eight(spark, status, kind))
    result = build(dbt, lakehouse_home, "2024-10-07T09:00:00", expect_fail=True)
    disarm()
    return failure(result)


def test_a_run_that_restored_before_it_saw_the_other_run_is_left_unfinished(
    spark, dbt, lakehouse_home, clean_lakehouse, before_statement
) -> None:
    """A backfill of 08:00 is running when the scheduled 09:00 run plans: 09:00 takes the
    backfill's attempt for one that died and restores the table to its base (undoing
    what the backfill merged), then sees, once it has recorded its start, that the
    backfill succeeded. Refused as a run that wrote nothing, it would leave the next run
    starting after 08:00's window, and B would never come back; 09:00 is left
    unfinished, so the next run restores its base again and reads 08:00's window."""
    message = nine_restoring_beside(spark, dbt, lakehouse_home, before_statement, "succeeded")
    assert f"another run of {MODEL} (attempt other-rerun," in message
    assert "This run had restored its tables to the base of an attempt it took for one" in message
    assert rows(spark) == [(A, "A")]
    assert run_log(spark)[4:] == [
        ("08:00", "rerun", 1, "started"),
        ("08:00", "rerun", 1, "succeeded"),
        ("09:00", "incremental", 1, "started"),
    ]
    # Its base is the version it restored (08:00's base), not the table's version when
    # it logged its start: another run may have committed to the table in between.
    starts = [
        tuple(r)
        for r in spark.sql(
            "select date_format(execution_time, 'HH:mm'), base_version from ops.window_runs "
            f"where model = '{MODEL}' and status = 'started' "
            "order by _metadata.row_commit_version"
        ).collect()
    ]
    eight = starts[1][1]
    assert starts[1:] == [("08:00", eight), ("08:00", eight), ("09:00", eight)]

    build(dbt, lakehouse_home, "2024-10-07T10:00:00")
    assert rows(spark) == [(A, "A"), (B, "B"), (C, "C")]
    assert run_log(spark)[7:] == [
        ("10:00", "incremental", 1, "started"),
        ("10:00", "incremental", 1, "succeeded"),
    ]


def test_a_run_that_restored_beside_a_full_refresh_asks_for_another(
    spark, dbt, lakehouse_home, clean_lakehouse, before_statement
) -> None:
    """As above, but what starts beside the 09:00 run after it restored is a full
    refresh: the restore may have mixed the new lineage with the old, which no run can
    repair from the log, so 09:00 is refused and asks for a full refresh again."""
    message = nine_restoring_beside(
        spark, dbt, lakehouse_home, before_statement, "started", "create"
    )
    assert f"another run of {MODEL} (attempt other-create," in message
    assert "It is a full refresh" in message and "rebuild the model with --full-refresh" in message
    assert run_log(spark)[5:] == [
        ("08:00", "create", 1, "started"),
        ("09:00", "incremental", 1, "started"),
        ("09:00", "incremental", 1, "refused"),
    ]
