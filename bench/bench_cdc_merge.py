"""The cdc_merge materialization beside dbt-spark's own incremental merge, in one run.

    python -m bench.bench_cdc_merge [--keys 1000000] [--scales 1,4,16] [--quick]

Input: a Delta table of change rows (id, op, lsn, name, email, amount, updated_at,
_ingested_at), generated with Spark: an initial snapshot (op 'r', one row per key),
then batches that each change 1% of the keys with chaos: ~5% of the rows duplicated,
~10% of the keys with 2-3 changes out of lsn order, ~5% deletes, and late stale updates
(lsn lower than the key's current one). Each batch is appended with its own
`_ingested_at`; then one dbt run per model (only that model selected) is timed. Models:
bench/cdc_project/.

  (a) ours: `cdc_merge` (unique_key id, sequence_by lsn), incremental, one batch;
  (b) dbt-spark's `incremental` materialization, merge on id, file_format delta, over a
      row_number() pre-dedup of the same batch (deletes cannot be expressed; a stale
      update overwrites the newer row): what a dbt user writes today;
  (c) `--full-refresh` of ours: a rebuild from every change row;
  (d) ours, incremental, on tables of 4x and 16x the keys with the same batch size.

The first build of each table is timed and reported apart (a load, not a batch). One
batch per table is a warm-up (not timed); the next `--batches` are timed and their
median reported. At the end the table built by ours is checked against the expected
current state computed in Spark from the input: its row count (the live keys) and, at
1x, every row; and the size the query planner assumes for each table (it picks
broadcast joins by it) beside the size of its Delta files. A dbt run that fails ends
its size's part: the table says where and why, and the exit status is 1. A size whose
part (ours only) is projected to take longer than `--part-budget` seconds, on a line
through the two sizes before it, is skipped, and the table says so. Timings share the
machine: the load average is printed with them.

Everything lives in a scratch LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp (its own
catalog, warehouse and dbt target), deleted afterwards. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

PROJECT = Path(__file__).resolve().parent / "cdc_project"
OURS = "bench_cdc_merge"
BASELINE = "bench_dbt_incremental"

SEED = 42
# lsn = batch * LSN_BATCH + LSN_OFFSET + 4 * row + change: every batch's changes are
# newer than the batch before, and a stale update of batch b (lsn below
# (b - 1) * LSN_BATCH + LSN_OFFSET) is older than any change of batch b - 1.
LSN_BATCH = 10**12
LSN_OFFSET = 10**9
START = datetime(2024, 10, 7)
START_MS = int((START - datetime(1970, 1, 1)).total_seconds() * 1000)


# --- Change rows: pure DataFrame builders -------------------------------------------


def seeded_hash(modulo: int, *parts):
    """A deterministic pseudo-random number in [0, modulo) of the seed and `parts`
    (columns, or values taken as literals)."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    columns = [p if isinstance(p, Column) else F.lit(p) for p in parts]
    return F.pmod(F.xxhash64(F.lit(SEED), *columns), F.lit(modulo))


def percent(*parts):
    return seeded_hash(100, *parts)


def ingested_at(batch: int) -> datetime:
    """Batch 0 (the snapshot) at 00:30 on the start day, batch b b hours later."""
    return START + timedelta(hours=batch, minutes=30)


def batch_key(batch: int, row, keys: int):
    """The key of row `row` of batch `batch` (>= 1) over `keys` keys."""
    return seeded_hash(keys, "key", batch, row)


