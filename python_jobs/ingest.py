"""Ingest the landing zone (or Kafka) into Bronze with Structured Streaming, exactly once.

One streaming query per topic reads new records - landing files split into lines, or
Kafka records - and hands each micro-batch to :class:`BatchWriter`, which classifies the
records (:func:`python_jobs.bronze.classify`; for a topic of AWS DMS files,
:func:`python_jobs.dms.classify`) and appends, in this order:

1. the parsed records to the topic's Bronze table,
2. the records that failed to `bronze.dead_letter`, with the reason,
3. one row to `ops.ingestion_batches` with the batch's counts and lag.

The appends to Bronze and the dead letters use Delta's idempotent-write options
(`txnAppId` = the query's checkpoint id, `txnVersion` = the batch id), so a batch
replayed after a crash anywhere between these writes and the checkpoint's commit writes
each table at most once. The batch log row is written last, once: a replayed batch
whose row the log already held when the run started skips it. With the
embedded catalog the session has none (`get_spark(catalog=False)`), so ingestion runs
while `dbt build` holds it; with the shared catalog (LAKEHOUSE_CATALOG) the session is
catalog-bound and registers the tables it writes (still by path) in it.

    python -m python_jobs.ingest --once                 # what is there, then exit
    python -m python_jobs.ingest --trigger-interval 10  # continuously, until SIGTERM
    python -m python_jobs.ingest --source kafka --bootstrap-servers 127.0.0.1:9092 --once
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from python_jobs import bronze, dms, kafka_identity
from python_jobs.spark import get_spark, ingestion_session, paths, shared_catalog
from python_jobs.topics import Topic, load_topics

log = logging.getLogger("ingest")

SOURCES = ("files", "kafka")


@dataclass(frozen=True)
class IngestOptions:
    """How to ingest: the source, the trigger, and the limits."""

    source: str = "files"
    landing: Path | None = None  # default: $LAKEHOUSE_HOME/landing
    bootstrap_servers: str | None = None
    once: bool = True
    trigger_interval: float = 10.0
    max_files: int = 100
    max_offsets: int = 100_000
    max_invalid_ratio: float | None = None
    max_record_bytes: int = bronze.DEFAULT_MAX_RECORD_BYTES
    heartbeat_interval: float = 60.0
    # Kafka: skip offsets retention deleted before they were read (the run after a
    # data-loss failure, once the lost changes are recovered at the source).
    accept_data_loss: bool = False
    # Kafka: a topic deleted and created again is read from its first offset into a new
    # Bronze table, the old table and checkpoint set aside (python_jobs/kafka_identity.py).
    reingest_recreated_topics: bool = False

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "kafka" and not self.bootstrap_servers:
            raise ValueError("the kafka source needs bootstrap servers")
        if self.accept_data_loss and (self.source != "kafka" or not self.once):
            # One run past the gap: a continuous job would skip every later loss too.
            raise ValueError("accept_data_loss is for one run (once) of the kafka source")
        if self.reingest_recreated_topics and (self.source != "kafka" or not self.once):
            raise ValueError("reingest_recreated_topics is for one run (once) of the kafka source")
        if self.max_invalid_ratio is not None and not 0 <= self.max_invalid_ratio <= 1:
            raise ValueError(f"max_invalid_ratio must be in [0, 1], got {self.max_invalid_ratio}")


class IngestError(RuntimeError):
    """Ingestion cannot start or continue safely; the message says why and what to do."""


def checkpoint_dir(topic: Topic, source: str = "files") -> Path:
    return paths()["checkpoints"] / "ingest" / source / topic.table


def read_landing(spark: SparkSession, topic: Topic, landing: Path, max_files: int) -> DataFrame:
    """New files of one topic's landing directory, one row per line (streamed, so a
    file of any size): `_raw`, `_source_file` and `_block_start`, numbered in each
    micro-batch by :func:`python_jobs.bronze.number_lines`."""
    directory = topic.landing_dir(landing)
    directory.mkdir(parents=True, exist_ok=True)
    return (
        spark.readStream.format("text")
        # Lines end at \n only: a \r stays in `_raw`, byte for byte.
        .option("lineSep", "\n")
        .option("pathGlobFilter", dms.GLOBS.get(topic.format, "*.json"))
        .option("maxFilesPerTrigger", max_files)
        # Never skip a file for being old (Spark's default ignores files 7 days older
        # than the newest seen, e.g. a backfill copied in with its original times).
        .option("maxFileAge", "3650d")
        .load(str(directory))
        .select(
            F.col("value").alias("_raw"),
            F.col("_metadata.file_path").alias("_source_file"),
            F.col("_metadata.file_block_start").alias("_block_start"),
        )
    )


def read_dms_parquet(spark: SparkSession, topic: Topic, landing: Path, max_files: int) -> DataFrame:
    """New Parquet files of a `dms-parquet` topic's landing directory, one row per
    record, typed as the registry declares (a file whose types differ fails the batch,
    naming the file and column), with its file and row index
    (:func:`python_jobs.dms.with_file_positions`)."""
    assert topic.dms is not None
    directory = topic.landing_dir(landing)
    directory.mkdir(parents=True, exist_ok=True)
    rows = (
        spark.readStream.format("parquet")
        .schema(dms.parquet_schema(topic.dms))
        .option("pathGlobFilter", dms.GLOBS[topic.format])
        .option("maxFilesPerTrigger", max_files)
        .option("maxFileAge", "3650d")
        .load(str(directory))
    )
    return dms.with_file_positions(rows)


def _source_offset(checkpoint: Path, batch_id: int) -> int:
    """Where micro-batch `batch_id` ends in the file source's log: the offset of the
    query's one source in the checkpoint's `offsets/<batch>` (a version line, the
    batch's metadata, then one `{"logOffset": n}` per source); -1 before the first."""
    if batch_id < 0:
        return -1
    lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    return int(json.loads(lines[2])["logOffset"])


def batch_files(checkpoint: Path, batch_id: int) -> list[str]:
    """The landing files of micro-batch `batch_id` (URIs). The batch's DataFrame does
    not know them (it is a plan over the scan's RDD), so they come from the checkpoint:
    the batch reads the file source's log entries after the previous batch's offset, up
    to its own (`offsets/`). The two numberings usually agree, but not after a crash
    between the source logging its next files and the query logging its offsets: the
    next batch then takes those files and new ones. Each entry (`sources/0/<n>`, or the
    compacted `<m>.compact` holding it: lines of JSON after a version line) has `path`
    and `batchId`."""
    log = checkpoint / "sources" / "0"
    try:
        first = _source_offset(checkpoint, batch_id - 1) + 1
        last = _source_offset(checkpoint, batch_id)
    except (OSError, IndexError, KeyError, ValueError) as error:
        raise IngestError(
            f"batch {batch_id} has no readable offsets under {checkpoint / 'offsets'} "
            f"({error}): the checkpoint is damaged; restore it, or re-ingest from scratch"
        ) from error
    compacted = sorted(log.glob("*.compact"), key=lambda f: int(f.stem), reverse=True)
    paths: list[str] = []
    for offset in range(first, last + 1):
        for file in [log / str(offset), *compacted]:
            if not file.exists():
                continue
            entries = [json.loads(line) for line in file.read_text().splitlines()[1:] if line]
            found = [e["path"] for e in entries if e.get("batchId") == offset]
            if found or file.name == str(offset):
                paths += found
                break
        else:
            raise IngestError(
                f"entry {offset} of batch {batch_id} is not in the file source's log under "
                f"{log}: the checkpoint is damaged; restore it, or re-ingest from scratch"
            )
    return paths


def lines_before_splits(spark: SparkSession, files: list[str]) -> dict[tuple[str, int], int]:
    """For the landing files larger than one split (read by several tasks): the number
    of lines before each split, keyed by (`_metadata.file_path`, split start), from one
    counting pass over those files only. Empty when every file fits in one split."""
    split = int(spark.conf.get("spark.sql.files.maxPartitionBytes") or 0)
    # The source log holds URIs (a space is `%20`); the reader takes paths, decoded,
    # and reads them as globs: their glob characters are escaped (`[1]` in a name would
    # match only `1`). The scheme stays (not resolved against `fs.defaultFS`).
    large = []
    for uri in files:
        parts = urlsplit(uri)
        path = unquote(parts.path)
        if Path(path).stat().st_size > split:
            escaped = re.sub(r"([\\\[\]{}*?])", r"\\\1", path)
            large.append(f"{parts.scheme}://{parts.netloc}{escaped}" if parts.scheme else escaped)
    if not large:
        return {}
    counts = (
        spark.read.option("lineSep", "\n")
        .text(large)
        .groupBy(F.col("_metadata.file_path"), F.col("_metadata.file_block_start"))
        .count()
        .collect()
    )
    before: dict[tuple[str, int], int] = {}
    total: dict[str, int] = {}
    for file, start, count in sorted((r[0], r[1], r[2]) for r in counts):
        before[(file, start)] = total.get(file, 0)
        total[file] = total.get(file, 0) + count
    return before


def read_kafka(
    spark: SparkSession,
    topic: Topic,
    bootstrap: str,
    max_offsets: int,
    accept_data_loss: bool = False,
) -> DataFrame:
    """New records of one Kafka topic, as lines (``bronze.LINE_SCHEMA``).

    The value is decoded as UTF-8 (what Debezium's JSON converter writes); a null value
    is a tombstone. Records deleted by retention before the query read them fail it,
    unless `accept_data_loss`: then it goes on from the earliest offset still retained.
    """
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        # Records deleted by retention after the query started fail it loudly
        # (`_failure` says what to do).
        .option("failOnDataLoss", str(not accept_data_loss).lower())
    )
    if not accept_data_loss:
        # A batch's offset range split into (at least) one task per core, as a batch of
        # files is: one task per topic partition would leave cores idle. Not in a run
        # that skips lost offsets: there, two tasks on one partition met one pooled
        # consumer from two threads (Kafka's ConcurrentModificationException), seen
        # under load; the one-off recovery run reads each partition in one task.
        reader = reader.option("minPartitions", spark.sparkContext.defaultParallelism)
    records = (
        reader
        # Only committed records of transactional producers (Kafka Connect's
        # exactly-once source mode); aborted ones never reach Bronze.
        .option("kafka.isolation.level", "read_committed").load()
    )
    return records.select(
        F.col("value").cast("string").alias("_raw"),
        F.col("topic").alias("_topic"),
        F.col("partition").alias("_partition"),
        F.col("offset").alias("_offset"),
        F.lit(None).cast("string").alias("_source_file"),
        F.lit(None).cast("int").alias("_line_number"),
    )


