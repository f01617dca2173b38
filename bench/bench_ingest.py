"""Ingestion throughput beside its floor, in one run on the same files.

    python -m bench.bench_ingest [--days 5] [--changes-per-day 100000] [--visits-per-day 50000]

1. The simulator writes its workload (default chaos) into a scratch landing zone.
2. Floor: a plain Spark batch copy of the same files into a Delta table, one row per
   line, with no parsing, no classification, no dead letters, no batch log.
3. Ingestion: `python_jobs.ingest` (available now) over the same files, with a fresh
   checkpoint and fresh tables: split, parse, classify, three idempotent appends per
   micro-batch.

Prints records per second for both and the ratio. Both sides run once over a small
workload first (not measured), so neither pays the JVM's warm-up. Everything lives in a scratch
LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp, deleted afterwards. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from bench.workload import add_size_arguments, simulate_workload


def _copy(spark, landing: Path, target: Path) -> None:
    """The floor: every topic's landing lines copied into one Delta table, as is."""
    from python_jobs.topics import load_topics

    files = [str(landing / t.topic) for t in load_topics()]
    copy = spark.read.option("pathGlobFilter", "*.json").option("lineSep", "\n").text(files)
    copy.write.format("delta").save(str(target))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_ingest", description=__doc__)
    add_size_arguments(
        parser,
        users=50_000,
        articles=10_000,
        days=5,
        changes_per_day=100_000,
        visits_per_day=50_000,
    )
    parser.add_argument("--max-files-per-batch", type=int, default=100)
    args = parser.parse_args(argv)

    from python_jobs.spark import paths

    scratch = paths()["tmp"] / "bench-ingest"
    shutil.rmtree(scratch, ignore_errors=True)
    # A lakehouse of its own: fresh Bronze, dead letters, batch log and checkpoints.
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    from python_jobs import bronze, ingest
    from python_jobs.spark import get_spark

    landing = scratch / "landing"
    try:
        started = time.monotonic()
        events = simulate_workload(landing, scratch / "truth", args).total_events
        print(f"workload: {events:,} events simulated in {time.monotonic() - started:.1f} s")
        spark = get_spark(catalog=False)
        # Warm-up, not measured: both sides once over a small workload of the same
        # shape, so that neither pays the JVM's JIT and Spark's code generation.
        small = argparse.Namespace(
            users=500, articles=100, days=1, changes_per_day=5_000, visits_per_day=2_000
        )
        simulate_workload(scratch / "warm-up" / "landing", scratch / "warm-up" / "truth", small)
        _copy(spark, scratch / "warm-up" / "landing", scratch / "warm-up" / "floor")
        os.environ["LAKEHOUSE_HOME"] = str(scratch / "warm-up" / "home")
        ingest.run(ingest.IngestOptions(landing=scratch / "warm-up" / "landing"))
        os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")

        started = time.monotonic()
        _copy(spark, landing, scratch / "floor")
        floor_seconds = time.monotonic() - started
        lines = spark.read.format("delta").load(str(scratch / "floor")).count()

        started = time.monotonic()
        ingest.run(ingest.IngestOptions(landing=landing, max_files=args.max_files_per_batch))
        ingest_seconds = time.monotonic() - started
        log = spark.read.format("delta").load(bronze.batches_path()).where("not is_heartbeat")
        totals = log.groupBy().sum("records_read", "bronze_rows", "dead_letters", "tombstones")
        read, kept, dead, tombstones = totals.first()
        batches = log.count()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert read == lines, f"ingestion read {read} records, the copy {lines} lines"
    floor_rate, ingest_rate = lines / floor_seconds, read / ingest_seconds
    print(
        f"floor:     {lines:,} lines copied in {floor_seconds:.1f} s = {floor_rate:,.0f} records/s"
    )
    print(
        f"ingestion: {read:,} records ({kept:,} Bronze, {dead:,} dead letters, "
        f"{tombstones:,} tombstones) in {batches} micro-batches, {ingest_seconds:.1f} s "
        f"= {ingest_rate:,.0f} records/s"
    )
    print(f"ratio:     ingestion runs at {ingest_rate / floor_rate:.2f} x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
