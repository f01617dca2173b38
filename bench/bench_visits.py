"""Gold's incremental fct_visits and silver's filtered_append as the visits grow, in one run.

    python -m bench.bench_visits [--visits 100000] [--growth 16] [--users 100000]
                                 [--articles 10000] [--batch 10000] [--quick]

The project's own models (models/silver/visits, users_history, articles_history;
models/marts/core/dim_users, dim_articles, fct_visits) over Bronze rows generated with
Spark: Debezium envelopes of `blog.public.users` and `blog.public.articles` (a snapshot
of every key, then updates to ~40% of them) and `blog.visits` events, written to the
Bronze tables through the ingestion job's own classification and decoration
(python_jobs/bronze.py), one Delta commit per micro-batch, none of them a dead letter.
The 1x visits happen over ten days (from 1 October 2024); the larger table adds older
history (the 150 days before), as a table that grew over time holds mostly older
visits.

1. `filtered_append` per batch (silver.visits): the same kind of batch (`--batch` visit
   records of the hour before their ingestion: ~5% failing one filter each, ~3% of the
   valid ones sent twice, plus exact copies of ~3% of the batch before's visits, as a
   redelivery sends them) appended to Bronze, then `dbt run --select visits` timed,
   with silver.visits holding `--visits` rows (1x) and `--growth` times as many (after
   a load of the older visits); one warm-up batch and `--batches` timed batches at
   each size, median reported. Each batch is checked: its rows in silver.visits (by
   the Bronze commit that wrote them) equal the batch's valid first copies row for
   row, the table grew by exactly that many, and the quarantine holds exactly the
   batch's invalid records, per filter.
2. `gold.fct_visits` after a 1% batch: at the 16x size the gold models are built once
   (not timed), then a batch appends ~1% of the visits as new visits (with the chaos
   above) and changes ~1% of the users and of the articles (updates committed days
   before, a tenth of them deletes, so existing visits move to other versions),
   silver is rebuilt (`dbt run --select users_history articles_history visits`), and
   `dbt run --select dim_users dim_articles fct_visits` is timed (incremental:
   `audited_table` with `unique_key` and `incremental_inputs`; dbt's log must say
   `incremental: N keys to recompute` for each model, else the check fails with the
   reason it logged). The three gold tables are then restored to their versions
   before that run and the same command is timed with `--full-refresh` (the baseline,
   on the same state). The incremental tables must equal the full rebuild's row for
   row (EXCEPT ALL both ways empty, counts equal), and fct_visits must hold one row
   per silver.visits row.

Everything lives in a scratch LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp (its own
catalog, warehouse and dbt target), deleted afterwards unless `--keep`. A wrong result
makes the exit status 1; nothing asserts a time. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.bench_cdc_merge import (
    DbtRunFailed,
    Timing,
    machine,
    median,
    open_lakehouse,
    percent,
    run_dbt,
    scratch_run,
    seeded_hash,
)
from python_jobs.simulate.visits import COLUMNS as VISIT_FIELDS

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# The 1x visits happen in the VISIT_DAYS from START; the visits that grow the table to
# `--growth` x are older history, in the OLDER_DAYS before START. Every load and batch
# is ingested after START + VISIT_DAYS, each batch an hour after the one before.
START = datetime(2024, 10, 1, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
VISIT_DAYS = 10
OLDER_DAYS = 150
LOADED = START + timedelta(days=VISIT_DAYS, hours=1)
# The users' and articles' snapshot is committed before any visit; their updates follow
# in UPDATE_DAYS steps (the k-th within the k-th step), all before START.
SNAPSHOT_MS = START_MS - (OLDER_DAYS + 10) * DAY_MS
UPDATE_DAYS = 75
# Gold batches change dimension rows committed in these days (after every earlier
# change of the key, before any ingestion), so they split versions visits already saw.
LATE_CHANGE_DAYS = (6, 10)
GOLD = ("dim_users", "dim_articles", "fct_visits")
SILVER = ("users_history", "articles_history", "visits")
INVALID = {  # percent of a batch's records -> the one filter each fails
    0: "missing_visit_id",
    1: "unparseable_event_time",
    2: "future_event_time",
    3: "missing_page",
    4: "unsupported_device",
}
SENT_TWICE = 3  # percent of a batch's valid visits delivered twice in it
COPIED = 3  # percent of the batch before's valid visits delivered again
# What silver.visits keeps of a visit that the checks compare: the event's fields
# (the contract's, as the simulator writes them) and where it was read.
VISIT_COLUMNS = (*VISIT_FIELDS, "_source_file", "_line_number", "_ingested_at")


# --- Bronze rows: pure DataFrame builders -------------------------------------------


def _pick(values: tuple[str, ...], *parts):
    """One of `values`, chosen by the seeded hash of `parts`."""
    from pyspark.sql import functions as F

    index = (seeded_hash(len(values), *parts) + 1).cast("int")
    return F.element_at(F.array(*[F.lit(v) for v in values]), index)


def _micros(millis):
    return millis * 1000


def user_image(key, version, commit_ms):
    """A `users` row image as Debezium writes it: timestamps in epoch microseconds,
    `lifetime_value` numeric(12,2) as base64 big-endian unscaled bytes."""
    from pyspark.sql import functions as F

    cents = seeded_hash(10**7, "ltv", key, version)
    return F.struct(
        key.alias("user_id"),
        F.concat(F.lit("user"), key, F.lit("@example.com")).alias("email"),
        F.concat(F.lit("User "), key).alias("full_name"),
        _pick(("DE", "FR", "US", "GB", "ES", "IT", "NL", "PL"), "country", key).alias("country"),
        _pick(("free", "pro", "team"), "plan", key, version).alias("plan"),
        F.base64(F.unhex(F.lpad(F.hex(cents), 16, "0"))).alias("lifetime_value"),
        _micros(F.lit(SNAPSHOT_MS) - seeded_hash(365 * DAY_MS, "created", key)).alias("created_at"),
        _micros(commit_ms).alias("updated_at"),
        F.when(version > 0, _pick(("en", "fr", "de"), "language", key, version)).alias(
            "preferred_language"
        ),
    )


def article_image(key, version, commit_ms, users: int):
    """An `articles` row image as Debezium writes it (timestamps in epoch microseconds)."""
    from pyspark.sql import functions as F

    status = _pick(("draft", "published", "published", "archived"), "status", key, version)
    return F.struct(
        key.alias("article_id"),
        (seeded_hash(users, "author", key) + 1).alias("author_id"),
        F.concat(F.lit("Article "), key, F.lit(" v"), version).alias("title"),
        _pick(("tech", "data", "culture", "science", "sport"), "category", key, version).alias(
            "category"
        ),
        status.alias("status"),
        F.when(status != "draft", _micros(F.lit(SNAPSHOT_MS) - DAY_MS)).alias("published_at"),
        _micros(commit_ms).alias("updated_at"),
    )


def cdc_lines(changes, table: str, key_column: str, image, file_name: str):
    """Change rows (`id`, `op`, `version`, `commit_ms`, `line`) to landing lines
    (``bronze.LINE_SCHEMA``) of Debezium envelopes of `table`; `image(key, version,
    commit_ms)` is the row image. A delete's `before` holds the key alone."""
    from pyspark.sql import functions as F

    key, op, commit_ms = F.col("id"), F.col("op"), F.col("commit_ms")
    lsn = commit_ms * 1000 + key % 1000
    source = F.struct(
        F.lit("2.7.3.Final").alias("version"),
        F.lit("postgresql").alias("connector"),
        F.lit("blog").alias("name"),
        commit_ms.alias("ts_ms"),
        F.when(op == "r", "true").otherwise("false").alias("snapshot"),
        F.lit("blog").alias("db"),
        F.format_string('["%d","%d"]', lsn - 1, lsn).alias("sequence"),
        F.lit("public").alias("schema"),
        F.lit(table).alias("table"),
        (commit_ms % 10**9).alias("txId"),
        lsn.alias("lsn"),
        F.lit(None).cast("bigint").alias("xmin"),
    )
    envelope = F.struct(
        F.when(op == "d", F.struct(key.alias(key_column))).alias("before"),
        F.when(op != "d", image(key, F.col("version"), commit_ms)).alias("after"),
        source.alias("source"),
        op.alias("op"),
        (commit_ms + 50).alias("ts_ms"),
        F.lit(None).cast("string").alias("transaction"),
    )
    return changes.select(
        F.to_json(envelope, {"ignoreNullFields": "false"}).alias("_raw"),
        F.lit(f"blog.public.{table}").alias("_topic"),
        F.lit(None).cast("int").alias("_partition"),
        F.lit(None).cast("bigint").alias("_offset"),
        F.lit(file_name).alias("_source_file"),
        F.col("line").cast("int").alias("_line_number"),
    )


