"""Bronze: the append-only record of everything the sources said.

Pure ``DataFrame -> DataFrame`` transforms (landing files to Bronze rows) and the Bronze
table definition. Sources (file or Kafka readers) and sinks (the Delta writer) live in
:mod:`python_jobs.ingest`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from python_jobs.topics import Topic

BRONZE_SCHEMA = StructType(
    [
        StructField("_raw", StringType(), nullable=False),
        StructField("_source_file", StringType(), nullable=True),
        StructField("_line_number", IntegerType(), nullable=True),
        StructField("_ingested_at", TimestampType(), nullable=False),
        StructField("_batch_id", LongType(), nullable=False),
        StructField("_ingest_date", DateType(), nullable=False),
    ]
)
PARTITION_COLUMN = "_ingest_date"

# Bronze tables refuse updates and deletes: the record of what the sources said is
# never rewritten, only appended to.
TABLE_PROPERTIES = {"delta.appendOnly": "true"}


def is_tombstone(raw: Column) -> Column:
    """A Kafka tombstone as the landing zone writes it: a line that is `null` or empty
    (surrounding whitespace, a CRLF's carriage return included, does not count)."""
    return F.regexp_replace(raw, r"^\s+|\s+$", "").isin("", "null")


def split_lines(files: DataFrame) -> DataFrame:
    """Whole landing files (`value`, `_source_file`) to one row per line.

    Keeps the line exactly as written (`_raw`) and its 1-based `_line_number`. The
    newline that ends the last line does not make an extra empty line; an empty file
    has no lines.
    """
    body = F.regexp_replace(F.col("value"), r"\n\z", "")
    return (
        files.where(F.length("value") > 0)
        .select("_source_file", F.posexplode(F.split(body, "\n", -1)).alias("_pos", "_raw"))
        .select(
            "_raw",
            "_source_file",
            (F.col("_pos") + 1).cast("int").alias("_line_number"),
        )
    )


def decorate(lines: DataFrame, batch_id: int, ingested_at: datetime) -> DataFrame:
    """Lines of one micro-batch to Bronze rows: tombstones out, metadata columns in.

    `ingested_at` must be timezone-aware (UTC): a naive datetime is ambiguous.
    """
    if ingested_at.tzinfo is None:
        raise ValueError("decorate: ingested_at must be timezone-aware (UTC)")
    ingested_at = ingested_at.astimezone(UTC)
    return lines.where(~is_tombstone(F.col("_raw"))).select(
        "_raw",
        "_source_file",
        "_line_number",
        F.lit(ingested_at).cast("timestamp").alias("_ingested_at"),
        F.lit(batch_id).cast("bigint").alias("_batch_id"),
        F.lit(ingested_at.date()).alias(PARTITION_COLUMN),
    )


def ensure_table(spark: SparkSession, topic: Topic) -> None:
    """Create the topic's Bronze table (empty, by path) if it does not exist yet.

    Safe to call from two processes at once: the loser of the race for the first
    commit finds the winner's table and returns.
    """
    path = str(topic.bronze_path)
    if DeltaTable.isDeltaTable(spark, path):
        return
    builder = (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(BRONZE_SCHEMA)
        .partitionedBy(PARTITION_COLUMN)
    )
    for key, value in TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    try:
        builder.execute()
    except Exception:
        if not DeltaTable.isDeltaTable(spark, path):
            raise


def ensure_tables(spark: SparkSession, topics: list[Topic]) -> None:
    for topic in topics:
        ensure_table(spark, topic)
