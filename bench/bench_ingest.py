"""Ingestion throughput beside a hand-written job and the copy floor, in one run.

    python -m bench.bench_ingest [--days 5] [--changes-per-day 100000] [--no-kafka]

Files (the simulator's workload, default chaos, in a scratch landing zone):

1. Floor: a plain Spark batch copy of the landing lines into one Delta table, as is.
2. Hand-written: what a data engineer writes by hand today, one Structured Streaming
   query per topic reading the same files, `from_json` with an explicit schema (the
   Debezium envelope, bare or wrapped, with each table's columns; the visit event),
   appended to Delta: no dead letters, no batch log, no positions, no exactly-once.
3. Ours: `python_jobs.ingest` (available now) over the same files, fresh checkpoints
   and tables: Bronze, dead letters with reasons, the batch log, exactly once.

Kafka (unless --no-kafka): the same workload written by the simulator to the project's
broker (python_jobs/tools/kafka_broker.py, loopback, in the scratch home), then the
hand-written job and ours reading the same topics from the earliest offset.

Prints records per second for each and the ratios, then checks the outputs row for
row: the hand-written tables hold one row per record read; ours holds every record
once, with its exact `_raw` (Bronze + dead letters = the non-tombstone lines, compared
by count and checksum), and counts tombstones for the rest. Everything runs once over
a small workload first (not measured), so nothing pays the JVM's warm-up. Everything
lives in a scratch LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp, deleted afterwards. A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.workload import add_size_arguments, simulate_workload

_SOURCE = (
    "struct<version: string, connector: string, name: string, ts_ms: bigint, snapshot: "
    "string, db: string, sequence: string, schema: string, table: string, txId: bigint, "
    "lsn: bigint>"
)
_IMAGES = {
    "blog.public.users": (
        "struct<user_id: bigint, email: string, full_name: string, country: string, "
        "plan: string, lifetime_value: string, created_at: bigint, updated_at: bigint>"
    ),
    "blog.public.articles": (
        "struct<article_id: bigint, author_id: bigint, title: string, category: string, "
        "status: string, published_at: bigint, updated_at: bigint>"
    ),
}
_VISIT = (
    "struct<visit_id: string, event_time: string, user_id: bigint, article_id: bigint, "
    "page: string, device_type: string, device_version: string, referrer: string>"
)
_ENVELOPE_FIELDS = ("before", "after", "source", "op", "ts_ms")


def hand_written_columns(topic: str, value):  # type: ignore[no-untyped-def]
    """The hand-written job's transform: `from_json` with the topic's explicit schema."""
    from pyspark.sql import functions as F

    if topic not in _IMAGES:
        return [F.from_json(value, _VISIT).alias("visit")]
    image = _IMAGES[topic]
    envelope = f"before: {image}, after: {image}, source: {_SOURCE}, op: string, ts_ms: bigint"
    record = F.from_json(value, f"struct<{envelope}, payload: struct<{envelope}>>")
    # Debezium's JSON converter wraps the envelope in `payload` when schemas are on.
    return [F.coalesce(record["payload"][f], record[f]).alias(f) for f in _ENVELOPE_FIELDS]


def _copy(spark, landing: Path, target: Path) -> None:  # type: ignore[no-untyped-def]
    """The floor: every topic's landing lines copied into one Delta table, as is."""
    from python_jobs.topics import load_topics

    files = [str(landing / t.topic) for t in load_topics()]
    copy = spark.read.option("pathGlobFilter", "*.json").option("lineSep", "\n").text(files)
    copy.write.format("delta").save(str(target))


def _hand_written(spark, out: Path, source: Callable, max_files: int) -> None:  # type: ignore[no-untyped-def]
    """One available-now streaming query per topic: `source(topic)` -> from_json -> Delta."""
    from pyspark.sql import functions as F

    from python_jobs.topics import load_topics

    queries = []
    for topic in load_topics():
        stream = source(topic)
        rows = stream.select(
            *hand_written_columns(topic.topic, F.col("value").cast("string")),
            F.current_timestamp().alias("ingested_at"),
        )
        queries.append(
            rows.writeStream.format("delta")
            .option("checkpointLocation", str(out / "checkpoints" / topic.table))
            .trigger(availableNow=True)
            .start(str(out / topic.table))
        )
    for query in queries:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"hand-written job failed: {query.exception()}")


def _file_source(spark, landing: Path, max_files: int) -> Callable:  # type: ignore[no-untyped-def]
    def source(topic):  # type: ignore[no-untyped-def]
        return (
            spark.readStream.format("text")
            .option("lineSep", "\n")
            .option("pathGlobFilter", "*.json")
            .option("maxFilesPerTrigger", max_files)
            .option("maxFileAge", "3650d")
            .load(str(landing / topic.topic))
        )

    return source


