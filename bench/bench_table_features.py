"""Reads of a table only ever appended to: with and without deletion vectors, and with
row tracking.

    python -m bench.bench_table_features [--appends 40] [--rows 20] [--repeats 5] [--keep]

Three Delta tables with the run log's columns (`ops.window_runs`) and the same rows,
made by the same appends (`--appends` commits of `--rows` rows each): one created as
every new table is (the session turns deletion vectors on: python_jobs/spark.py), one
without them, as the tables only appended to are created (`python_jobs.bronze.APPENDED_ONLY`,
the macro `_appended_table_properties()`), and one without them and with row tracking,
as the run log is (`_commit_ordered_table_properties()`), read in the order of its commits
(`_metadata.row_commit_version`, as `_window_plan` orders the attempts). For each,
taking turns, `--repeats` times:

    warm     the run log's read of one model's rows (a filter and a sort, collected),
             the table's snapshot already loaded
    append   one more append (a commit of `--rows` rows, as a run appends to the log)
    appended the same read after it (a new snapshot)

Each prints its median wall time and the Spark jobs it ran (a job group per step).
Checks (a failure makes the exit status 1): the tables return the same rows in every
read. Everything lives in a scratch LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp, deleted
afterwards (`--keep` keeps it). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta
from functools import partial

from bench.bench_cdc_merge import machine, scratch_run

COLUMNS = (
    "model string not null, attempt_id string not null, execution_time timestamp not null, "
    "run_kind string not null, window_start bigint, window_end bigint, "
    "base_version bigint not null, version_after bigint, status string not null, "
    "recorded_at timestamp not null"
)
# label: (table, its properties, the order the run log's read sorts it by)
BY_TIME = "recorded_at, attempt_id"
TABLES = {
    "with deletion vectors (the default)": ("bench.log_with_dv", "", BY_TIME),
    "without (appended only)": (
        "bench.log_without_dv",
        "tblproperties ('delta.enableDeletionVectors' = 'false')",
        BY_TIME,
    ),
    # In its commits' order (one commit per append, so the same order).
    "without, row tracking (the run log)": (
        "bench.log_row_tracking",
        "tblproperties ('delta.enableDeletionVectors' = 'false', "
        "'delta.enableRowTracking' = 'true')",
        f"_metadata.row_commit_version, {BY_TIME}",
    ),
}
READ = "select * from {table} where model = 'model_3' order by {order}"


def append(spark, table: str, commit: int, rows: int) -> None:
    """One commit of `rows` run-log rows, the same for every table."""
    start = datetime(2024, 10, 7) + timedelta(minutes=commit)
    values = ", ".join(
        f"('model_{n % 7}', 'a{commit}-{n}', timestamp'{start}', 'incremental', {commit}, "
        f"{commit + 1}, {commit}, {commit + 1}, 'succeeded', timestamp'{start}')"
        for n in range(rows)
    )
    spark.sql(f"insert into {table} values {values}")


def timed(spark, group: str, action):
    """(seconds, Spark jobs, result) of `action()`, its jobs in the job group `group`."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        started = time.monotonic()
        result = action()
        seconds = time.monotonic() - started
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return seconds, len(context.statusTracker().getJobIdsForGroup(group)), result


def timed_read(spark, table: str, order: str, group: str) -> tuple[float, int, list[tuple]]:
    """(seconds, Spark jobs, rows) of the run log's read."""
    query = READ.format(table=table, order=order)
    return timed(spark, group, lambda: [tuple(r) for r in spark.sql(query).collect()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_table_features")
    parser.add_argument("--appends", type=int, default=40, help="commits before the reads")
    parser.add_argument("--rows", type=int, default=20, help="rows per commit")
    parser.add_argument("--repeats", type=int, default=5, help="reads of each kind")
    parser.add_argument("--keep", action="store_true", help="keep the scratch lakehouse")
    args = parser.parse_args(argv)
    with scratch_run("bench-table-features-", args.keep):
        from python_jobs.spark import get_spark

        spark = get_spark()
        spark.sql("create database if not exists bench")
        for table, properties, _ in TABLES.values():
            spark.sql(f"create table {table} ({COLUMNS}) using delta {properties}")
            for commit in range(args.appends):
                append(spark, table, commit, args.rows)
        print(
            f"{len(TABLES)} tables of {args.appends} appends of {args.rows} rows; "
            f"{args.repeats} of each step, taking turns; {machine()}"
        )
        seen: dict[str, dict[str, list[tuple[float, int]]]] = {
            label: {"warm": [], "append": [], "appended": []} for label in TABLES
        }
        mismatches = 0
        commit = args.appends
        for repeat in range(args.repeats):
            for kind in ("warm", "appended"):
                results = {}
                for label, (table, _, order) in TABLES.items():
                    if kind == "appended":
                        seconds, jobs, _ = timed(
                            spark,
                            f"{table}-append-{repeat}",
                            partial(append, spark, table, commit, args.rows),
                        )
                        seen[label]["append"].append((seconds, jobs))
                    else:
                        timed_read(spark, table, order, f"{table}-warmup-{repeat}")
                    group = f"{table}-{kind}-{repeat}"
                    seconds, jobs, rows = timed_read(spark, table, order, group)
                    seen[label][kind].append((seconds, jobs))
                    results[label] = rows
                if kind == "appended":
                    commit += 1
                first, *others = results.values()
                mismatches += sum(1 for rows in others if rows != first)
        baseline = next(iter(TABLES))
        print(f"\n{'table':<38}{'step':>10}{'median s':>10}{'jobs':>6}{'vs default':>12}")
        for kind in ("warm", "append", "appended"):
            base = statistics.median(s for s, _ in seen[baseline][kind])
            for label in TABLES:
                times = [s for s, _ in seen[label][kind]]
                jobs = sorted({j for _, j in seen[label][kind]})
                median = statistics.median(times)
                print(
                    f"{label:<38}{kind:>10}{median:>10.3f}"
                    f"{'/'.join(map(str, jobs)):>6}{median / base:>11.2f}x"
                )
        print(f"\ncheck: the tables returned the same rows in every read: {mismatches == 0}")
        return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