def _query_id(checkpoint: Path) -> str:
    """The id Spark stores in a query's checkpoint; stable across restarts."""
    return json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]


def _append(rows: DataFrame, path: str, app_id: str, version: int, partitioned: bool) -> None:
    writer = (
        rows.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
    )
    if partitioned:
        writer = writer.partitionBy(bronze.PARTITION_COLUMN)
    writer.save(path)


class BatchWriter:
    """The sink of one topic's query: classify a micro-batch, append it idempotently to
    Bronze and the dead letters, log it in `ops.ingestion_batches`."""

    def __init__(
        self,
        spark: SparkSession,
        topic: Topic,
        options: IngestOptions,
        checkpoint: Path,
        logged_through: int = -1,
    ) -> None:
        self.spark = spark
        self.topic = topic
        self.options = options
        self.checkpoint = checkpoint
        # The newest batch of this query in the batch log when the run started
        # (check_checkpoint): a batch up to it is a replay, already logged.
        self.logged_through = logged_through
        self.failure: str | None = None
        self.batches = 0
        self.last_row_at = time.monotonic()
        # Set on SIGTERM: the next batch aborts before writing anything (and is read
        # again by the next run), so a backlog does not delay the stop.
        self.stopping = False
        self.aborted = False
        self.classify = dms.classify if topic.format in dms.FORMATS else bronze.classify
        self.identity = (
            kafka_identity.BatchCheck(topic.topic, checkpoint, options.bootstrap_servers)
            if options.source == "kafka" and options.bootstrap_servers
            else None
        )
        self.reasons = dms.REASONS if topic.format in dms.FORMATS else bronze.REASONS

    def app_id(self) -> str:
        return f"lakehouse-ingest-{_query_id(self.checkpoint)}"

    def __call__(self, lines: DataFrame, batch_id: int) -> None:
        if self.stopping:
            self.aborted = True
            raise _Stopping(f"{self.topic.topic}: stopping before batch {batch_id}")
        self._check_topic_identity()
        started = datetime.now(UTC)
        clock = time.monotonic()
        # A replayed batch is classified as it was the first time (the limit or the
        # topic's kind and key may have changed since), or a record could land in both
        # tables or in neither.
        pinned = self._pinned(batch_id)
        limit = pinned.max_record_bytes if pinned else self.options.max_record_bytes
        topic = pinned.topic if pinned else self.topic
        if self.options.source == "files":
            lines = self._numbered(lines, batch_id)
        # A CDC topic is classified in two passes: the fast path first, for every
        # record; the records it declines (dead letters, and the rare ones it cannot
        # decide) by the exact rules in a second pass, only when there are any.
        two_pass = self.classify is bronze.classify and topic.kind == "cdc"
        first = bronze.classify_fast if two_pass else self.classify
        reasons = () if two_pass else self.reasons
        # The counts come with the Bronze write (observed on every record, before the
        # Bronze rows are filtered out), not from a job of their own. Counted first
        # instead: a batch under a ratio limit (nothing of it is written if over), and
        # a replay (Delta skips a write it already holds, and the observation with it).
        count_first = pinned is not None or self.options.max_invalid_ratio is not None
        observation = Observation(f"ingest_{self.topic.table}_{batch_id}_{uuid.uuid4().hex}")
        # The records a second pass must see again (declined, dead letters) are found by
        # their positions' hashes, observed here (bronze.narrowed_to).
        narrow = self.classify is bronze.classify and not count_first
        metrics = [
            *bronze.status_metrics(reasons),
            *([bronze.set_aside_metric()] if narrow else []),
        ]
        records = bronze.decorate(first(lines, topic, limit), batch_id, started).observe(
            observation, *metrics
        )
        cached: list[DataFrame] = []
        if count_first:
            # Read and parsed once for the count and the writes.
            cached.append(records.persist(StorageLevel.MEMORY_AND_DISK))
        declined: tuple[DataFrame, dict[str, object]] | None = None
        try:
            counts = bronze.count_statuses(records) if count_first else None
            if counts is not None and counts["declined"]:
                declined = self._declined(lines, topic, batch_id, started, limit, cached)
                counts = bronze.with_declined(counts, declined[1])
            if pinned is None:
                if counts is not None:
                    self._check_ratio(counts, batch_id)
                self._pin(batch_id, _Pin(limit, topic))
            app_id = self.app_id()
            path = str(self.topic.bronze_path)
            _append(bronze.bronze_rows(records), path, app_id, batch_id, partitioned=True)
            if counts is None:
                observed = observation.get
                counts = bronze.observed_counts(observed, reasons)
                if narrow:
                    lines = bronze.narrowed_to(lines, list(observed["set_aside"]))
                if counts["declined"]:
                    declined = self._declined(lines, topic, batch_id, started, limit, cached)
                    counts = bronze.with_declined(counts, declined[1])
            if declined is not None:
                # The declined records' Bronze rows: a write of their own (its own
                # transaction id), so a replay writes each of the two at most once.
                dead_from, declined_counts = declined
                if declined_counts["bronze_rows"]:
                    rows = bronze.bronze_rows(dead_from)
                    _append(rows, path, f"{app_id}-declined", batch_id, partitioned=True)
            elif narrow:
                # Rare: the batch is read again (narrowed to them, most often) rather than
                # cached for them.
                dead_from = bronze.decorate(self.classify(lines, topic, limit), batch_id, started)
            else:
                dead_from = records
            if counts["dead_letters"]:
                dead = bronze.dead_letter_rows(dead_from)
                _append(dead, bronze.dead_letter_path(), app_id, batch_id, partitioned=True)
            self._log_batch(counts, batch_id, started, time.monotonic() - clock)
        finally:
            for frame in cached:
                frame.unpersist()
        log.info(
            "%s batch %d: read %d, bronze %d, dead letters %d%s, tombstones %d, lag %s, %.1fs",
            self.topic.topic,
            batch_id,
            counts["records_read"],
            counts["bronze_rows"],
            counts["dead_letters"],
            _reason_text(counts["reasons"]),
            counts["tombstones"],
            _lag_text(_lag_seconds(counts["max_source_committed_at"], started)),
            time.monotonic() - clock,
        )

    def _check_topic_identity(self) -> None:
        """A Kafka topic deleted and created again while the query ran: stop before
        writing (the offsets the batch planned may be the new topic's)."""
        if self.identity is None:
            return
        try:
            problem = self.identity.problem()
        except kafka_identity.BrokersUnreachable as error:
            # Brokers that did not answer in time (a restart): the batch's own read
            # fails, or succeeds, as before; the next batch checks again.
            log.warning(
                "%s: the topic's id was not checked before this batch: %s", self.topic.topic, error
            )
            return
        except kafka_identity.TopicIdentityError as error:
            problem = str(error)
        if problem is not None:
            self.failure = problem
            raise IngestError(problem)

    def _declined(
        self,
        lines: DataFrame,
        topic: Topic,
        batch_id: int,
        started: datetime,
        limit: int,
        cached: list[DataFrame],
    ) -> tuple[DataFrame, dict[str, object]]:
        """The batch's records the fast path declined, classified by the exact rules
        (the batch read and its fast path run again to find them), cached (they are
        few), and their counts."""
        exact = bronze.classify_declined(lines, topic, limit)
        declined = bronze.decorate(exact, batch_id, started).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(declined)
        return declined, bronze.count_statuses(declined)

    def _numbered(self, rows: DataFrame, batch_id: int) -> DataFrame:
        """The micro-batch's landing lines, numbered (:func:`bronze.number_lines`), then
        in at most one task per core (one per file would write a Parquet file each).
        (The rows of Parquet files come with their row index: not numbered here.)"""
        session = rows.sparkSession
        if self.topic.format != "dms-parquet":
            before = lines_before_splits(session, batch_files(self.checkpoint, batch_id))
            rows = bronze.number_lines(rows, self.topic.topic, before)
        return rows.coalesce(max(1, session.sparkContext.defaultParallelism))

    def _pin_file(self, batch_id: int) -> Path:
        return self.checkpoint / "lakehouse" / f"batch-{batch_id}.json"

    def _pinned(self, batch_id: int) -> _Pin | None:
        pin = self._pin_file(batch_id)
        if not pin.exists():
            return None
        pinned = json.loads(pin.read_text())
        limit = int(pinned["max_record_bytes"])
        # A pin written before kind, key and layout were pinned keeps the registry's.
        kind = pinned.get("kind", self.topic.kind)
        key = tuple(pinned.get("key", self.topic.key))
        layout = dms.layout_from_json(pinned["dms"]) if "dms" in pinned else self.topic.dms
        topic = replace(self.topic, kind=kind, key=key, dms=layout)
        if self.topic.format == "dms-parquet" and layout != self.topic.dms:
            # The files are read with the registry's layout (the query's schema).
            self.failure = (
                f"{self.topic.topic}: batch {batch_id} is being replayed (the run before "
                "stopped before committing it), and the topic's `dms:` layout in the "
                f"registry differs from the one it was first read with ({pin}). A "
                "Parquet topic's files are read with the registry's layout: put the "
                "layout back for one run, which completes the batch, then change it. "
                "Nothing of the batch was written by this run."
            )
            raise IngestError(self.failure)
        return _Pin(limit, topic)

    def _pin(self, batch_id: int, pin: _Pin) -> None:
        """Record the batch's classification before its first append (atomically): the
        size limit, the topic's kind and key, and a DMS topic's column layout."""
        path = self._pin_file(batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        limit, kind, key = pin.max_record_bytes, pin.topic.kind, list(pin.topic.key)
        values: dict[str, object] = {"max_record_bytes": limit, "kind": kind, "key": key}
        if pin.topic.dms is not None:
            values["dms"] = dms.layout_to_json(pin.topic.dms)
        tmp.write_text(json.dumps(values))
        tmp.rename(path)
        for old in path.parent.glob("batch-*.json"):
            if int(old.stem.split("-")[1]) < batch_id - 100:
                old.unlink(missing_ok=True)

    def _check_ratio(self, counts: dict[str, object], batch_id: int) -> None:
        limit = self.options.max_invalid_ratio
        read = int(counts["records_read"])  # type: ignore[arg-type]
        dead = int(counts["dead_letters"])  # type: ignore[arg-type]
        if limit is None or read == 0 or dead / read <= limit:
            return
        self.failure = (
            f"{self.topic.topic}: batch {batch_id} has {dead} invalid records out of {read} "
            f"(ratio {dead / read:.3f}), over --max-invalid-ratio {limit}; nothing of the "
            "batch was written. Inspect the source, then re-run with a higher limit to "
            "send them to bronze.dead_letter."
        )
        raise IngestError(self.failure)

    def _log_batch(
        self, counts: dict[str, object], batch_id: int | None, started: datetime, seconds: float
    ) -> None:
        ingested_at = datetime.now(UTC)
        newest = counts["max_source_committed_at"]
        lag = _lag_seconds(newest, started)
        row = {
            "topic": self.topic.topic,
            "source": self.options.source,
            "query_id": _query_id(self.checkpoint),
            "batch_id": batch_id,
            "is_heartbeat": batch_id is None,
            **{k: counts[k] for k in ("records_read", "bronze_rows", "dead_letters", "tombstones")},
            "max_source_committed_at": newest,
            "lag_seconds": lag,
            "started_at": started.replace(tzinfo=None),
            "ingested_at": ingested_at.replace(tzinfo=None),
            "duration_seconds": seconds,
        }
        # A plain append: the batch's first write of its row, or a heartbeat. (Delta's
        # transaction ids would cost a rebuild of the log's state per batch.) Each batch
        # of a query writes its row once, in order, and a replay skips it, so the log
        # holds one row per batch.
        if batch_id is None or batch_id > self.logged_through:
            rows = self.spark.createDataFrame([row], bronze.BATCH_SCHEMA)
            rows.write.format("delta").mode("append").save(bronze.batches_path())
        if batch_id is not None:
            self.batches += 1
        self.last_row_at = time.monotonic()

    def heartbeat(self) -> None:
        """A row saying the query is alive and found no new records."""
        empty: dict[str, object] = {
            "records_read": 0,
            "bronze_rows": 0,
            "dead_letters": 0,
            "tombstones": 0,
            "max_source_committed_at": None,
        }
        self._log_batch(empty, None, datetime.now(UTC), 0.0)
        log.info("%s: no new records (heartbeat)", self.topic.topic)


def _reason_text(reasons: object) -> str:
    if not isinstance(reasons, dict) or not reasons:
        return ""
    return " (" + ", ".join(f"{name} {n}" for name, n in sorted(reasons.items())) + ")"


def _lag_seconds(newest: object, started: datetime) -> float | None:
    """Batch start minus the newest source commit time (both UTC), or None."""
    if not isinstance(newest, datetime):
        return None
    return (started.replace(tzinfo=None) - newest).total_seconds()


def _lag_text(lag: float | None) -> str:
    return "-" if lag is None else f"{lag:.1f}s"


@dataclass(frozen=True)
class _Pin:
    """How a batch was classified the first time: its replay is classified the same."""

    max_record_bytes: int
    topic: Topic


class _Stopping(RuntimeError):
    """Raised in a batch that starts after a stop was requested: nothing written."""


def _last_commit(checkpoint: Path) -> int:
    commits = [int(f.name) for f in (checkpoint / "commits").glob("*") if f.name.isdigit()]
    return max(commits, default=-1)


def check_checkpoint(
    spark: SparkSession,
    topic: Topic,
    source: str,
    checkpoint: Path,
    created: Collection[str] = (),
) -> int:
    """Refuse to start when the checkpoint and the tables disagree; return the newest
    batch of the checkpoint's query in the batch log (-1: none).

    The checkpoint remembers which files (or offsets) were ingested. Without it every
    record would be appended again (the tables are append-only, so they would stay).
    With one older than the tables (restored from a backup), Delta would skip the
    re-planned batches as already written, and the records new to them would be lost.
    `created`: the paths of tables this run has just created, empty, not read.
    """
    if (checkpoint / "metadata").exists():
        log_rows = spark.read.format("delta").load(bronze.batches_path())
        newest = (
            log_rows.where(F.col("query_id") == _query_id(checkpoint))
            .agg(F.max("batch_id"))
            .first()[0]
        )
        last = _last_commit(checkpoint)
        # One batch past the checkpoint is a crash before its commit, which leaves the
        # batch's planned offsets: it is replayed as planned. Without them the
        # checkpoint is older (a backup): Spark would plan that batch anew, with more
        # input, and Delta would skip its writes as done.
        planned = newest is not None and (checkpoint / "offsets" / str(newest)).exists()
        if newest is not None and (newest > last + 1 or (newest == last + 1 and not planned)):
            raise IngestError(
                f"{topic.topic}: the checkpoint {checkpoint} ends at batch {last} but "
                f"batch {newest} was already written, so the checkpoint is older than the "
                "tables (restored from a backup?). Resuming would lose records. Restore "
                "the checkpoint that goes with the tables, or re-ingest from scratch."
            )
        return -1 if newest is None else int(newest)
    position = F.col("_source_file" if source == "files" else "_offset").isNotNull()
    mine = {str(topic.bronze_path): position}
    if not kafka_identity.reingests(checkpoint):
        # (A topic created again, read from scratch into a new Bronze table: the dead
        # letters, append-only, keep the old topic's; --reingest-recreated-topics.)
        mine[bronze.dead_letter_path()] = position & (F.col("_topic") == topic.topic)
    tables = [
        spark.read.format("delta").load(path).where(rows)
        for path, rows in mine.items()
        if path not in created
    ]
    if all(t.limit(1).count() == 0 for t in tables):
        # A new checkpoint is a new query: nothing of it is in the batch log.
        return -1
    raise IngestError(
        f"{topic.topic}: the Bronze table {topic.bronze_path} (or the dead letters) has "
        f"records from {source} but the streaming checkpoint {checkpoint} is missing, so "
        "ingesting would append them again. Restore the checkpoint, or delete the Bronze "
        "tables, bronze.dead_letter, ops.ingestion_batches and the checkpoints to "
        "re-ingest from scratch."
    )


def start_query(
    spark: SparkSession, topic: Topic, options: IngestOptions, logged_through: int = -1
) -> tuple[StreamingQuery, BatchWriter]:
    checkpoint = checkpoint_dir(topic, options.source)
    session = ingestion_session(spark)
    landing = options.landing or paths()["landing"]
    if options.source == "kafka":
        assert options.bootstrap_servers is not None
        lines = read_kafka(
            session,
            topic,
            options.bootstrap_servers,
            options.max_offsets,
            options.accept_data_loss,
        )
    elif topic.format == "dms-parquet":
        lines = read_dms_parquet(session, topic, landing, options.max_files)
    else:
        lines = read_landing(session, topic, landing, options.max_files)
    sink = BatchWriter(spark, topic, options, checkpoint, logged_through)
    writer = (
        lines.writeStream.queryName(f"ingest_{options.source}_{topic.table}")
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(sink)
    )
    if options.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_interval} seconds")
    # Each query in its own scheduler pool (FAIR mode, python_jobs/spark.py): the
    # topics share the cores instead of queueing behind each other's jobs.
    context = spark.sparkContext
    context.setLocalProperty("spark.scheduler.pool", f"ingest_{topic.table}")
    try:
        return writer.start(), sink
    finally:
        context.setLocalProperty("spark.scheduler.pool", None)