def initial_changes(spark, keys: int, name: str):
    """A snapshot row ('r', before any visit) of every key 1..keys, then 0-2 updates
    per key (~40% of the keys), the k-th within the k-th UPDATE_DAYS after it."""
    from pyspark.sql import functions as F

    key = F.col("id") + 1
    updates = F.when(seeded_hash(10, "updates", name, key) >= 9, 2).when(
        seeded_hash(10, "updates", name, key) >= 7, 1
    )
    frame = spark.range(keys).select(
        key.alias("id"),
        F.explode(F.sequence(F.lit(0), F.coalesce(updates, F.lit(0)))).alias("version"),
    )
    return frame.select(
        "id",
        F.when(F.col("version") == 0, "r").otherwise("u").alias("op"),
        "version",
        (
            F.lit(SNAPSHOT_MS)
            + F.when(
                F.col("version") > 0,
                (F.col("version") - 1) * UPDATE_DAYS * DAY_MS
                + seeded_hash(UPDATE_DAYS * DAY_MS, "at", name, F.col("id"), F.col("version")),
            ).otherwise(0)
        ).alias("commit_ms"),
        (F.col("version") * keys + F.col("id")).alias("line"),
    )


def late_changes(spark, keys: int, name: str):
    """~1% of the keys changed once, committed days ago (LATE_CHANGE_DAYS), after every
    earlier change of the key; a tenth of them are deletes."""
    from pyspark.sql import functions as F

    key = F.col("id") + 1
    first, last = LATE_CHANGE_DAYS
    return (
        spark.range(keys)
        .where(seeded_hash(100, "late", name, key) == 0)
        .select(
            key.alias("id"),
            F.when(percent("delete", name, key) < 10, "d").otherwise("u").alias("op"),
            F.lit(10).alias("version"),
            (
                F.lit(START_MS + first * DAY_MS)
                + seeded_hash((last - first) * DAY_MS, "late at", name, key)
            ).alias("commit_ms"),
            F.col("id").alias("line"),
        )
    )