def _with_values(frame, batch: int):
    """The payload columns of change rows (null for a delete, as Debezium sends it)."""
    from pyspark.sql import functions as F

    deleted = F.col("op") == "d"
    values = {
        "name": F.concat(F.lit("name "), F.col("id"), F.lit(f" v{batch}."), F.col("k")),
        "email": F.concat(
            F.lit("user"), F.col("id"), F.lit(f"+{batch}."), F.col("k"), F.lit("@example.com")
        ),
        "amount": (seeded_hash(10**8, "amount", batch, F.col("row"), F.col("k")) / 100).cast(
            "decimal(12,2)"
        ),
        "updated_at": F.timestamp_millis(
            F.lit(START_MS + batch * 3_600_000) + F.col("lsn") % LSN_BATCH % 3_600_000
        ),
    }
    return frame.select(
        "id",
        "op",
        "lsn",
        *[F.when(~deleted, column).alias(name) for name, column in values.items()],
        F.lit(ingested_at(batch)).alias("_ingested_at"),
        # Kept for the statistics and the physical order; dropped before writing.
        "row",
        "k",
        "kind",
    )


def snapshot_rows(spark, keys: int):
    """The initial snapshot: one 'r' row per key 0..keys-1 (batch 0)."""
    from pyspark.sql import functions as F

    frame = spark.range(keys).select(
        F.col("id"),
        F.lit("r").alias("op"),
        (F.lit(LSN_OFFSET) + 4 * F.col("id")).alias("lsn"),
        F.col("id").alias("row"),
        F.lit(0).alias("k"),
        F.lit("snapshot").alias("kind"),
    )
    return _with_values(frame, 0)


