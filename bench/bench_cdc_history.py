"""The cdc_history materialization beside a dbt snapshot of the current state, in one run.

    python -m bench.bench_cdc_history [--keys 1000000] [--batches 3] [--quick]

Input: the change rows of the cdc_merge benchmark (bench/bench_cdc_merge.py, its
generator imported): a snapshot of `--keys` keys (op 'r'), then batches that each
change 1% of the keys with duplicates, deletes, late stale updates and keys changed 2-3
times out of lsn order. Each batch is appended with its own `_ingested_at`; then, per
batch, in the benchmark's dbt project (bench/cdc_project/):

  (a) ours: `dbt run --select bench_cdc_history` (`cdc_history`, unique_key id,
      sequence_by lsn, every carried column tracked), incremental;
  (b) what a dbt user does today: `dbt run --select bench_cdc_merge` (the current state,
      by cdc_merge; not in (b)'s time), then `dbt snapshot --select bench_cdc_snapshot`
      (strategy timestamp on updated_at, unique_key id, hard deletes invalidated), timed;
  (c) (b) with the cdc_merge build it reads: the cost of a snapshot where there is no
      current-state table anyway.

(a) and (b) take turns going first. The first builds are timed and reported apart (a
load, not a batch); one batch is a warm-up (not timed); the next `--batches` are timed
and their median reported.

True versions: computed in Spark SQL from the input alone (not from any table built):
each key's distinct changes in lsn order; a non-delete change opens a version when it is
the key's first, follows a delete, or its tracked columns (name, email, amount,
updated_at) differ from the change before; a delete of a live key closes its version.
A version opened in batch b is *late* when an earlier batch had a newer change of its
key, and *superseded* when a later change or delete of its key came in batch b: a
snapshot, which sees the state after the batch, can see neither. Counted over the timed
batches: the true versions bench_cdc_history holds (same key, valid_from and values),
and the rows each snapshot added (new `dbt_scd_id` since the snapshot before) that are a
true version of that batch (same key and values). bench_cdc_history is also checked row
for row against the whole truth (validity and flags included); a mismatch, or a dbt run
that fails, makes the exit status 1.

Everything lives in a scratch LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp (its own
catalog, warehouse and dbt target), deleted afterwards. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.bench_cdc_merge import (
    LSN_BATCH,
    START_MS,
    DbtRunFailed,
    Timing,
    append,
    batch_rows,
    describe_batch,
    ingested_at,
    machine,
    median,
    open_lakehouse,
    run_model,
    scratch_run,
    size_estimate,
    snapshot_rows,
)
from bench.bench_cdc_merge import OURS as CURRENT_STATE

HISTORY = "bench_cdc_history"
SNAPSHOT = "bench_cdc_snapshot"
SCALE = 1  # one table size: the tables are named <model>_1x
INPUT = f"silver.bench_cdc_input_{SCALE}x"
TRUTH = f"silver.bench_cdc_true_versions_{SCALE}x"
TRACKED = ("name", "email", "amount", "updated_at")
# The time a change's lsn stands for (its batch's hour plus the lsn's offset in ms):
# what bench_cdc_history's valid_from computes, written here on its own.
CHANGED_AT = (
    f"timestamp_millis({START_MS} + (lsn div {LSN_BATCH}) * 3600000 + lsn % {LSN_BATCH} % 3600000)"
)


# --- The truth: pure SQL over the input ---------------------------------------------


def true_versions_sql(input_table: str) -> str:
    """Every version the input implies, with the batch that opened it (`opened_in`) and
    whether a snapshot after that batch could not see it (`late`, `superseded`)."""
    tracked = ", ".join(TRACKED)
    return f"""
        with changes as (
            select distinct id, op, lsn, {tracked}, _ingested_at
            from {input_table}
        ),

        per_batch as (
            select
                id,
                _ingested_at,
                max(lsn) as batch_last_lsn,
                max(max(lsn)) over (
                    partition by id order by _ingested_at
                    rows between unbounded preceding and 1 preceding
                ) as earlier_last_lsn
            from changes
            group by id, _ingested_at
        ),

        ordered as (
            select
                id,
                lsn,
                {tracked},
                _ingested_at,
                op = 'd' as is_delete,
                {CHANGED_AT} as changed_at,
                lag(op = 'd') over by_key as after_delete,
                lag(struct({tracked})) over by_key as values_before
            from changes
            window by_key as (partition by id order by lsn)
        ),

        boundaries as (
            select *
            from ordered
            where
                case
                    when is_delete then coalesce(not after_delete, false)
                    else
                        after_delete is null
                        or after_delete
                        or not (struct({tracked}) <=> values_before)
                end
        ),

        versions as (
            select
                *,
                lead(changed_at) over by_key as valid_to,
                lead(is_delete) over by_key as closed_by_delete
            from boundaries
            window by_key as (partition by id order by lsn)
        ),

        final as (
            select
                versions.id,
                {", ".join(f"versions.{c}" for c in TRACKED)},
                versions.changed_at as valid_from,
                versions.valid_to,
                versions.valid_to is null as is_current,
                coalesce(versions.closed_by_delete, false) as _cdc_closed_by_delete,
                versions._ingested_at as opened_in,
                coalesce(versions.lsn < per_batch.earlier_last_lsn, false) as late,
                versions.lsn < per_batch.batch_last_lsn as superseded
            from versions
            inner join per_batch
                on versions.id = per_batch.id
                and versions._ingested_at = per_batch._ingested_at
            where not versions.is_delete
        )

        select * from final
    """


def write_truth(spark, input_table: str, truth_table: str) -> None:
    """The true versions as a table; fails if two copies of one change (key, lsn)
    differ, which the truth does not decide (the generator never makes them)."""
    clashes = spark.sql(
        f"select count(*) from (select distinct * from {input_table}) "
        "group by id, lsn having count(*) > 1"
    ).count()
    if clashes:
        raise RuntimeError(f"{clashes} (id, lsn) pairs have differing copies in {input_table}")
    spark.sql(true_versions_sql(input_table)).write.format("delta").saveAsTable(truth_table)


# --- Running it ---------------------------------------------------------------------


@dataclass
class Run:
    """The loads, the timed batches and the snapshot table's Delta version after the
    load and after each batch."""

    keys: int
    load: dict[str, Timing] = field(default_factory=dict)
    batches: dict[str, list[Timing]] = field(default_factory=dict)
    batch_rows: list[int] = field(default_factory=list)
    snapshot_versions: list[int] = field(default_factory=list)
    failed: str = ""


def build(target: Path, model: str) -> Timing:
    command = "snapshot" if model == SNAPSHOT else "run"
    return run_model(target, SCALE, model, command=command)


def delta_version(spark, table: str) -> int:
    return spark.sql(f"describe history {table} limit 1").first()["version"]


def run_batches(spark, target: Path, args: argparse.Namespace, run: Run) -> None:
    """Load, then each batch: append it, build (a) and (b) in turn. A dbt run that fails
    ends the run: `run.failed` says where and why."""
    label = f"[{run.keys:,} keys]"
    units = [[HISTORY], [CURRENT_STATE, SNAPSHOT]]
    snapshot_table = f"silver.{SNAPSHOT}_{SCALE}x"
    phase = "load"
    try:
        started = time.monotonic()
        append(spark, INPUT, snapshot_rows(spark, run.keys))
        spent = time.monotonic() - started
        print(f"{label} snapshot: {run.keys:,} 'r' rows written in {spent:.1f} s")
        for model in (HISTORY, CURRENT_STATE, SNAPSHOT):
            run.load[model] = build(target, model)
            print(f"{label} load {model}: {run.load[model].wall:.1f} s (first build, not a batch)")
        run.snapshot_versions.append(delta_version(spark, snapshot_table))

        for batch in range(1, args.batches + 2):
            phase = f"batch {batch}"
            frame = batch_rows(spark, run.keys, batch, args.keys // 100)
            rows, line = describe_batch(frame)
            append(spark, INPUT, frame)
            timings: dict[str, Timing] = {}
            for unit in units if batch % 2 else list(reversed(units)):
                for model in unit:
                    timings[model] = build(target, model)
            run.snapshot_versions.append(delta_version(spark, snapshot_table))
            warm_up = batch == 1
            if not warm_up:
                run.batch_rows.append(rows)
                for model, timing in timings.items():
                    run.batches.setdefault(model, []).append(timing)
            times = ", ".join(f"{m} {t.wall:.1f} s" for m, t in timings.items())
            kind = "warm-up, not timed" if warm_up else "timed"
            print(f"{label} batch {batch} ({kind}): {line}; {times}")
    except DbtRunFailed as error:
        run.failed = f"{error.model} failed in {phase}: {error.short}"
        print(f"{label} FAILED: {run.failed}")


@dataclass
class Capture:
    """The true versions of the timed batches and what each side captured of them."""

    true: int = 0
    late: int = 0
    superseded: int = 0
    history: int = 0
    snapshot: int = 0
    snapshot_rows: int = 0


def count_captured(spark, run: Run, timed: list[int]) -> Capture:
    """How many of the timed batches' true versions bench_cdc_history holds, and how
    many of the rows each snapshot added are a true version of its batch."""
    from pyspark.sql import functions as F

    truth = spark.table(TRUTH)
    history = spark.table(f"silver.{HISTORY}_{SCALE}x")
    snapshot_table = f"silver.{SNAPSHOT}_{SCALE}x"
    capture = Capture()
    values = ["id", *TRACKED]

    def same(left, right, columns: list[str]):
        condition = None
        for column in columns:
            part = left[column].eqNullSafe(right[column])
            condition = part if condition is None else condition & part
        return condition

    for batch in timed:
        opened = truth.where(F.col("opened_in") == F.lit(ingested_at(batch)))
        stats = opened.agg(
            F.count("*"),
            F.count_if(F.col("late")),
            F.count_if(F.col("superseded") & ~F.col("late")),
        )
        true, late, superseded = stats.first()
        capture.true += true
        capture.late += late
        capture.superseded += superseded
        keys = [*values, "valid_from"]
        capture.history += opened.join(history, same(opened, history, keys), "left_semi").count()
        before, after = run.snapshot_versions[batch - 1], run.snapshot_versions[batch]
        previous = spark.sql(f"select dbt_scd_id from {snapshot_table} version as of {before}")
        added = spark.sql(f"select * from {snapshot_table} version as of {after}").join(
            previous, "dbt_scd_id", "left_anti"
        )
        capture.snapshot_rows += added.count()
        capture.snapshot += added.join(opened, same(added, opened, values), "left_semi").count()
    return capture


def check_history(spark) -> str:
    """bench_cdc_history against every true version, row for row."""
    columns = ["id", *TRACKED, "valid_from", "valid_to", "is_current", "_cdc_closed_by_delete"]
    table = f"silver.{HISTORY}_{SCALE}x"
    expected = spark.table(TRUTH).select(*columns)
    got = spark.table(table).select(*columns)
    got_count, expected_count = got.count(), expected.count()
    differing = got.exceptAll(expected).count() + expected.exceptAll(got).count()
    verdict = "OK" if got_count == expected_count and differing == 0 else "MISMATCH"
    return (
        f"{table}: {got_count:,} versions, expected {expected_count:,} true versions, "
        f"{differing:,} rows differ from the expected rows - {verdict}"
    )


# --- Report -------------------------------------------------------------------------


def report(run: Run, capture: Capture | None, checks: list[str], batches: int) -> str:
    """The markdown table of the cases and loads, then what was captured and checked."""
    history = run.batches.get(HISTORY, [])
    reference = median(history) if history else None
    rows = [
        "| case | table keys | change rows per batch | s per batch | model s | vs (a) "
        "| true versions captured |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    merged = f"{statistics.median(run.batch_rows):,.0f}" if run.batch_rows else "-"

    def captured(count: int) -> str:
        if capture is None or not capture.true:
            return "-"
        return f"{count:,} of {capture.true:,} ({count / capture.true:.0%})"

    def line(case: str, timings: list[Timing], count: int) -> None:
        if not timings:
            rows.append(f"| {case} | {run.keys:,} | {merged} | - | - | FAILED (see below) | - |")
            return
        if len(timings) < batches:
            case += f" (median of {len(timings)} of {batches}, then FAILED)"
        else:
            case += f" (median of {len(timings)})"
        timing = median(timings)
        ratio = f"{timing.wall / reference.wall:.2f}x" if reference else "-"
        rows.append(
            f"| {case} | {run.keys:,} | {merged} | {timing.wall:.1f} | {timing.model:.1f} "
            f"| {ratio} | {captured(count)} |"
        )

    snapshots = run.batches.get(SNAPSHOT, [])
    merges = run.batches.get(CURRENT_STATE, [])
    pairs = zip(merges, snapshots, strict=True)
    both = [Timing(m.wall + s.wall, m.model + s.model) for m, s in pairs]
    line("(a) cdc_history incremental", history, capture.history if capture else 0)
    snapshot_case = "(b) dbt snapshot (timestamp) of the cdc_merge table"
    line(snapshot_case, snapshots, capture.snapshot if capture else 0)
    line("(c) (b) + the cdc_merge build it reads", both, capture.snapshot if capture else 0)
    for model, timing in run.load.items():
        rows.append(
            f"| load: first build of {model} | {run.keys:,} | {run.keys:,} | {timing.wall:.1f} "
            f"| {timing.model:.1f} | (load) | - |"
        )
    summary = []
    if capture is not None:
        visible = capture.true - capture.late - capture.superseded
        summary += [
            f"true versions opened in the {batches} timed batches: {capture.true:,}; "
            f"{capture.late:,} late (an earlier batch had a newer change of the key), "
            f"{capture.superseded:,} superseded within their batch (a later change or "
            f"delete of the key came in it): a snapshot can see the other {visible:,}",
            f"snapshot: {capture.snapshot_rows:,} rows added after the load, "
            f"{capture.snapshot:,} of them a true version of their batch",
        ]
    summary += [f"check: {c}" for c in checks]
    return "\n".join(rows + [""] + summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_cdc_history",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys (1,000,000)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 20,000 keys (overrides --keys)"
    )
    parser.add_argument("--batches", type=int, default=3, help="timed batches (3)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch lakehouse (and dbt's log)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.keys = 20_000
    if args.keys < 100 or args.batches < 1:
        parser.error("--keys must be >= 100, --batches >= 1")

    run = Run(args.keys)
    checks: list[str] = []
    capture = None
    with scratch_run("bench-cdc-history-", args.keep) as scratch:
        spark, target = open_lakehouse(scratch)
        print(
            f"cdc_history bench: {args.keys:,} keys, batches of {args.keys // 100:,} keys, "
            f"{args.batches} timed (+1 warm-up); scratch {scratch}"
        )
        print(f"machine: {machine()} at the start")
        run_batches(spark, target, args, run)
        if run.failed:
            checks.append(run.failed)
        else:
            write_truth(spark, INPUT, TRUTH)
            capture = count_captured(spark, run, list(range(2, args.batches + 2)))
            checks.append(check_history(spark))
            for table in (HISTORY, SNAPSHOT):
                checks.append(size_estimate(spark, f"silver.{table}_{SCALE}x"))
        print()
        print(report(run, capture, checks, args.batches))
    failed = bool(run.failed) or any(c.endswith("MISMATCH") for c in checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