def visit_id(batch, row):
    """A visit's id (a UUID's shape) from its batch and row."""
    from pyspark.sql import functions as F

    digits = F.concat(
        F.lpad(F.hex(seeded_hash(2**62, "visit", batch, row)), 16, "0"),
        F.lpad(F.hex(seeded_hash(2**62, "visit id", batch, row)), 16, "0"),
    )
    parts = [F.substring(digits, start, length) for start, length in ((1, 8), (9, 4), (13, 4))]
    parts += [F.substring(digits, 17, 4), F.substring(digits, 21, 12)]
    return F.lower(F.concat_ws("-", *parts))


def visit_records(
    spark,
    batch: int,
    size: int,
    ingested_at: datetime,
    users: int,
    articles: int,
    load_window: tuple[int, int] | None = None,
):
    """`size` visit records of Bronze micro-batch `batch`, each labelled with its `kind`.
    A load (`load_window`: first epoch ms, span in ms) is `valid` visits in that
    window. A batch is visits of the hour before `ingested_at`, ~5% of them failing one
    filter each (`kind` names it) and ~3% of the valid ones sent twice (`sent_twice`:
    an exact copy, later in the file)."""
    from pyspark.sql import functions as F

    row, draw = F.col("id"), percent("kind", batch, F.col("id"))
    at_ms = int(ingested_at.timestamp() * 1000)
    kind = F.lit("valid")
    if load_window:
        first, span = load_window
        event_ms = F.lit(first) + seeded_hash(span, "event", batch, row)
    else:
        for value, name in INVALID.items():
            kind = F.when(draw == value, name).otherwise(kind)
        event_ms = F.lit(at_ms) - seeded_hash(HOUR_MS, "event", batch, row)
    article = seeded_hash(articles, "article", batch, row) + 1
    referrers = ("https://www.google.com/", "https://t.co/", "https://duckduckgo.com/")
    records = spark.range(size).select(
        row.alias("row"),
        kind.alias("kind"),
        (2 * row + 1).alias("line"),
        F.when(kind != "missing_visit_id", visit_id(batch, row)).alias("visit_id"),
        F.when(kind == "future_event_time", F.lit(at_ms + DAY_MS))
        .otherwise(event_ms)
        .alias("event_ms"),
        F.when(
            percent("anonymous", batch, row) >= 30, seeded_hash(users, "user", batch, row) + 1
        ).alias("user_id"),
        article.alias("article_id"),
        F.when(kind != "missing_page", F.concat(F.lit("/articles/"), article))
        .otherwise("")
        .alias("page"),
        F.when(kind == "unsupported_device", "tv")
        .otherwise(_pick(("desktop", "mobile", "tablet"), "device", batch, row))
        .alias("device_type"),
        F.concat(F.lit("v"), seeded_hash(20, "version", batch, row)).alias("device_version"),
        F.when(
            percent("referrer", batch, row) >= 40, _pick(referrers, "referrer", batch, row)
        ).alias("referrer"),
    )
    if load_window:
        return records
    twice = records.where(
        (F.col("kind") == "valid") & (percent("twice", batch, F.col("row")) < SENT_TWICE)
    )
    return records.unionByName(
        twice.withColumn("kind", F.lit("sent_twice")).withColumn("line", F.col("line") + 1)
    )