class _StopFlag:
    """Set by SIGTERM/SIGINT: stop after the micro-batch in flight."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, _frame: object) -> None:
        log.info("received %s: stopping after the batch in flight", signal.Signals(signum).name)
        self.requested = True
        # A second signal stops at once (safe: every write is idempotent).
        signal.signal(signum, signal.SIG_DFL)


def _failure(query: StreamingQuery, sink: BatchWriter) -> IngestError | None:
    error = query.exception()
    if error is None or sink.aborted:
        return None
    text = str(error)
    if sink.failure is None and sink.identity is not None:
        # Offsets that went backwards, partitions or a topic that went away: first, was
        # the topic deleted (and created again)? Spark's error would say lost data, or an
        # unknown topic.
        recreated = sink.identity.explains()
        if recreated is not None:
            return IngestError(recreated)
    if sink.failure is None and "Some data may have been lost" in text:
        # Spark's Kafka source: the range the batch planned is no longer on the broker.
        reason = next((ln for ln in text.splitlines() if ln.startswith("Reason: ")), "")
        return IngestError(
            f"{query.name}: records of the topic were deleted (retention) before this query "
            f"read them ({reason.removeprefix('Reason: ') or 'see the log'}); the batch did "
            "not complete (a replay writes each table at most once). Recover the lost changes "
            "at the source (a Debezium snapshot of the table), then ingest once with "
            "--accept-data-loss to go on from the earliest offset the broker still has."
        )
    return IngestError(sink.failure or f"{query.name} failed: {error}")


def _stop_after_batches_in_flight(running: list[tuple[StreamingQuery, BatchWriter]]) -> None:
    """A batch in flight finishes; the next one aborts before writing; idle queries stop."""
    for _, sink in running:
        sink.stopping = True
    while any(query.isActive for query, _ in running):
        for query, _ in running:
            if query.isActive and not query.status["isTriggerActive"]:
                query.stop()
        time.sleep(0.2)


@contextmanager
def checkpoint_locks(topics: list[Topic], source: str) -> Iterator[None]:
    """Hold an exclusive lock on each topic's checkpoint while ingesting it (a file
    `<checkpoint>.lock` beside it, `flock`, released when the process ends, however it
    ends). Two queries on one checkpoint (a continuous job and a `--once` run started
    beside it) would each plan and write the same batches: duplicate batch-log rows, a
    batch skipped by Delta's idempotent write that never reports its counts. The second
    one is refused instead, naming the holder. `flock` holds between the processes of
    one host; on a file system shared by hosts it may not (docs/operations.md)."""
    with ExitStack() as held:
        for topic in topics:
            checkpoint = checkpoint_dir(topic, source)
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            lock = held.enter_context(open(checkpoint.with_name(checkpoint.name + ".lock"), "a+"))
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                raise IngestError(
                    f"{topic.topic}: another ingestion process (pid {holder}) is using the "
                    f"checkpoint {checkpoint}; two would write the same batches. Stop it, or "
                    "let it finish, before starting this one."
                ) from None
            except OSError as error:
                raise IngestError(
                    f"{topic.topic}: cannot lock {lock.name} ({error}): the checkpoints' "
                    "file system does not support flock; keep LAKEHOUSE_HOME's checkpoints "
                    "on a local disk"
                ) from error
            lock.truncate(0)
            lock.write(f"{os.getpid()}\n")
            lock.flush()
        yield


def run(options: IngestOptions | None = None, topics: list[Topic] | None = None) -> None:
    """Ingest every topic (default: the registry) with `options`, until done (`once`)
    or until SIGTERM/SIGINT, which stop the queries after the batch in flight. One
    process per checkpoint: a second run on the same topics and source is refused."""
    options = options or IngestOptions()
    topics = topics if topics is not None else load_topics()
    if options.source == "kafka":
        files_only = [t.topic for t in topics if t.format in dms.FORMATS]
        if files_only:
            raise IngestError(
                f"topics {files_only} are AWS DMS files (format dms-csv or dms-parquet): "
                "they come from the landing zone only, not from Kafka"
            )
    # The session first: its preflight refuses a bad setting before anything is made
    # under LAKEHOUSE_HOME (the locks' directories included).
    spark = get_spark(catalog=shared_catalog())
    with checkpoint_locks(topics, options.source):
        _run(spark, options, topics)


def check_topic_ids(options: IngestOptions, topics: list[Topic]) -> None:
    """Kafka: each topic is still the one its checkpoint read (its topic id)."""
    assert options.bootstrap_servers is not None
    try:
        current = kafka_identity.topic_ids(options.bootstrap_servers, [t.topic for t in topics])
        for topic in topics:
            moved = kafka_identity.check_at_start(
                topic.topic,
                checkpoint_dir(topic, options.source),
                current[topic.topic],
                options.bootstrap_servers,
                topic.bronze_path,
                options.reingest_recreated_topics,
            )
            if moved is not None:
                log.warning(
                    "%s: the topic was created again: its old checkpoint is now %s, its old "
                    "Bronze table %s; the new topic is read from its first offset. Rebuild "
                    "the models that read it with --full-refresh.",
                    topic.topic,
                    *moved,
                )
    except kafka_identity.TopicIdentityError as error:
        raise IngestError(str(error)) from None


def _run(spark: SparkSession, options: IngestOptions, topics: list[Topic]) -> None:
    if options.source == "kafka":
        # First: a recreated topic's re-ingestion moves its Bronze table aside.
        check_topic_ids(options, topics)
    created = bronze.ensure_tables(spark, topics)
    stop = _StopFlag()
    previous_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous_handlers[signum] = signal.signal(signum, stop)
    # Every check first: a check queued behind another topic's first batch would hold
    # back the start of the remaining queries. The checks are small jobs, mostly the
    # driver's planning: side by side, they share the cores (one failure fails all).
    with ThreadPoolExecutor(max_workers=min(4, max(1, len(topics)))) as pool:
        source = options.source
        checks = [
            pool.submit(check_checkpoint, spark, t, source, checkpoint_dir(t, source), created)
            for t in topics
        ]
        logged = [check.result() for check in checks]
    running: list[tuple[StreamingQuery, BatchWriter]] = []
    try:
        for topic, logged_through in zip(topics, logged, strict=True):
            running.append(start_query(spark, topic, options, logged_through))
        origin = options.bootstrap_servers if options.source == "kafka" else options.landing
        log.info(
            "ingesting %d topics from %s %s (%s)",
            len(topics),
            options.source,
            origin or paths()["landing"],
            "available now" if options.once else f"every {options.trigger_interval}s",
        )
        if options.accept_data_loss:
            log.warning("accepting data loss: offsets the broker no longer has are skipped")
        while any(query.isActive for query, _ in running):
            if stop.requested:
                _stop_after_batches_in_flight(running)
                break
            for query, sink in running:
                failure = _failure(query, sink)
                if failure is not None:
                    raise failure
                idle = query.isActive and not query.status["isTriggerActive"]
                overdue = time.monotonic() - sink.last_row_at >= options.heartbeat_interval
                if not options.once and idle and overdue:
                    sink.heartbeat()
            time.sleep(0.5)
    finally:
        for query, _ in running:
            if query.isActive:
                query.stop()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
    for query, sink in running:
        failure = _failure(query, sink)
        if failure is not None:
            raise failure
        if options.once and sink.batches == 0 and not stop.requested:
            sink.heartbeat()
    log.info("ingestion stopped")


def parse_args(argv: list[str] | None = None) -> IngestOptions:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.ingest",
        description="Ingest the landing zone (or Kafka) into the Bronze Delta tables, "
        "exactly once, with bad records in bronze.dead_letter and one row per micro-batch "
        "in ops.ingestion_batches.",
    )
    parser.add_argument(
        "--source", choices=SOURCES, default="files", help="where to read (default: files)"
    )
    parser.add_argument(
        "--landing-dir",
        type=Path,
        default=None,
        help="files source: the landing zone (default: $LAKEHOUSE_HOME/landing)",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        metavar="HOST:PORT[,...]",
        help="kafka source: the brokers (default: $KAFKA_BOOTSTRAP_SERVERS)",
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
        help="files source: at most this many files per topic per micro-batch (default 100)",
    )
    parser.add_argument(
        "--max-offsets-per-batch",
        type=int,
        default=100_000,
        help="kafka source: at most this many records per topic per micro-batch (default 100000)",
    )
    parser.add_argument(
        "--max-invalid-ratio",
        type=float,
        default=None,
        metavar="RATIO",
        help="fail when a batch's dead letters / records read exceeds RATIO (0..1; default: never)",
    )
    parser.add_argument(
        "--max-record-bytes",
        type=int,
        default=bronze.DEFAULT_MAX_RECORD_BYTES,
        help="records larger than this go to the dead letters (default 1 MiB)",
    )
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="continuous mode: log a heartbeat row for a topic with no new records "
        "every SECONDS (default 60)",
    )
    parser.add_argument(
        "--accept-data-loss",
        action="store_true",
        help="kafka source: skip the offsets retention deleted before they were read, "
        "after a data-loss failure (default: such a loss stops ingestion)",
    )
    parser.add_argument(
        "--reingest-recreated-topics",
        action="store_true",
        help="kafka source: read a topic that was deleted and created again from its first "
        "offset into a new Bronze table, the old table and checkpoint set aside (default: "
        "such a topic stops ingestion)",
    )
    args = parser.parse_args(argv)
    if args.trigger_interval is not None and args.trigger_interval <= 0:
        parser.error("--trigger-interval must be > 0")
    if args.max_files_per_batch < 1:
        parser.error("--max-files-per-batch must be >= 1")
    if args.max_offsets_per_batch < 1:
        parser.error("--max-offsets-per-batch must be >= 1")
    if args.max_record_bytes < 1:
        parser.error("--max-record-bytes must be >= 1")
    if args.heartbeat_interval <= 0:
        parser.error("--heartbeat-interval must be > 0")
    if args.max_invalid_ratio is not None and not 0 <= args.max_invalid_ratio <= 1:
        parser.error("--max-invalid-ratio must be between 0 and 1")
    if args.source == "kafka" and not args.bootstrap_servers:
        parser.error("--source kafka needs --bootstrap-servers (or $KAFKA_BOOTSTRAP_SERVERS)")
    if args.accept_data_loss and (args.source != "kafka" or args.trigger_interval is not None):
        # One run past the gap: a continuous job would skip every later loss too.
        parser.error("--accept-data-loss is for one --once run of --source kafka")
    if args.reingest_recreated_topics and (
        args.source != "kafka" or args.trigger_interval is not None
    ):
        parser.error("--reingest-recreated-topics is for one --once run of --source kafka")
    return IngestOptions(
        source=args.source,
        landing=args.landing_dir,
        bootstrap_servers=args.bootstrap_servers,
        once=args.trigger_interval is None,
        trigger_interval=args.trigger_interval or 10.0,
        max_files=args.max_files_per_batch,
        max_offsets=args.max_offsets_per_batch,
        max_invalid_ratio=args.max_invalid_ratio,
        max_record_bytes=args.max_record_bytes,
        heartbeat_interval=args.heartbeat_interval,
        accept_data_loss=args.accept_data_loss,
        reingest_recreated_topics=args.reingest_recreated_topics,
    )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    options = parse_args(argv)
    from python_jobs.preflight import PreflightError

    try:
        run(options)
    except (IngestError, PreflightError) as error:
        log.error("%s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