def batch_rows(spark, keys: int, batch: int, size: int):
    """Batch `batch` (>= 1): `size` keys changed, with duplicates, multi-change keys out
    of lsn order, deletes and late stale updates, in a shuffled physical order."""
    from pyspark.sql import functions as F

    row = F.col("id")
    changes = (
        spark.range(size)
        .select(
            row.alias("row"),
            batch_key(batch, row, keys).alias("id"),
            F.when(percent("multi", batch, row) < 5, 3)
            .when(percent("multi", batch, row) < 10, 2)
            .otherwise(1)
            .alias("n"),
        )
        .select("row", "id", F.explode(F.sequence(F.lit(0), F.col("n") - 1)).alias("k"))
        .select(
            "id",
            F.when(percent("op", batch, F.col("row"), F.col("k")) < 5, "d")
            .otherwise("u")
            .alias("op"),
            (F.lit(batch * LSN_BATCH + LSN_OFFSET) + 4 * F.col("row") + F.col("k")).alias("lsn"),
            "row",
            "k",
            F.lit("change").alias("kind"),
        )
    )
    changes = _with_values(changes, batch)
    duplicates = changes.where(percent("dup", batch, F.col("row"), F.col("k")) < 5).withColumn(
        "kind", F.lit("duplicate")
    )
    # Stale updates: keys that changed in the batch before (any key after the snapshot),
    # with an lsn below every change of that batch.
    stale_rows = max(1, size // 100)
    previous = (
        seeded_hash(keys, "stale", batch, row) if batch == 1 else batch_key(batch - 1, row, keys)
    )
    stale = spark.range(stale_rows).select(
        previous.alias("id"),
        F.lit("u").alias("op"),
        (F.lit((batch - 1) * LSN_BATCH) + row).alias("lsn"),
        row.alias("row"),
        F.lit(9).alias("k"),
        F.lit("stale").alias("kind"),
    )
    rows = changes.unionByName(duplicates).unionByName(_with_values(stale, batch))
    return rows.orderBy(seeded_hash(2**62, "order", F.col("lsn"), F.col("kind")))


def expected_state(spark, table: str):
    """The current state the input implies: each key's newest change by lsn, unless it
    is a delete."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest = Window.partitionBy("id").orderBy(F.col("lsn").desc())
    return (
        spark.table(table)
        .withColumn("_rank", F.row_number().over(newest))
        .where("_rank = 1 and op != 'd'")
        .select("id", "lsn", "name", "email", "amount", "updated_at", "_ingested_at")
    )


# --- Running it ---------------------------------------------------------------------


@dataclass
class Timing:
    """One dbt run: the invocation's wall time and the model's own time (the sum of its
    models' when it runs several, each in `nodes`)."""

    wall: float
    model: float
    nodes: dict[str, float] = field(default_factory=dict)


@dataclass
class Part:
    """One table size: its load, its timed batches, and what the check found."""

    scale: int
    keys: int
    load: dict[str, Timing] = field(default_factory=dict)
    batches: dict[str, list[Timing]] = field(default_factory=dict)
    batch_rows: list[int] = field(default_factory=list)
    full_refresh: Timing | None = None
    change_rows: int = 0
    skipped: str = ""
    failed: str = ""


def run_model(target: Path, scale: int, model: str, *extra: str, command: str = "run") -> Timing:
    """`dbt run --select model` (or another `command`, e.g. `snapshot`) of the benchmark
    project, timed; raises if it fails."""
    args = [
        "--quiet",
        command,
        "--project-dir", str(PROJECT),
        "--target-path", str(target),
        "--vars", json.dumps({"bench_scale": scale}),
        "--select", model,
        *extra,
    ]  # fmt: skip
    return run_dbt(args, model)


def run_dbt(args: list[str], name: str, nodes: int | None = 1) -> Timing:
    """One dbt command in this process, timed: its wall time and the sum of its nodes'
    own times (each node's in `Timing.nodes`); raises unless it succeeds with exactly
    `nodes` nodes, hooks aside (None: any number)."""
    from python_jobs.run_dbt import invoke

    started = time.monotonic()
    result = invoke(args)
    wall = time.monotonic() - started
    # The project's on-run-start hooks are results too, not counted as nodes.
    results = getattr(result.result, "results", None) or []
    ran = [n for n in results if n.node.resource_type != "operation"]
    if not result.success or not ran or (nodes is not None and len(ran) != nodes):
        messages = [f"{n.node.unique_id}: {n.status}: {n.message}" for n in ran]
        raise DbtRunFailed(name, f"{result.exception or ''} {messages}")
    per_node = {n.node.name: n.execution_time for n in ran}
    return Timing(wall, sum(per_node.values()), per_node)


class DbtRunFailed(RuntimeError):
    """A dbt run of one model failed; `short` is its first exception line."""

    def __init__(self, model: str, message: str) -> None:
        super().__init__(f"{model}: {message}")
        self.model = model
        found = re.search(r"[\w.$]+(?:Exception|Error): [^\n\\']*", message)
        self.short = (found.group(0) if found else message.strip() or "unknown error")[:200]


def describe_batch(frame) -> tuple[int, str]:
    """The batch's row count and a line on its chaos."""
    from pyspark.sql import functions as F

    stats = (
        frame.groupBy()
        .agg(
            F.count("*"),
            F.countDistinct("id"),
            F.count_if(F.col("kind") == "duplicate"),
            F.count_if(F.col("op") == "d"),
            F.count_if(F.col("kind") == "stale"),
            F.count_if((F.col("kind") == "change") & (F.col("k") > 0)),
        )
        .first()
    )
    rows, keys, duplicates, deletes, stale, extra = stats
    return rows, (
        f"{rows:,} change rows for {keys:,} keys: {extra:,} second/third changes, "
        f"{duplicates:,} duplicates, {deletes:,} deletes, {stale:,} stale updates"
    )


def append(spark, table: str, frame) -> None:
    """Appends a batch in one commit, laid out as Bronze (`bronze.append_as_bronze`:
    the models' window is the rows' commit version)."""
    from python_jobs import bronze

    bronze.append_as_bronze(frame.drop("row", "k", "kind"), table)


def check(spark, input_table: str, table: str, rows_too: bool) -> tuple[int, int, int]:
    """(rows in the table, live keys expected, rows that differ): the last is -1 when
    only the counts were compared."""
    expected = expected_state(spark, input_table)
    got = spark.table(table).select(*expected.columns)
    actual_count, expected_count = got.count(), expected.count()
    differing = -1
    if rows_too:
        differing = got.exceptAll(expected).count() + expected.exceptAll(got).count()
    return actual_count, expected_count, differing


def run_part(spark, target: Path, args: argparse.Namespace, scale: int, part: Part) -> list[str]:
    """Build the tables of one size, time its batches; returns the check's lines. A dbt
    run that fails ends the size's part: `part.failed` says where and why."""
    keys, batch_size = part.keys, args.keys // 100
    input_table = f"silver.bench_cdc_input_{scale}x"
    ours_table = f"silver.bench_cdc_merge_{scale}x"
    models = [OURS, BASELINE] if scale == 1 else [OURS]
    label = f"[{scale}x, {keys:,} keys]"
    lines: list[str] = []
    phase = "load"
    try:
        started = time.monotonic()
        snapshot = snapshot_rows(spark, keys).drop("row", "k", "kind")
        append(spark, input_table, snapshot)
        print(f"{label} snapshot: {keys:,} 'r' rows written in {time.monotonic() - started:.1f} s")
        for model in models:
            part.load[model] = run_model(target, scale, model)
            print(f"{label} load {model}: {part.load[model].wall:.1f} s (first build, not a batch)")

        for batch in range(1, args.batches + 2):
            phase = f"batch {batch}"
            frame = batch_rows(spark, keys, batch, batch_size)
            rows, line = describe_batch(frame)
            append(spark, input_table, frame)
            warm_up = batch == 1
            order = models if batch % 2 else list(reversed(models))
            timings = {}
            for model in order:
                timings[model] = run_model(target, scale, model)
                if not warm_up:
                    part.batches.setdefault(model, []).append(timings[model])
            if not warm_up:
                part.batch_rows.append(rows)
            times = ", ".join(f"{m} {t.wall:.1f} s" for m, t in timings.items())
            kind = "warm-up, not timed" if warm_up else "timed"
            print(f"{label} batch {batch} ({kind}): {line}; {times}")

        got, expected, differing = check(spark, input_table, ours_table, scale == 1)
        lines.append(_check_line(f"{ours_table} (incremental)", got, expected, differing))
        if scale == 1:
            phase = "full refresh"
            lines.append(size_estimate(spark, ours_table) + " (before the full refresh)")
            part.change_rows = spark.table(input_table).count()
            part.full_refresh = run_model(target, scale, OURS, "--full-refresh")
            print(
                f"{label} full refresh {OURS}: {part.change_rows:,} change rows in "
                f"{part.full_refresh.wall:.1f} s"
            )
            got, expected, differing = check(spark, input_table, ours_table, True)
            lines.append(_check_line(f"{ours_table} (full refresh)", got, expected, differing))
            baseline = f"silver.bench_dbt_incremental_{scale}x"
            total = spark.table(baseline).count()
            kept = spark.table(baseline).where("op = 'd'").count()
            lines.append(
                f"baseline {baseline}: {total:,} rows ({kept:,} of them deletes kept as "
                f"rows; expected {expected:,} live keys) - it cannot express deletes, as stated"
            )
            lines.append(size_estimate(spark, baseline))
    except DbtRunFailed as error:
        part.failed = f"{error.model} failed in {phase}: {error.short}"
        print(f"{label} FAILED: {part.failed}")
        lines.append(f"{scale}x: {part.failed}")
    after = " (after the full refresh)" if part.full_refresh else ""
    lines.append(size_estimate(spark, ours_table) + after)
    for line in lines:
        print(f"{label} check: {line}")
    return lines


def size_estimate(spark, table: str) -> str:
    """What the planner believes a table's size is (it picks broadcast joins by it)
    beside the size of the Delta table's files."""
    plan = spark.sql(f"explain cost select * from {table}").first()[0]
    found = re.search(r"sizeInBytes=([^,)]+)", plan)
    actual = spark.sql(f"describe detail {table}").select("sizeInBytes").first()[0]
    estimate = found.group(1) if found else "unknown"
    return (
        f"size estimate: {table}: planner {estimate}, Delta files {actual / 2**20:,.1f} MiB"
        f"{' - STALE' if found and _bytes(estimate) < actual / 10 else ''}"
    )


def _bytes(text: str) -> float:
    """`1005.0 B`, `35.7 MiB` (Spark's byte strings) as bytes."""
    number, unit = text.split()
    return float(number) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)


def _check_line(table: str, got: int, expected: int, differing: int) -> str:
    verdict = "OK" if got == expected and differing <= 0 else "MISMATCH"
    rows = "" if differing < 0 else f", {differing:,} rows differ from the expected rows"
    return f"{table}: {got:,} rows, expected {expected:,} live keys{rows} - {verdict}"


# --- Report -------------------------------------------------------------------------


def report(parts: list[Part], checks: list[str], args: argparse.Namespace) -> str:
    """The markdown table of every case, then the growth and the checks."""
    base = parts[0]
    reference = median(base.batches[OURS]) if base.batches.get(OURS) else None
    rows = [
        "| case | table keys | rows merged | dbt run s | model s | vs (a) |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def line(case: str, keys: int, merged: str, timing: Timing | None, note: str = "") -> None:
        if timing is None:
            rows.append(f"| {case} | {keys:,} | {merged} | - | - | {note} |")
            return
        ratio = note or (f"{timing.wall / reference.wall:.2f}x" if reference else "-")
        rows.append(
            f"| {case} | {keys:,} | {merged} | {timing.wall:.1f} | {timing.model:.1f} | {ratio} |"
        )

    def timed(part: Part, model: str, case: str) -> None:
        timings = part.batches.get(model, [])
        merged = f"{statistics.median(part.batch_rows):,.0f}" if part.batch_rows else "-"
        if part.skipped:
            line(case, part.keys, "-", None, f"not run: {part.skipped}")
        elif not timings:
            line(case, part.keys, merged, None, "FAILED (see below)")
        elif len(timings) < args.batches:
            label = f"median of {len(timings)} of {args.batches}, then FAILED"
            line(f"{case} ({label})", part.keys, merged, median(timings))
        else:
            line(f"{case} (median of {len(timings)})", part.keys, merged, median(timings))

    timed(base, OURS, "(a) cdc_merge incremental, 1x")
    timed(base, BASELINE, "(b) dbt incremental merge + row_number dedup, 1x")
    if base.full_refresh:
        line(
            "(c) cdc_merge --full-refresh, 1x (1 run)",
            base.keys,
            f"{base.change_rows:,}",
            base.full_refresh,
        )
    else:
        line("(c) cdc_merge --full-refresh, 1x", base.keys, "-", None, "not run")
    for part in parts[1:]:
        timed(part, OURS, f"(d) cdc_merge incremental, {part.scale}x")
    for part in parts:
        for model, timing in part.load.items():
            case = f"load: first build of {model}, {part.scale}x"
            line(case, part.keys, f"{part.keys:,}", timing, "(load)")
    summary = []
    grown = [p for p in parts[1:] if p.batches.get(OURS)]
    if reference and grown:
        top = grown[-1]
        timing = median(top.batches[OURS])
        summary.append(
            f"incremental growth: a {top.scale}x table ({top.keys:,} keys) takes "
            f"{timing.wall / reference.wall:.2f}x the 1x time for the same batch size "
            f"(model time {timing.model / reference.model:.2f}x)"
        )
    summary += [f"check: {c}" for c in checks]
    return "\n".join(rows + [""] + summary)


def median(timings: list[Timing]) -> Timing:
    return Timing(
        statistics.median(t.wall for t in timings), statistics.median(t.model for t in timings)
    )


def machine() -> str:
    """Cores and load: other processes on the machine slow every number down."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average {load} (1, 5, 15 min)"


def project(done: list[tuple[int, float]], keys: int) -> float | None:
    """The seconds a size's part should take, on a line through the last two sizes done
    (fixed costs and per-key costs apart); None with fewer than two (it runs)."""
    if len(done) < 2:
        return None
    (k1, s1), (k2, s2) = done[-2:]
    per_key = max(0.0, (s2 - s1) / (k2 - k1))
    return s2 + per_key * (keys - k2)


def scratch_lakehouse(prefix: str) -> Path:
    """A lakehouse of its own (catalog, warehouse, dbt target) in a new directory under
    $LAKEHOUSE_HOME/tmp, set before the session starts: the user's lakehouse is never
    touched. Returns the directory (the caller deletes it)."""
    from python_jobs.spark import paths

    paths()["tmp"].mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=paths()["tmp"]))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    for name in ("DBT_TARGET_PATH", "DBT_LOG_PATH", "DBT_TARGET"):
        os.environ.pop(name, None)
    return scratch


@contextmanager
def scratch_run(prefix: str, keep: bool) -> Iterator[Path]:
    """One benchmark run on a scratch lakehouse (:func:`scratch_lakehouse`): yields its
    directory; at the end prints the run's wall time and the machine's load, then keeps
    the directory (`--keep`) or deletes it."""
    scratch = scratch_lakehouse(prefix)
    started = time.monotonic()
    try:
        yield scratch
        print(f"\ntotal wall time: {time.monotonic() - started:.0f} s; {machine()} at the end")
    finally:
        if keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def open_lakehouse(scratch: Path):
    """The session on the scratch lakehouse, its schemas created, and dbt's target path."""
    from python_jobs.spark import get_spark

    spark = get_spark()
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    return spark, scratch / "home" / "dbt" / "bench_target"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_cdc_merge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys at 1x (1,000,000)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 20,000 keys (overrides --keys)"
    )
    parser.add_argument(
        "--scales", default="1,4,16", help="table sizes as multiples of --keys, 1 first (1,4,16)"
    )
    parser.add_argument("--batches", type=int, default=3, help="timed batches per size (3)")
    parser.add_argument(
        "--part-budget",
        type=float,
        default=600.0,
        help="skip a size projected to take longer, in seconds (600)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch lakehouse (and dbt's log)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.keys = 20_000
    scales = [int(s) for s in args.scales.split(",")]
    if scales[0] != 1 or args.keys < 100 or args.batches < 1:
        parser.error("--scales must start with 1, --keys be >= 100, --batches >= 1")

    parts: list[Part] = []
    checks: list[str] = []
    with scratch_run("bench-cdc-merge-", args.keep) as scratch:
        spark, target = open_lakehouse(scratch)
        print(
            f"cdc_merge bench: {args.keys:,} keys at 1x, sizes {args.scales}, batches of "
            f"{args.keys // 100:,} keys, {args.batches} timed (+1 warm-up); scratch {scratch}"
        )
        print(f"machine: {machine()} at the start")
        done: list[tuple[int, float]] = []  # (keys, seconds) of ours' part per size
        for scale in scales:
            part = Part(scale, args.keys * scale)
            parts.append(part)
            projected = project(done, part.keys)
            if projected is not None and projected > args.part_budget:
                part.skipped = f"projected {projected / 60:.0f} min > budget"
                print(f"[{scale}x] skipped: {part.skipped} ({args.part_budget / 60:.0f} min)")
                continue
            part_started = time.monotonic()
            checks += run_part(spark, target, args, scale, part)
            print(f"[{scale}x] done in {time.monotonic() - part_started:.0f} s")
            if part.failed:
                for later in scales[scales.index(scale) + 1 :]:
                    parts.append(
                        Part(later, args.keys * later, skipped=f"the {scale}x part failed")
                    )
                break
            # Ours only, for the projection of the next size (1x also ran the baseline).
            spent = time.monotonic() - part_started
            if scale == 1:
                spent -= sum(t.wall for t in part.batches[BASELINE])
                spent -= part.load[BASELINE].wall + part.full_refresh.wall
            done.append((part.keys, spent))
            if scale != 1:
                for table in (f"bench_cdc_input_{scale}x", f"bench_cdc_merge_{scale}x"):
                    spark.sql(f"drop table if exists silver.{table}")
        print()
        print(report(parts, checks, args))
    failed = any(p.failed for p in parts) or any(c.endswith("MISMATCH") for c in checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