def copies_of_table_rows(previous, batch: int, size: int):
    """Exact copies of ~3% of the valid visits of the batch before (`previous`, its
    records), as a redelivery sends them: `copy_of_table`, after the batch's own lines
    (which end at 2 * `size`)."""
    from pyspark.sql import functions as F

    chosen = (F.col("kind") == "valid") & (percent("copy", batch, F.col("row")) < COPIED)
    return previous.where(chosen).select(
        "row",
        F.lit("copy_of_table").alias("kind"),
        (2 * size + 1 + F.col("row")).alias("line"),
        *[c for c in previous.columns if c not in ("row", "kind", "line")],
    )


def with_positions(records, batch: int):
    """Records with their JSON `event_time` text and where they are in the landing file
    of `batch` (`_source_file`, `_line_number`)."""
    from pyspark.sql import functions as F

    text = F.date_format(F.timestamp_millis(F.col("event_ms")), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
    return records.select(
        "*",
        F.when(F.col("kind") == "unparseable_event_time", "yesterday")
        .otherwise(text)
        .alias("event_time_text"),
        F.lit(f"bench-visits-{batch:05d}.json").alias("_source_file"),
        F.col("line").cast("int").alias("_line_number"),
    )


def visit_lines(records):
    """Visit records to landing lines (``bronze.LINE_SCHEMA``): one JSON object each."""
    from pyspark.sql import functions as F

    event = F.struct(
        *[F.col("event_time_text" if c == "event_time" else c).alias(c) for c in VISIT_FIELDS]
    )
    return records.select(
        F.to_json(event, {"ignoreNullFields": "false"}).alias("_raw"),
        F.lit("blog.visits").alias("_topic"),
        F.lit(None).cast("int").alias("_partition"),
        F.lit(None).cast("bigint").alias("_offset"),
        "_source_file",
        "_line_number",
    )


def expected_visits(records, ingested_at: datetime):
    """The rows of a batch silver.visits must append: its valid records, first copies."""
    from pyspark.sql import functions as F

    return records.where(F.col("kind") == "valid").select(
        "visit_id",
        F.timestamp_millis(F.col("event_ms")).alias("event_time"),
        *VISIT_COLUMNS[2:-1],
        F.lit(ingested_at).cast("timestamp").alias("_ingested_at"),
    )


# --- The lakehouse ------------------------------------------------------------------


@dataclass
class Lakehouse:
    """The scratch lakehouse's session, sizes, Bronze micro-batches so far, and the
    last visits micro-batch (batch, rows, ingestion time, load window): the next batch
    sends some of its visits again."""

    spark: object
    users: int
    articles: int
    batches: int = 0
    previous: tuple[int, int, datetime, tuple[int, int] | None] | None = None

    def next_batch(self) -> tuple[int, datetime]:
        """The next micro-batch: its id and ingestion time (an hour after the last)."""
        self.batches += 1
        return self.batches, LOADED + timedelta(hours=self.batches)

    def append(self, topic_name: str, lines, batch: int, ingested_at: datetime) -> int:
        """Lines appended to the topic's Bronze table as one micro-batch of the ingestion
        job writes them (its classification and decoration); returns the commit's
        version. Every line must become a Bronze row (no dead letter, no tombstone)."""
        from pyspark.sql import Observation

        from python_jobs import bronze
        from python_jobs.topics import load_topics

        topic = next(t for t in load_topics() if t.topic == topic_name)
        observation = Observation(f"bench_{topic.table}_{batch}")
        records = bronze.classify(lines, topic, bronze.DEFAULT_MAX_RECORD_BYTES)
        records = bronze.decorate(records, batch, ingested_at).observe(
            observation, *bronze.status_metrics()
        )
        path = str(topic.bronze_path)
        bronze.bronze_rows(records).write.format("delta").mode("append").save(path)
        counts = bronze.observed_counts(observation.get)
        if counts["records_read"] != counts["bronze_rows"]:
            raise RuntimeError(f"{topic_name} batch {batch}: not all Bronze rows: {counts}")
        return self.spark.sql(f"describe history delta.`{path}` limit 1").first()["version"]

    def visits(self, batch: int, size: int, at: datetime, load_window=None):
        return visit_records(self.spark, batch, size, at, self.users, self.articles, load_window)

    def append_visits(self, size: int, load_window: tuple[int, int] | None = None):
        """A visits micro-batch: a load of valid visits in `load_window` (first epoch ms,
        span), or a batch of recent ones with invalid records, copies sent twice, and
        copies of the batch before's (:func:`visit_records`,
        :func:`copies_of_table_rows`). Returns its records with their kinds (cached, for
        a batch), its ingestion time and its Bronze version."""
        batch, at = self.next_batch()
        records = self.visits(batch, size, at, load_window)
        if load_window is None and self.previous:
            last, last_size, last_at, last_window = self.previous
            earlier = self.visits(last, min(size, last_size), last_at, last_window)
            records = records.unionByName(copies_of_table_rows(earlier, batch, size))
        self.previous = (batch, size, at, load_window)
        records = with_positions(records, batch)
        if load_window is None:
            records = records.cache()
        version = self.append("blog.visits", visit_lines(records), batch, at)
        return records, at, version

    def append_changes(self, changes_of: dict[str, object]) -> None:
        """One micro-batch per table of change rows (`users`, `articles`)."""
        images = {
            "users": ("user_id", user_image),
            "articles": (
                "article_id",
                lambda key, version, at: article_image(key, version, at, self.users),
            ),
        }
        for table, changes in changes_of.items():
            key_column, image = images[table]
            batch, at = self.next_batch()
            lines = cdc_lines(changes, table, key_column, image, f"bench-{table}-{batch:05d}.json")
            self.append(f"blog.public.{table}", lines, batch, at)

    def count(self, table: str, where: str = "true") -> int:
        return self.spark.sql(f"select count(*) from {table} where {where}").first()[0]

    def version(self, table: str) -> int:
        return self.spark.sql(f"describe history {table} limit 1").first()["version"]


def dbt_run(*select: str, full_refresh: bool = False) -> Timing:
    """`dbt run --select ...` of the project, in this process, timed: one model per
    name selected, unless a selector has a graph operator (`+visits`)."""
    args = ["--quiet", "run", "--select", *select] + (["--full-refresh"] if full_refresh else [])
    exact = not any("+" in name for name in select)
    return run_dbt(args, " ".join(select), len(select) if exact else None)


def dbt_log() -> Path:
    return Path(os.environ.get("DBT_LOG_PATH", "")) / "dbt.log"


def publications(since: int) -> dict[str, str]:
    """What each audited_table model said it did in dbt's log after byte `since`:
    `incremental: N keys to recompute` or `a full rebuild: <reason>`."""
    with dbt_log().open("rb") as log:
        log.seek(since)
        text = log.read().decode("utf-8", "replace")
    found = re.findall(
        r"audited_table \(model gold\.(\w+)\): (incremental: \d+ keys to recompute"
        r"|a full rebuild: [^\n]*)",
        text,
    )
    return dict(found)


def log_size() -> int:
    return dbt_log().stat().st_size if dbt_log().exists() else 0


def differing_rows(spark, left: str, right: str) -> tuple[int, int, int]:
    """(rows of `left`, rows of `right`, rows in one and not the other, EXCEPT ALL)."""
    a, b = spark.sql(f"select * from {left}"), spark.sql(f"select * from {right}")
    return a.count(), b.count(), a.exceptAll(b).count() + b.exceptAll(a).count()


# --- 1. filtered_append per batch ---------------------------------------------------


@dataclass
class Size:
    """One size of silver.visits: its load, timed batches and their table sizes."""

    scale: int
    load: Timing | None = None
    batches: list[Timing] = field(default_factory=list)
    table_rows: list[int] = field(default_factory=list)


def visits_batch(lake: Lakehouse, args: argparse.Namespace, label: str) -> tuple[Timing, int, str]:
    """Append one chaotic batch, time `dbt run --select visits`, check what landed;
    returns the timing, the table's rows before, and the check's line."""
    spark = lake.spark
    before = lake.count("silver.visits")
    records, at, version = lake.append_visits(args.batch)
    timing = dbt_run("visits")
    expected = expected_visits(records, at)
    got = spark.table("silver.visits").where(f"_bronze_version = {version}")
    got = got.select(*expected.columns)
    landed, wanted = got.count(), expected.count()
    differing = got.exceptAll(expected).count() + expected.exceptAll(got).count()
    after = lake.count("silver.visits")
    kinds = dict(records.groupBy("kind").count().collect())
    quarantined = {
        r["reason"]: r["n"]
        for r in spark.sql(
            "select reason, count(*) as n from silver.visits__quarantine "
            f"where window_value = {version} group by reason"
        ).collect()
    }
    invalid = {name: kinds[name] for name in INVALID.values() if kinds.get(name)}
    records.unpersist()
    ok = landed == wanted and differing == 0 and after == before + wanted and quarantined == invalid
    line = (
        f"{label}: {sum(kinds.values()):,} records ({kinds.get('valid', 0):,} valid, "
        f"{sum(invalid.values()):,} failing a filter, {kinds.get('copy_of_table', 0):,} copies "
        f"of table rows, {kinds.get('sent_twice', 0):,} sent twice): {landed:,} rows landed, "
        f"{wanted:,} expected, {differing:,} differ; table {before:,} -> {after:,}; "
        f"quarantined {sum(quarantined.values()):,} by filter as expected: "
        f"{quarantined == invalid} - {'OK' if ok else 'MISMATCH'}"
    )
    return timing, before, line


def measure_size(lake: Lakehouse, args: argparse.Namespace, size: Size, checks: list[str]) -> None:
    """The warm-up and timed batches at one size."""
    for batch in range(args.batches + 1):
        warm_up = batch == 0
        label = f"[visits {size.scale}x] batch {batch}" + (" (warm-up)" if warm_up else "")
        timing, before, line = visits_batch(lake, args, label)
        print(f"{line}; dbt run {timing.wall:.1f} s")
        checks.append(line)
        if not warm_up:
            size.batches.append(timing)
            size.table_rows.append(before)


def load_older_visits(lake: Lakehouse, rows: int, label: str) -> Timing:
    """A load of `rows` valid visits of the OLDER_DAYS before START into Bronze, then
    silver.visits built from it: a table that holds older history too."""
    started = time.monotonic()
    lake.append_visits(rows, (START_MS - OLDER_DAYS * DAY_MS, OLDER_DAYS * DAY_MS))
    print(f"{label}: {rows:,} visits written to Bronze in {time.monotonic() - started:.1f} s")
    before = lake.count("silver.visits")
    timing = dbt_run("visits")
    after = lake.count("silver.visits")
    if after != before + rows:
        raise RuntimeError(f"{label}: silver.visits went {before:,} -> {after:,}, not +{rows:,}")
    print(f"{label}: silver.visits {before:,} -> {after:,} rows in {timing.wall:.1f} s")
    return timing


# --- 2. fct_visits after a 1% batch -------------------------------------------------


@dataclass
class Gold:
    """The gold models' first build, the timed batch's runs and what they did."""

    load: Timing | None = None
    silver: Timing | None = None
    incremental: Timing | None = None
    full: Timing | None = None
    said: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    visits_version: int = 0
    reached: dict[str, int] = field(default_factory=dict)


def gold_batch(lake: Lakehouse, gold: Gold) -> tuple[str, dict[str, int]]:
    """Append a 1% batch (new visits; changes to ~1% of users and of articles), rebuild
    silver, then time the gold models' incremental run (`gold.silver`,
    `gold.incremental`, `gold.said`); returns the batch's line and the gold tables'
    versions before the run."""
    visits = lake.count("silver.visits")
    size = max(1, visits // 100)
    spark = lake.spark
    changes = {
        "users": late_changes(spark, lake.users, "users"),
        "articles": late_changes(spark, lake.articles, "articles"),
    }
    changed = {name: frame.count() for name, frame in changes.items()}
    for name, frame in changes.items():
        frame.select("id", "commit_ms").createOrReplaceTempView(f"bench_changed_{name}")
    lake.append_changes(changes)
    records, _, gold.visits_version = lake.append_visits(size)
    records.unpersist()
    gold.silver = dbt_run(*SILVER)
    before = {model: lake.version(f"gold.{model}") for model in GOLD}
    since = log_size()
    gold.incremental = dbt_run(*GOLD)
    gold.said = publications(since)
    gold.reached = keys_reached(spark, gold.visits_version, before)
    line = (
        f"[gold] 1% batch: {size:,} visit records on {visits:,} visits, {changed['users']:,} "
        f"users and {changed['articles']:,} articles changed (a tenth deleted); silver "
        f"rebuilt in {gold.silver.wall:.1f} s; gold incremental {gold.incremental.wall:.1f} s: "
        + "; ".join(f"{m}: {gold.said.get(m, 'nothing logged')}" for m in GOLD)
    )
    print(line)
    return line, before


def measure_gold(lake: Lakehouse, gold: Gold, checks: list[str]) -> None:
    """The gold models' first build, then a 1% batch: its incremental run beside a full
    refresh on the same state, and the checks."""
    spark = lake.spark
    gold.load = dbt_run(*GOLD)
    gold.rows = lake.count("gold.fct_visits")
    print(
        f"[gold] first build of {', '.join(GOLD)}: {gold.rows:,} visits in {gold.load.wall:.1f} s"
    )
    line, before = gold_batch(lake, gold)
    checks.append(line)
    checks += _incremental_check(gold)
    after = {model: lake.version(f"gold.{model}") for model in GOLD}
    moved = spark.sql(
        f"""
        select count(*)
        from (select * from gold.fct_visits version as of {before["fct_visits"]}) as old
        inner join (select * from gold.fct_visits version as of {after["fct_visits"]}) as new
            on old.visit_id = new.visit_id
        where not (old.user_version_key <=> new.user_version_key)
            or not (old.article_version_key <=> new.article_version_key)
        """
    ).first()[0]
    checks.append(
        f"existing visits moved to another user or article version by the batch: {moved:,}"
    )
    for model in GOLD:
        spark.sql(f"restore table gold.{model} to version as of {before[model]}")
    since = log_size()
    gold.full = dbt_run(*GOLD, full_refresh=True)
    said = publications(since)
    print(f"[gold] 1% batch, --full-refresh (baseline, same state): {gold.full.wall:.1f} s")
    for model in GOLD:
        if not said.get(model, "").startswith("a full rebuild"):
            checks.append(f"gold.{model} --full-refresh logged {said.get(model)!r} - MISMATCH")
        left = f"(select * from gold.{model} version as of {after[model]})"
        rows, full_rows, differing = differing_rows(spark, left, f"gold.{model}")
        verdict = "OK" if rows == full_rows and differing == 0 else "MISMATCH"
        checks.append(
            f"gold.{model}: incremental {rows:,} rows, full rebuild {full_rows:,} rows, "
            f"{differing:,} rows differ (EXCEPT ALL both ways) - {verdict}"
        )
    facts, visits = lake.count("gold.fct_visits"), lake.count("silver.visits")
    verdict = "OK" if facts == visits else "MISMATCH"
    checks.append(f"gold.fct_visits {facts:,} rows, silver.visits {visits:,} rows - {verdict}")
    gold.rows = facts


def keys_reached(spark, visits_version: int, before: dict[str, int]) -> dict[str, int]:
    """The keys the batch reaches, per gold model, computed here: what an incremental
    run must recompute. dim_users, dim_articles: the versions (before or after the run)
    of the users and articles changed; fct_visits: the new visits and the visits of
    those users and articles at or after the change's commit time (the visits before
    it keep the version they saw: a late change closes the key's last version then)."""
    reached = {}
    for model, key, column, changed in (
        ("dim_users", "user_version_key", "user_id", "bench_changed_users"),
        ("dim_articles", "article_version_key", "article_id", "bench_changed_articles"),
    ):
        reached[model] = spark.sql(
            f"select count(distinct {key}) from (select * from gold.{model} version as of "
            f"{before[model]} union all select * from gold.{model}) "
            f"where {column} in (select id from {changed})"
        ).first()[0]
    reached["fct_visits"] = spark.sql(
        f"""
        select count(distinct visit_id) from silver.visits as v
        where _bronze_version = {visits_version}
            or exists (
                select 1 from bench_changed_users as c
                where c.id = v.user_id and v.event_time >= timestamp_millis(c.commit_ms)
            )
            or exists (
                select 1 from bench_changed_articles as c
                where c.id = v.article_id and v.event_time >= timestamp_millis(c.commit_ms)
            )
        """
    ).first()[0]
    return reached


def _incremental_check(gold: Gold) -> list[str]:
    """Each gold model's run was incremental and recomputed the keys the batch reaches,
    no more and no fewer."""
    lines = []
    for model in GOLD:
        said = gold.said.get(model, "nothing logged")
        found = re.match(r"incremental: (\d+) keys", said)
        reached = gold.reached[model]
        if not found:
            verdict = "NOT INCREMENTAL: MISMATCH"
        elif int(found.group(1)) != reached:
            verdict = f"the batch reaches {reached:,} keys: MISMATCH"
        else:
            verdict = f"the batch reaches {reached:,} keys - OK"
        lines.append(f"gold.{model} incremental run: {said}; {verdict}")
    return lines


# --- Report -------------------------------------------------------------------------


def _row(case: str, rows: float, timing: Timing, ratio: float, goal: str) -> str:
    return (
        f"| {case} | {rows:,.0f} | {timing.wall:.1f} | {timing.model:.1f} | {ratio:.2f}x | {goal} |"
    )


def _goal(what: str, ratio: float, goal: float) -> str:
    met = "met" if ratio <= goal else "NOT met"
    return f"goal: {what} {ratio:.2f}x (goal <= {goal}x): {met}"


def report(sizes: list[Size], gold: Gold, checks: list[str]) -> str:
    """The markdown table of both measurements, the goals, the loads and the checks."""
    lines = [
        "| measurement | table rows | dbt run s | model s | ratio | goal |",
        "|---|---:|---:|---:|---:|---|",
    ]
    goals = []
    base, grown = sizes
    if base.batches and grown.batches:
        one, many = median(base.batches), median(grown.batches)
        for size, timing, goal in ((base, one, ""), (grown, many, "<= 1.5x the 1x")):
            case = (
                f"filtered_append (dbt run --select visits) per batch, {size.scale}x "
                f"(median of {len(size.batches)})"
            )
            rows = statistics.median(size.table_rows)
            lines.append(_row(case, rows, timing, timing.wall / one.wall, goal))
        goals.append(
            _goal(f"filtered_append per batch at {grown.scale}x / 1x", many.wall / one.wall, 1.5)
        )
    if gold.incremental and gold.full:
        cases = (
            ("dim_users, dim_articles, fct_visits incremental after a 1% batch", gold.incremental),
            ("the same with --full-refresh (baseline, same state)", gold.full),
        )
        for case, timing in cases:
            per_node = ", ".join(f"{m} {timing.nodes.get(m, 0):.1f}" for m in GOLD)
            goal = "<= 0.2x the full refresh" if timing is gold.incremental else ""
            ratio = timing.wall / gold.full.wall
            lines.append(_row(f"{case}: {per_node} s", gold.rows, timing, ratio, goal))
        ratio = gold.incremental.wall / gold.full.wall
        goals.append(_goal("gold incremental / full refresh", ratio, 0.2))
    notes = []
    if base.load:
        notes.append(f"load: first silver build (histories, 1x visits) in {base.load.wall:.1f} s")
    if grown.load:
        notes.append(f"load: older visits to {grown.scale}x in {grown.load.wall:.1f} s")
    if gold.load:
        notes.append(f"load: first build of the gold models in {gold.load.wall:.1f} s")
    if gold.silver:
        notes.append(f"silver rebuild before the timed gold batch: {gold.silver.wall:.1f} s")
    return "\n".join(lines + ["", *goals, *notes, *[f"check: {c}" for c in checks]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_visits",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--visits", type=int, default=100_000, help="visits at 1x (100,000)")
    parser.add_argument("--growth", type=int, default=16, help="the larger size, x (16)")
    parser.add_argument("--users", type=int, default=100_000, help="users (100,000)")
    parser.add_argument("--articles", type=int, default=10_000, help="articles (10,000)")
    parser.add_argument(
        "--batch", type=int, default=10_000, help="visit records per batch (10,000)"
    )
    parser.add_argument("--batches", type=int, default=3, help="timed batches per size (3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 5,000 visits, 2,000 users, 200 articles, batches of 500",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch lakehouse")
    args = parser.parse_args(argv)
    if args.quick:
        args.visits, args.users, args.articles, args.batch = 5_000, 2_000, 200, 500
    if min(args.visits, args.users, args.articles, args.batch) < 100 or args.growth < 2:
        parser.error("--visits, --users, --articles, --batch must be >= 100, --growth >= 2")
    if args.batches < 1:
        parser.error("--batches must be >= 1")

    sizes = [Size(1), Size(args.growth)]
    gold = Gold()
    checks: list[str] = []
    failed = ""
    with scratch_run("bench-visits-", args.keep) as scratch:
        spark, _ = open_lakehouse(scratch)
        print(
            f"visits bench: {args.visits:,} visits at 1x, {args.visits * args.growth:,} at "
            f"{args.growth}x, {args.users:,} users, {args.articles:,} articles, batches of "
            f"{args.batch:,}; scratch {scratch}"
        )
        print(f"machine: {machine()} at the start")
        from python_jobs import bronze
        from python_jobs.topics import load_topics

        bronze.ensure_tables(spark, load_topics())
        lake = Lakehouse(spark, args.users, args.articles)
        phase = "load"
        try:
            lake.append_changes(
                {
                    "users": initial_changes(spark, args.users, "users"),
                    "articles": initial_changes(spark, args.articles, "articles"),
                }
            )
            lake.append_visits(args.visits, (START_MS, VISIT_DAYS * DAY_MS))
            timing = dbt_run("+users_history", "+articles_history", "+visits")
            sizes[0].load = timing
            print(
                f"[load] silver built: {lake.count('silver.users_history'):,} user versions, "
                f"{lake.count('silver.articles_history'):,} article versions, "
                f"{lake.count('silver.visits'):,} visits in {timing.wall:.1f} s"
            )
            phase = "filtered_append 1x"
            measure_size(lake, args, sizes[0], checks)
            phase = f"load to {args.growth}x"
            sizes[1].load = load_older_visits(
                lake, args.visits * (args.growth - 1), f"[load {args.growth}x]"
            )
            phase = f"filtered_append {args.growth}x"
            measure_size(lake, args, sizes[1], checks)
            phase = "gold"
            measure_gold(lake, gold, checks)
        except DbtRunFailed as error:
            failed = f"{error.model} failed in {phase}: {error.short}"
            print(f"FAILED: {failed}")
            checks.append(f"{failed} - MISMATCH")
        print()
        print(report(sizes, gold, checks))
    return 1 if failed or any(c.endswith("MISMATCH") for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