def _kafka_source(spark, bootstrap: str, max_offsets: int) -> Callable:  # type: ignore[no-untyped-def]
    def source(topic):  # type: ignore[no-untyped-def]
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic.topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", max_offsets)
            .load()
        )

    return source


def _hand_written_rows(spark, out: Path) -> dict[str, int]:  # type: ignore[no-untyped-def]
    from python_jobs.topics import load_topics

    return {
        t.topic: spark.read.format("delta").load(str(out / t.table)).count() for t in load_topics()
    }


def _ours(spark) -> dict[str, tuple[int, int, int, int, int]]:  # type: ignore[no-untyped-def]
    """Per topic, from the batch log: records read, Bronze, dead letters, tombstones,
    micro-batches; checked against the tables themselves (conservation, no loss)."""
    from pyspark.sql import functions as F

    from python_jobs import bronze
    from python_jobs.topics import load_topics

    log = spark.read.format("delta").load(bronze.batches_path()).where("not is_heartbeat")
    totals = {
        r[0]: tuple(int(v) for v in r[1:])
        for r in log.groupBy("topic")
        .agg(
            F.sum("records_read"),
            F.sum("bronze_rows"),
            F.sum("dead_letters"),
            F.sum("tombstones"),
            F.count(F.lit(1)),
        )
        .collect()
    }
    dead = spark.read.format("delta").load(bronze.dead_letter_path())
    for topic in load_topics():
        read, kept, rejected, tombstones, _ = totals[topic.topic]
        assert read == kept + rejected + tombstones, f"{topic.topic}: not conserved"
        rows = spark.read.format("delta").load(str(topic.bronze_path)).count()
        assert rows == kept, f"{topic.topic}: {rows} Bronze rows, the log says {kept}"
        letters = dead.where(F.col("_topic") == topic.topic).count()
        assert letters == rejected, f"{topic.topic}: {letters} dead letters, log {rejected}"
    return totals  # type: ignore[return-value]


