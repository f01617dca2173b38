"""Ingest the landing zone into Bronze with Structured Streaming, exactly once.

One streaming query per topic reads new landing files (whole files, so each line keeps
its line number), splits them into lines and appends them to the topic's Bronze Delta
table by path. Each micro-batch is written with Delta's idempotent-write options
(`txnAppId` = the query's checkpoint id, `txnVersion` = the batch id), so a batch that
is replayed after a crash between the data write and the checkpoint commit is skipped
by Delta instead of being written twice.

The session has no catalog (`get_spark(catalog=False)`), so ingestion can run while
`dbt build` holds the embedded catalog.

    python -m python_jobs.ingest --once                 # what is there, then exit
    python -m python_jobs.ingest --trigger-interval 10  # continuously, until SIGTERM
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from python_jobs import bronze
from python_jobs.spark import get_spark, paths
from python_jobs.topics import Topic, load_topics

log = logging.getLogger("ingest")


def checkpoint_dir(topic: Topic) -> Path:
    return paths()["checkpoints"] / "ingest" / topic.table


def read_landing(spark: SparkSession, topic: Topic, landing: Path, max_files: int) -> DataFrame:
    """The source: new files of one topic's landing directory, one row per file."""
    directory = topic.landing_dir(landing)
    directory.mkdir(parents=True, exist_ok=True)
    return (
        spark.readStream.format("text")
        .option("wholetext", "true")
        .option("pathGlobFilter", "*.json")
        .option("maxFilesPerTrigger", max_files)
        # Never skip a file for being old (Spark's default ignores files 7 days older
        # than the newest seen, e.g. a backfill copied in with its original times).
        .option("maxFileAge", "3650d")
        .load(str(directory))
        .select("value", F.col("_metadata.file_path").alias("_source_file"))
    )


def _query_id(checkpoint: Path) -> str:
    """The id Spark stores in a query's checkpoint; stable across restarts."""
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


def bronze_writer(topic: Topic, checkpoint: Path) -> Callable[[DataFrame, int], None]:
    """The sink: an idempotent append of one micro-batch to the topic's Bronze table."""

    def write_batch(files: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        ingested_at = datetime.now(UTC)
        rows = bronze.decorate(bronze.split_lines(files), batch_id, ingested_at)
        (
            rows.write.format("delta")
            .mode("append")
            .option("txnAppId", f"lakehouse-ingest-{_query_id(checkpoint)}")
            .option("txnVersion", batch_id)
            .partitionBy(bronze.PARTITION_COLUMN)
            .save(str(topic.bronze_path))
        )
        log.info(
            "%s batch %d written in %.1fs",
            topic.topic,
            batch_id,
            time.monotonic() - started,
        )

    return write_batch


class IngestError(RuntimeError):
    """Ingestion cannot start or continue safely; the message says why and what to do."""


def check_checkpoint(spark: SparkSession, topic: Topic, checkpoint: Path) -> None:
    """Refuse to start a fresh checkpoint over a Bronze table that already has rows.

    The checkpoint is what remembers which landing files were ingested; without it every
    file would be appended again (Bronze is append-only, so the duplicates would stay).
    """
    if (checkpoint / "metadata").exists():
        return
    if spark.read.format("delta").load(str(topic.bronze_path)).limit(1).count() == 0:
        return
    raise IngestError(
        f"{topic.topic}: the Bronze table {topic.bronze_path} has rows but its streaming "
        f"checkpoint {checkpoint} is missing, so ingesting would append every landing "
        "file again. Restore the checkpoint, or delete both the Bronze table and the "
        "checkpoint to re-ingest the landing zone from scratch."
    )


def start_query(
    spark: SparkSession,
    topic: Topic,
    landing: Path,
    once: bool,
    trigger_interval: float,
    max_files: int,
) -> StreamingQuery:
    checkpoint = checkpoint_dir(topic)
    check_checkpoint(spark, topic, checkpoint)
    writer = (
        read_landing(spark, topic, landing, max_files)
        .writeStream.queryName(f"ingest_{topic.table}")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(bronze_writer(topic, checkpoint))
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_interval} seconds")
    return writer.start()


class _StopFlag:
    """Set by SIGTERM/SIGINT: stop after the micro-batch in flight."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, _frame: object) -> None:
        log.info("received %s: stopping after the batch in flight", signal.Signals(signum).name)
        self.requested = True


def run(
    landing: Path,
    once: bool = True,
    trigger_interval: float = 10.0,
    max_files: int = 100,
    topics: list[Topic] | None = None,
) -> None:
    spark = get_spark(catalog=False)
    topics = topics if topics is not None else load_topics()
    bronze.ensure_tables(spark, topics)
    stop = _StopFlag()
    previous_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous_handlers[signum] = signal.signal(signum, stop)
    queries: list[StreamingQuery] = []
    try:
        for topic in topics:
            queries.append(start_query(spark, topic, landing, once, trigger_interval, max_files))
        log.info(
            "ingesting %d topics from %s (%s)",
            len(topics),
            landing,
            "available now" if once else f"every {trigger_interval}s",
        )
        while any(q.isActive for q in queries):
            if stop.requested:
                for query in queries:
                    while query.isActive and query.status["isTriggerActive"]:
                        time.sleep(0.2)
                    query.stop()
                break
            for query in queries:
                if query.exception() is not None:
                    raise IngestError(f"{query.name} failed: {query.exception()}")
            time.sleep(0.5)
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
    for query in queries:
        if query.exception() is not None:
            raise IngestError(f"{query.name} failed: {query.exception()}")
    log.info("ingestion stopped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.ingest",
        description="Ingest the landing zone into the Bronze Delta tables, exactly once.",
    )
    parser.add_argument(
        "--landing-dir",
        type=Path,
        default=None,
        help="landing zone to read (default: $LAKEHOUSE_HOME/landing)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--once",
        action="store_true",
        help="ingest everything available now, then exit (the default)",
    )
    mode.add_argument(
        "--trigger-interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run continuously, one micro-batch every SECONDS, until SIGTERM or Ctrl-C",
    )
    parser.add_argument(
        "--max-files-per-batch",
        type=int,
        default=100,
        help="at most this many landing files per topic per micro-batch (default 100)",
    )
    args = parser.parse_args(argv)
    if args.trigger_interval is not None and args.trigger_interval <= 0:
        parser.error("--trigger-interval must be > 0")
    if args.max_files_per_batch < 1:
        parser.error("--max-files-per-batch must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    args = parse_args(argv)
    landing = args.landing_dir or paths()["landing"]
    try:
        run(
            landing=landing,
            once=args.trigger_interval is None,
            trigger_interval=args.trigger_interval or 10.0,
            max_files=args.max_files_per_batch,
        )
    except IngestError as error:
        log.error("%s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