def _checksum(frame) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(rows, sum of xxhash64 of `_raw`): equal for two multisets of lines, in practice."""
    from pyspark.sql import functions as F

    row = frame.agg(F.count(F.lit(1)), F.sum(F.xxhash64("_raw").cast("decimal(38,0)"))).first()
    return int(row[0]), int(row[1] or 0)


def _check_every_line_once(spark, floor: Path) -> None:  # type: ignore[no-untyped-def]
    """Bronze + dead letters hold exactly the floor's non-tombstone lines, `_raw` exact,
    each at one (file, line) position."""
    from functools import reduce

    from pyspark.sql import functions as F

    from python_jobs import bronze
    from python_jobs.topics import load_topics

    tables = [str(t.bronze_path) for t in load_topics()] + [bronze.dead_letter_path()]
    kept = reduce(
        lambda a, b: a.unionByName(b),
        [
            spark.read.format("delta").load(p).select("_raw", "_source_file", "_line_number")
            for p in tables
        ],
    )
    lines = spark.read.format("delta").load(str(floor)).select(F.col("value").alias("_raw"))
    lines = lines.where(~bronze.is_tombstone(F.col("_raw")))
    assert _checksum(kept) == _checksum(lines), "Bronze + dead letters != the landing lines"
    positions = kept.select("_source_file", "_line_number").distinct().count()
    assert positions == kept.count(), "two records at one (file, line)"


def _rate(records: int, seconds: float) -> float:
    return records / seconds if seconds > 0 else float("inf")


def _timed(run: Callable[[], object]) -> float:
    started = time.monotonic()
    run()
    return time.monotonic() - started


def _bench_kafka(spark, scratch: Path, args: argparse.Namespace, lines: dict[str, int]) -> None:  # type: ignore[no-untyped-def]
    from python_jobs import ingest
    from python_jobs.simulate.kafka_sink import topic_record_counts
    from python_jobs.tools import kafka_broker
    from python_jobs.topics import load_topics

    os.environ["LAKEHOUSE_HOME"] = str(scratch / "kafka-home")
    broker = kafka_broker.start_broker()
    try:
        started = time.monotonic()
        simulate_workload(
            scratch / "kafka-home" / "landing",
            scratch / "kafka-truth",
            args,
            "--sink",
            "kafka",
            "--bootstrap-servers",
            broker.bootstrap,
        )
        print(f"kafka:     the same workload produced in {time.monotonic() - started:.1f} s")
        topics = [t.topic for t in load_topics()]
        records = topic_record_counts(broker.bootstrap, topics)
        assert records == lines, f"Kafka holds {records}, the landing files {lines}"
        total = sum(records.values())
        hand_out = scratch / "kafka-hand"
        source = _kafka_source(spark, broker.bootstrap, args.max_offsets_per_batch)
        hand_seconds = _timed(
            lambda: _hand_written(spark, hand_out, source, args.max_offsets_per_batch)
        )
        assert _hand_written_rows(spark, hand_out) == records, "hand-written lost records"
        options = ingest.IngestOptions(
            source="kafka",
            bootstrap_servers=broker.bootstrap,
            max_offsets=args.max_offsets_per_batch,
        )
        ours_seconds = _timed(lambda: ingest.run(options))
        totals = _ours(spark)
        assert {t: v[0] for t, v in totals.items()} == records, "ours lost records"
    finally:
        kafka_broker.stop_broker()
    hand_rate, ours_rate = _rate(total, hand_seconds), _rate(total, ours_seconds)
    batches = sum(v[4] for v in totals.values())
    print(
        f"kafka hand-written: {total:,} records in {hand_seconds:.1f} s "
        f"= {hand_rate:,.0f} records/s"
    )
    print(
        f"kafka ours:         {total:,} records in {batches} micro-batches, "
        f"{ours_seconds:.1f} s = {ours_rate:,.0f} records/s"
    )
    print(f"kafka ratio:        ours runs at {ours_rate / hand_rate:.2f} x the hand-written job")


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
    parser.add_argument("--max-offsets-per-batch", type=int, default=100_000)
    parser.add_argument("--no-kafka", action="store_true", help="files only")
    args = parser.parse_args(argv)

    from python_jobs.spark import paths

    scratch = paths()["tmp"] / "bench-ingest"
    shutil.rmtree(scratch, ignore_errors=True)
    # A lakehouse of its own: fresh Bronze, dead letters, batch log and checkpoints.
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    from python_jobs import ingest
    from python_jobs.spark import get_spark
    from python_jobs.topics import load_topics

    landing = scratch / "landing"
    try:
        started = time.monotonic()
        events = simulate_workload(landing, scratch / "truth", args).total_events
        print(f"workload:  {events:,} events simulated in {time.monotonic() - started:.1f} s")
        spark = get_spark(catalog=False)
        # Warm-up, not measured: everything once over a small workload of the same
        # shape, so that nothing pays the JVM's JIT and Spark's code generation.
        small = argparse.Namespace(
            users=500, articles=100, days=1, changes_per_day=5_000, visits_per_day=2_000
        )
        warm = scratch / "warm-up"
        simulate_workload(warm / "landing", warm / "truth", small)
        _copy(spark, warm / "landing", warm / "floor")
        _hand_written(spark, warm / "hand", _file_source(spark, warm / "landing", 100), 100)
        os.environ["LAKEHOUSE_HOME"] = str(warm / "home")
        ingest.run(ingest.IngestOptions(landing=warm / "landing"))
        os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")

        floor_seconds = _timed(lambda: _copy(spark, landing, scratch / "floor"))
        floor = spark.read.format("delta").load(str(scratch / "floor"))
        total = floor.count()
        lines = {
            t.topic: spark.read.option("lineSep", "\n").text(str(landing / t.topic)).count()
            for t in load_topics()
        }
        assert sum(lines.values()) == total

        source = _file_source(spark, landing, args.max_files_per_batch)
        hand_seconds = _timed(
            lambda: _hand_written(spark, scratch / "hand", source, args.max_files_per_batch)
        )
        assert _hand_written_rows(spark, scratch / "hand") == lines, "hand-written lost lines"

        options = ingest.IngestOptions(landing=landing, max_files=args.max_files_per_batch)
        ours_seconds = _timed(lambda: ingest.run(options))
        totals = _ours(spark)
        assert {t: v[0] for t, v in totals.items()} == lines, "ours lost lines"
        _check_every_line_once(spark, scratch / "floor")
        kept, dead, tombstones = (sum(v[i] for v in totals.values()) for i in (1, 2, 3))
        batches = sum(v[4] for v in totals.values())

        floor_rate = _rate(total, floor_seconds)
        hand_rate = _rate(total, hand_seconds)
        ours_rate = _rate(total, ours_seconds)
        print(
            f"floor:        {total:,} lines copied in {floor_seconds:.1f} s "
            f"= {floor_rate:,.0f} records/s"
        )
        print(
            f"hand-written: {total:,} records in {hand_seconds:.1f} s = {hand_rate:,.0f} records/s"
        )
        print(
            f"ours:         {total:,} records ({kept:,} Bronze, {dead:,} dead letters, "
            f"{tombstones:,} tombstones) in {batches} micro-batches, {ours_seconds:.1f} s "
            f"= {ours_rate:,.0f} records/s"
        )
        print(
            f"ratio:        ours runs at {ours_rate / hand_rate:.2f} x the hand-written job, "
            f"{ours_rate / floor_rate:.2f} x the floor "
            f"(the hand-written job: {hand_rate / floor_rate:.2f} x the floor)"
        )
        print("checked:      every line once in ours (count, _raw checksum, positions)")
        if not args.no_kafka:
            _bench_kafka(spark, scratch, args, lines)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
