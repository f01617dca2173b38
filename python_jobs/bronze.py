"""Bronze: the append-only record of everything the sources said.

Pure ``DataFrame -> DataFrame`` transforms and the definitions of the tables the
ingestion job writes by path:

- one Bronze table per topic (``BRONZE_SCHEMA``): the record value exactly as received,
  its parsed Debezium envelope, where it came from and when it was ingested;
- ``bronze.dead_letter`` (``DEAD_LETTER_SCHEMA``): every record that could not be parsed
  or lacks what the contract requires, with the reason, the raw value and its position;
- ``ops.ingestion_batches`` (``BATCH_SCHEMA``): one row per micro-batch and heartbeat.

A source (the landing files or Kafka, :mod:`python_jobs.ingest`) yields *lines*: ``_raw``
plus the transport position (``LINE_COLUMNS``). :func:`classify` parses them with Spark's
own JSON functions (no Python UDF on the hot path) and labels each one ``bronze``,
``dead_letter`` or ``tombstone``, so that records read = Bronze rows + dead letters +
tombstones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from delta.tables import DeltaTable
from py4j.protocol import Py4JError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from python_jobs.spark import paths, shared_catalog
from python_jobs.topics import Topic

PARTITION_COLUMN = "_ingest_date"
DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
OPS = ("c", "u", "d", "r", "t")
# 9999-12-31T23:59:59.999Z: beyond it a commit time is not a time (microseconds in
# `ts_ms`, say) and would break every reader of the batch.
MAX_TS_MS = 253_402_300_799_999

# Bronze and dead-letter tables refuse updates and deletes: the record of what the
# sources said is never rewritten, only appended to. File statistics (for data
# skipping) only on the columns queries filter on, not on the long JSON texts, whose
# statistics cost every write and skip nothing.
#
# No deletion vectors on a table nothing deletes from (the session's default turns them
# on for new tables, python_jobs/spark.py): a table whose protocol has the feature costs
# every scan of it one more Spark job, which lists all its files to look for vectors
# (Delta's `ScanWithDeletionVectors`), even when it has none.
APPENDED_ONLY = {"delta.enableDeletionVectors": "false"}
TABLE_PROPERTIES = {"delta.appendOnly": "true", **APPENDED_ONLY}
STATS_COLUMNS = (
    "_ingested_at,_batch_id,_topic,_partition,_offset,_source_file,_line_number,"
    "op,source_committed_at,source_lsn"
)
# Row tracking gives every Bronze row the version of the commit that wrote it
# (`_metadata.row_commit_version`, kept through OPTIMIZE): the staging models select it
# as `_bronze_version`, and the windowed materializations read the rows committed since
# the last commit a table absorbed (macros/windows), whatever the writers' clocks say.
ROW_TRACKING = {"delta.enableRowTracking": "true"}
BRONZE_PROPERTIES = {
    **TABLE_PROPERTIES,
    **ROW_TRACKING,
    "delta.dataSkippingStatsColumns": STATS_COLUMNS,
}
DEAD_LETTER_PROPERTIES = {
    **TABLE_PROPERTIES,
    "delta.dataSkippingStatsColumns": "_error_reason,_ingested_at,_batch_id,_topic",
}


def _fields(*specs: tuple[str, DataType, bool]) -> list[StructField]:
    return [StructField(name, kind, nullable) for name, kind, nullable in specs]


# Where a record came from: topic, partition and offset for Kafka; file and line for the
# landing zone (the other pair is null).
POSITION_FIELDS = _fields(
    ("_topic", StringType(), False),
    ("_partition", IntegerType(), True),
    ("_offset", LongType(), True),
    ("_source_file", StringType(), True),
    ("_line_number", IntegerType(), True),
)
# What a source yields: the record value (null for a Kafka tombstone) and its position.
LINE_SCHEMA = StructType(_fields(("_raw", StringType(), True)) + POSITION_FIELDS)
LINE_COLUMNS = LINE_SCHEMA.fieldNames()

DECORATION_FIELDS = _fields(
    ("_ingested_at", TimestampType(), False),
    ("_batch_id", LongType(), False),
    (PARTITION_COLUMN, DateType(), False),
)

# The parsed Debezium envelope; null for event topics except `record_key`.
ENVELOPE_FIELDS = _fields(
    ("record_key", StringType(), True),
    ("op", StringType(), True),
    ("before", StringType(), True),
    ("after", StringType(), True),
    ("source_committed_at", TimestampType(), True),
    ("source_lsn", LongType(), True),
    ("source_tx_id", LongType(), True),
    ("source_sequence", StringType(), True),
    ("source_snapshot", StringType(), True),
    ("source_db", StringType(), True),
    ("source_schema", StringType(), True),
    ("source_table", StringType(), True),
)

BRONZE_SCHEMA = StructType(
    _fields(("_raw", StringType(), False)) + ENVELOPE_FIELDS + POSITION_FIELDS + DECORATION_FIELDS
)
DEAD_LETTER_SCHEMA = StructType(
    _fields(
        ("_raw", StringType(), False),
        ("_error_reason", StringType(), False),
        ("_error_detail", StringType(), True),
    )
    + POSITION_FIELDS
    + DECORATION_FIELDS
)
BATCH_SCHEMA = StructType(
    _fields(
        ("topic", StringType(), False),
        ("source", StringType(), False),
        ("query_id", StringType(), False),
        ("batch_id", LongType(), True),
        ("is_heartbeat", BooleanType(), False),
        ("records_read", LongType(), False),
        ("bronze_rows", LongType(), False),
        ("dead_letters", LongType(), False),
        ("tombstones", LongType(), False),
        ("max_source_committed_at", TimestampType(), True),
        ("lag_seconds", DoubleType(), True),
        ("started_at", TimestampType(), False),
        ("ingested_at", TimestampType(), False),
        ("duration_seconds", DoubleType(), False),
    )
)

# --- parsing -----------------------------------------------------------------------------

# Strict JSON: Spark's parser otherwise accepts 'single quotes' and NaN.
JSON_OPTIONS = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}
# The top level as text fields. Parsed as `[<record>,{}]` and required to give exactly
# two elements, so that trailing garbage (even after a `]`), two values on one line and
# a truncated value all fail instead of being half-read: Spark's parser reads one root
# value and ignores what follows it.
_TOP_TEXT = "array<struct<payload: string, op: string, before: string, after: string>>"
_ENVELOPE_TEXT = "struct<op: string, before: string, after: string>"
_SOURCE = (
    "struct<ts_ms: bigint, lsn: bigint, txId: bigint, sequence: string, snapshot: string,"
    " db: string, schema: string, table: string>"
)


def _image(key: tuple[str, ...]) -> str:
    """A row image parsed for its key: the key columns as text (a number, say, as
    written), the other columns skipped unparsed; of a column given twice, the last."""
    return "struct<" + ", ".join(f"`{name}`: string" for name in key) + ">"


def _shape(key: tuple[str, ...]) -> str:
    """The shape, typed: a field of the wrong JSON type parses as null (Spark keeps the
    other fields), which tells an object from a string that merely holds JSON text."""
    image = _image(key)
    return (
        f"struct<payload: struct<before: {image}, after: {image}, source: {_SOURCE}>,"
        f" before: {image}, after: {image}, source: {_SOURCE}>"
    )


def is_tombstone(raw: Column) -> Column:
    """A Kafka tombstone: a null value, or a landing line that is `null` or empty
    (surrounding whitespace, a CRLF's carriage return included, does not count)."""
    # Trims Java's \s characters. A line that starts with `{` (nearly all of them) is
    # decided by its first character, without looking at the rest.
    blank_or_null = F.btrim(raw, F.lit(" \t\n\x0b\f\r")).isin("", "null")
    return F.coalesce(
        F.when(F.substring(raw, 1, 1) == "{", F.lit(False)).otherwise(blank_or_null),
        F.lit(True),
    )


def split_lines(files: DataFrame, topic: str) -> DataFrame:
    """Whole landing files (`value`, `_source_file`) to lines (``LINE_SCHEMA``).

    Keeps each line exactly as written (`_raw`) with its 1-based `_line_number`. The
    newline that ends the last line does not make an extra empty line; an empty file
    has no lines.
    """
    parts = files.select("_source_file", F.split("value", "\n", -1).alias("_parts"))
    lines = parts.select(
        "_source_file",
        F.size("_parts").alias("_count"),
        F.posexplode("_parts").alias("_pos", "_raw"),
    )
    # The empty string after the final newline is not a line (nor is an empty file).
    last_is_empty = (F.col("_pos") == F.col("_count") - 1) & (F.col("_raw") == "")
    return lines.where(~last_is_empty).select(
        "_raw",
        F.lit(topic).alias("_topic"),
        F.lit(None).cast("int").alias("_partition"),
        F.lit(None).cast("bigint").alias("_offset"),
        "_source_file",
        (F.col("_pos") + 1).cast("int").alias("_line_number"),
    )


# The row index within a task (Spark partition) is the low 33 bits of
# monotonically_increasing_id(); the task's number is in the bits above.
_ROW_INDEX_BITS = (1 << 33) - 1


def number_lines(
    rows: DataFrame, topic: str, lines_before: Mapping[tuple[str, int], int] | None = None
) -> DataFrame:
    """Rows of Spark's line-oriented text source to lines (``LINE_SCHEMA``), numbered.

    `rows` has `_raw` (a line, without its newline), `_source_file` and `_block_start`
    (where the file split the row was read from starts: `_metadata.file_block_start`),
    straight from the scan, each task reading one file split, in order (the ingestion
    session's `spark.sql.files.openCostInBytes`, :func:`python_jobs.spark.ingestion_session`).
    A line's number is then its row index in the task, plus, for a split that does not
    start the file (a file larger than one split), the lines of the splits before it:
    `lines_before[(file, block start)]`. A row of such a split missing from it fails the
    batch instead of being misnumbered.
    """
    block_start = F.col("_block_start")
    missing = F.raise_error(
        F.concat(
            F.lit("no line count for the split of "),
            F.col("_source_file"),
            F.lit(" at byte "),
            block_start.cast("string"),
        )
    )
    before: Column = F.when(block_start == 0, F.lit(0))
    if lines_before:
        counts: list[Column] = []
        for (file, start), count in sorted(lines_before.items()):
            counts += [F.lit(f"{start}:{file}"), F.lit(count)]
        key = F.concat(block_start.cast("string"), F.lit(":"), F.col("_source_file"))
        before = before.otherwise(F.coalesce(F.create_map(*counts)[key], missing.cast("long")))
    else:
        before = before.otherwise(missing.cast("long"))
    index = F.monotonically_increasing_id().bitwiseAND(_ROW_INDEX_BITS)
    return rows.select(
        "_raw",
        F.lit(topic).alias("_topic"),
        F.lit(None).cast("int").alias("_partition"),
        F.lit(None).cast("bigint").alias("_offset"),
        "_source_file",
        (index + before + 1).cast("int").alias("_line_number"),
    )


def _json(text: Column, schema: str) -> Column:
    return F.from_json(text, schema, JSON_OPTIONS)


def _bracketed(raw: Column) -> Column:
    return F.concat(F.lit("["), raw, F.lit(",{}]"))


Check = tuple[Column, str, Column | str]


def _first_failure(checks: list[Check]) -> tuple[Column, Column]:
    """(reason, detail) of the first check that fails, in order; nulls if none does."""
    reason: Column = F.lit(None).cast("string")
    detail: Column = F.lit(None).cast("string")
    for failed, name, text in reversed(checks):
        text_column = F.lit(text) if isinstance(text, str) else text
        reason = F.when(failed, F.lit(name)).otherwise(reason)
        detail = F.when(failed, text_column).otherwise(detail)
    return reason, detail


def _key_json(image: Column, key: tuple[str, ...]) -> Column:
    """The key columns of a parsed row image as a JSON object of their text values."""
    parts: list[Column] = []
    for name in key:
        parts += [F.lit(name), image[name]]
    return F.to_json(F.create_map(*parts), {"ignoreNullFields": "false"})


def _json_checks(max_record_bytes: int) -> list[Check]:
    """Checks on any record, given `_top`: the record parsed inside `[` `]`."""
    raw, top = F.col("_raw"), F.col("_top")
    # Only evaluated for records whose `_top` failed, to tell why.
    values = _json(_bracketed(raw), "array<string>")
    size = F.octet_length(raw)
    # The record and the `{}` after it; fewer if the parser stopped early, more if the
    # line held several values.
    elements = F.when(top.isNotNull(), F.size(top)).otherwise(F.size(values))
    return [
        (
            size > max_record_bytes,
            "too_large",
            F.format_string(f"%d bytes, over the limit of {max_record_bytes}", size),
        ),
        # Spark's JSON parser reads text as UTF-8 and replaces what is not with U+FFFD:
        # such a record would parse, its text altered.
        (~F.is_valid_utf8(raw), "invalid_utf8", "not valid UTF-8"),
        (top.isNull() & values.isNull(), "malformed_json", "not valid JSON"),
        (top.isNull() & (F.size(values) == 2), "not_an_object", "valid JSON but not an object"),
        (elements < 2, "malformed_json", "not valid JSON"),
        (elements > 2, "malformed_json", "more than one JSON value"),
    ]


def _parse_cdc(
    lines: DataFrame, topic: Topic, keep: tuple[str, ...] = ()
) -> tuple[DataFrame, list[Column], list[Check]]:
    """Parse Debezium envelopes: the columns to keep and the checks each must pass."""
    raw = F.col("_raw")
    top = lines.select(
        *LINE_COLUMNS,
        *keep,
        _json(_bracketed(raw), _TOP_TEXT).alias("_top"),
        _json(raw, _shape(topic.key)).alias("_shape"),
    )
    first, shape = F.col("_top")[0], F.col("_shape")
    wrapped = first["payload"].isNotNull()
    parsed = top.select(
        "*",
        wrapped.alias("_wrapped"),
        F.when(wrapped, _json(first["payload"], _ENVELOPE_TEXT))
        .otherwise(F.struct(first["op"], first["before"], first["after"]))
        .alias("_text"),
        F.when(wrapped, shape["payload"])
        .otherwise(F.struct(shape["before"], shape["after"], shape["source"]))
        .alias("_typed"),
    )
    text, typed = F.col("_text"), F.col("_typed")
    op, source = text["op"], typed["source"]
    image = F.when(op == "d", typed["before"]).otherwise(typed["after"])
    image_name = F.when(op == "d", F.lit("before")).otherwise(F.lit("after"))
    needs_image = op.isin("c", "u", "r", "d")

    def not_object(name: str) -> Column:
        return text[name].isNotNull() & typed[name].isNull()

    checks: list[Check] = [
        (
            F.col("_wrapped") & shape["payload"].isNull(),
            "invalid_envelope",
            "payload is not a JSON object",
        ),
        (op.isNull(), "unknown_op", "op is missing"),
        (
            ~op.isin(*OPS),
            "unknown_op",
            F.concat(F.lit("op '"), op, F.lit(f"' is not one of {','.join(OPS)}")),
        ),
        (source.isNull(), "invalid_envelope", "source is missing or not an object"),
        (source["lsn"].isNull(), "invalid_envelope", "source.lsn is missing or not an integer"),
        (source["ts_ms"].isNull(), "invalid_envelope", "source.ts_ms is missing or not an integer"),
        (
            (source["ts_ms"] < 0) | (source["ts_ms"] > MAX_TS_MS),
            "invalid_envelope",
            F.format_string("source.ts_ms %d is not a time in years 1970 to 9999", source["ts_ms"]),
        ),
        (not_object("before"), "invalid_envelope", "before is not a JSON object"),
        (not_object("after"), "invalid_envelope", "after is not a JSON object"),
        (
            needs_image & image.isNull(),
            "invalid_envelope",
            F.concat(F.lit("op "), op, F.lit(" without a row image in "), image_name),
        ),
        (
            needs_image & F.coalesce(*[image[name] for name in topic.key]).isNull(),
            "missing_key",
            F.concat(F.lit(f"no key ({', '.join(topic.key)}) in "), image_name),
        ),
    ]
    columns = [
        F.when(needs_image, _key_json(image, topic.key)).alias("record_key"),
        op.alias("op"),
        text["before"].alias("before"),
        text["after"].alias("after"),
        F.timestamp_millis(source["ts_ms"]).alias("source_committed_at"),
        source["lsn"].alias("source_lsn"),
        source["txId"].alias("source_tx_id"),
        source["sequence"].alias("source_sequence"),
        source["snapshot"].alias("source_snapshot"),
        source["db"].alias("source_db"),
        source["schema"].alias("source_schema"),
        source["table"].alias("source_table"),
    ]
    return parsed, columns, checks


def _parse_events(
    lines: DataFrame, topic: Topic, keep: tuple[str, ...] = ()
) -> tuple[DataFrame, list[Column], list[Check]]:
    """Event topics: one JSON object per record. The key is read, not required: a record
    without one is the business layer's to filter (and count)."""
    parsed = lines.select(
        *LINE_COLUMNS,
        *keep,
        _json(_bracketed(F.col("_raw")), f"array<{_image(topic.key)}>").alias("_top"),
    )
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in ENVELOPE_FIELDS[1:]]
    return parsed, [_key_json(F.col("_top")[0], topic.key).alias("record_key"), *nulls], []


def classify(lines: DataFrame, topic: Topic, max_record_bytes: int) -> DataFrame:
    """Lines (``LINE_SCHEMA``) to parsed records labelled by `_status`.

    `_status` is `tombstone`, `dead_letter` (with `_error_reason` and `_error_detail`)
    or `bronze`. The envelope columns (``ENVELOPE_FIELDS``) are set for Bronze rows.
    Reasons, first failing wins: `too_large`, `invalid_utf8`, `malformed_json`,
    `not_an_object`; then for CDC topics `invalid_envelope` (payload not an object), `unknown_op`,
    `invalid_envelope` (source, before, after), `missing_key` (every key column absent
    or null in the row image).

    CDC records take the fast path first (:func:`classify_fast`); every record it
    declines is classified by the exact rules in the same pass, so the result is the
    exact path's for every record. (Event records take the exact path, which parses
    them once.) The ingestion job splits the two instead (:func:`classify_declined`), so
    that a batch without declined records never evaluates the exact rules.
    """
    if topic.kind != "cdc":
        return _classify_exact(lines, topic, max_record_bytes)
    fast = classify_fast(lines, topic, max_record_bytes)
    undecided = F.col("_status") == DECLINED
    # The exact path sees only the records the fast path declined (a null `_raw` costs
    # it nothing); the others keep the fast path's columns.
    handed_on = fast.select(
        F.when(undecided, F.col("_raw")).alias("_raw"),
        *LINE_COLUMNS[1:],
        F.col("_raw").alias("_raw_in"),
        F.col("_status").alias("_fast_status"),
        F.struct(*[f.name for f in ENVELOPE_FIELDS]).alias("_fast_row"),
    )
    keep = ("_raw_in", "_fast_status", "_fast_row")
    exact = _classify_exact(handed_on, topic, max_record_bytes, keep)
    decided = F.col("_fast_status") != DECLINED

    def pick(name: str, fast_value: Column) -> Column:
        return F.when(decided, fast_value).otherwise(F.col(name)).alias(name)

    return exact.select(
        F.col("_raw_in").alias("_raw"),
        *LINE_COLUMNS[1:],
        pick("_status", F.col("_fast_status")),
        pick("_error_reason", F.lit(None).cast("string")),
        pick("_error_detail", F.lit(None).cast("string")),
        *[pick(f.name, F.col("_fast_row")[f.name]) for f in ENVELOPE_FIELDS],
    )


# The status of a CDC record the fast path cannot decide (classify_fast).
DECLINED = "declined"


def classify_fast(lines: DataFrame, topic: Topic, max_record_bytes: int) -> DataFrame:
    """A CDC topic's lines, one parse each (:func:`_fast_cdc`), labelled by `_status`:
    `tombstone`, `bronze` (with the envelope columns the exact rules give it) or
    `declined`, a record the fast path cannot decide (a dead letter, or an object
    it cannot tell from a string holding JSON text), for :func:`classify_declined`.
    Same columns as :func:`classify`; no reasons (no dead letter is decided here)."""
    fast = _fast_cdc(lines, topic, max_record_bytes)
    status = (
        F.when(is_tombstone(F.col("_raw")), F.lit("tombstone"))
        .when(F.col("_fast_ok"), F.lit("bronze"))
        .otherwise(F.lit(DECLINED))
    )
    labelled = fast.select(*LINE_COLUMNS, status.alias("_status"), "_fast_row")
    is_bronze = F.col("_status") == "bronze"
    return labelled.select(
        *LINE_COLUMNS,
        "_status",
        F.lit(None).cast("string").alias("_error_reason"),
        F.lit(None).cast("string").alias("_error_detail"),
        *[F.when(is_bronze, F.col("_fast_row")[f.name]).alias(f.name) for f in ENVELOPE_FIELDS],
    )


def classify_declined(lines: DataFrame, topic: Topic, max_record_bytes: int) -> DataFrame:
    """The records of `lines` that :func:`classify_fast` declines, classified by the exact
    rules (`bronze` or `dead_letter`, as :func:`classify` labels them). Together with
    classify_fast's `bronze` and `tombstone` records: :func:`classify`, record for
    record."""
    fast = classify_fast(lines, topic, max_record_bytes)
    declined = fast.where(F.col("_status") == DECLINED).select(*LINE_COLUMNS)
    return _classify_exact(declined, topic, max_record_bytes)


# The fast path's parse: the envelope with the row images as text (as the exact path
# stores them) and `source` typed, bare or wrapped in `payload`, in one pass.
_FAST_ENVELOPE = f"op: string, before: string, after: string, source: {_SOURCE}"
_FAST_TOP = f"array<struct<payload: struct<{_FAST_ENVELOPE}>, {_FAST_ENVELOPE}>>"


def _fast_cdc(lines: DataFrame, topic: Topic, max_record_bytes: int) -> DataFrame:
    """One parse per record: `_fast_ok` for a record the exact path would put in Bronze,
    with the same columns (`_fast_row`); false for any other (it then decides).

    The exact path parses the record twice, as text and typed, to tell a row image
    that is an object from a string that holds JSON text. Here the text view alone
    decides: a row image's text starts with `{` only for an object or for a string
    whose value starts with `{`, which a record shows as `"{` (or as a `\\u` escape),
    so a record containing either takes the exact path. The key comes from the image
    text parsed as the exact path parses the image.
    """
    raw = F.col("_raw")
    fast = F.col("_fast")
    first, payload = fast[0], fast[0]["payload"]
    bare = F.struct(*[first[name].alias(name) for name in ("op", "before", "after", "source")])
    parsed = lines.select(*LINE_COLUMNS, _json(_bracketed(raw), _FAST_TOP).alias("_fast"))
    enveloped = parsed.select(
        *LINE_COLUMNS,
        # One JSON object, alone on its line; `payload`, if present, an object.
        (
            (F.size(fast) == 2)
            & first.isNotNull()
            & (payload.isNotNull() | ~raw.contains('"payload"'))
        ).alias("_parsed"),
        F.when(payload.isNotNull(), payload).otherwise(bare).alias("_env"),
    )
    env = F.col("_env")
    op, source = env["op"], env["source"]
    image_text = F.when(op == "d", env["before"]).otherwise(env["after"])
    # Parsed as the exact path parses the image.
    imaged = enveloped.select("*", _json(image_text, _image(topic.key)).alias("_image"))
    image = F.col("_image")
    needs_image = op.isin("c", "u", "r", "d")

    def object_or_null(text: Column) -> Column:
        return text.isNull() | text.startswith("{")

    accepted = (
        F.col("_parsed")
        & (F.octet_length(raw) <= max_record_bytes)
        & F.is_valid_utf8(raw)
        & ~raw.contains('"{')
        & ~raw.contains("\\u")
        & op.isin(*OPS)
        & source["lsn"].isNotNull()
        & source["ts_ms"].between(0, MAX_TS_MS)
        & object_or_null(env["before"])
        & object_or_null(env["after"])
        & (~needs_image | F.coalesce(*[image[name] for name in topic.key]).isNotNull())
    )
    columns = [
        F.when(needs_image, _key_json(image, topic.key)).alias("record_key"),
        op.alias("op"),
        env["before"].alias("before"),
        env["after"].alias("after"),
        F.timestamp_millis(source["ts_ms"]).alias("source_committed_at"),
        source["lsn"].alias("source_lsn"),
        source["txId"].alias("source_tx_id"),
        source["sequence"].alias("source_sequence"),
        source["snapshot"].alias("source_snapshot"),
        source["db"].alias("source_db"),
        source["schema"].alias("source_schema"),
        source["table"].alias("source_table"),
    ]
    return imaged.select(
        *LINE_COLUMNS,
        F.coalesce(accepted, F.lit(False)).alias("_fast_ok"),
        F.struct(*columns).alias("_fast_row"),
    )


def _classify_exact(
    lines: DataFrame, topic: Topic, max_record_bytes: int, keep: tuple[str, ...] = ()
) -> DataFrame:
    """:func:`classify` by the exact rules, for every record; `keep` names columns of
    `lines` carried through."""
    parse = _parse_cdc if topic.kind == "cdc" else _parse_events
    parsed, columns, topic_checks = parse(lines, topic, keep)
    reason, detail = _first_failure(_json_checks(max_record_bytes) + topic_checks)
    status = (
        F.when(is_tombstone(F.col("_raw")), F.lit("tombstone"))
        .when(reason.isNotNull(), F.lit("dead_letter"))
        .otherwise(F.lit("bronze"))
    )
    labelled = parsed.select(
        *LINE_COLUMNS,
        *keep,
        status.alias("_status"),
        reason.alias("_error_reason"),
        detail.alias("_error_detail"),
        *columns,
    )
    is_bronze = F.col("_status") == "bronze"
    is_dead = F.col("_status") == "dead_letter"
    return labelled.select(
        *LINE_COLUMNS,
        *keep,
        "_status",
        F.when(is_dead, F.col("_error_reason")).alias("_error_reason"),
        F.when(is_dead, F.col("_error_detail")).alias("_error_detail"),
        *[F.when(is_bronze, F.col(f.name)).alias(f.name) for f in ENVELOPE_FIELDS],
    )


def decorate(records: DataFrame, batch_id: int, ingested_at: datetime) -> DataFrame:
    """Add the micro-batch's metadata columns (``DECORATION_FIELDS``) to every record.

    `ingested_at` must be timezone-aware (UTC): a naive datetime is ambiguous.
    """
    if ingested_at.tzinfo is None:
        raise ValueError("decorate: ingested_at must be timezone-aware (UTC)")
    ingested_at = ingested_at.astimezone(UTC)
    return records.select(
        "*",
        F.lit(ingested_at).cast("timestamp").alias("_ingested_at"),
        F.lit(batch_id).cast("bigint").alias("_batch_id"),
        F.lit(ingested_at.date()).alias(PARTITION_COLUMN),
    )


def bronze_rows(records: DataFrame) -> DataFrame:
    """Decorated, classified records to the rows of the topic's Bronze table."""
    return records.where(F.col("_status") == "bronze").select(*BRONZE_SCHEMA.fieldNames())


def dead_letter_rows(records: DataFrame) -> DataFrame:
    """Decorated, classified records to the rows of `bronze.dead_letter`."""
    return records.where(F.col("_status") == "dead_letter").select(*DEAD_LETTER_SCHEMA.fieldNames())


# A batch's records set aside for a second pass (declined by the fast path, or dead
# letters) are found again by the hash of their position, observed in the first pass
# (:func:`set_aside_metric`), when they are at most this many: the second pass then
# reads the batch's lines without parsing them, and parses only those.
MAX_SET_ASIDE = 10_000


def _position_hash() -> Column:
    return F.xxhash64(*[F.col(f.name) for f in POSITION_FIELDS])


def set_aside_metric() -> Column:
    """For `DataFrame.observe` on classified records: the position hashes of the records
    a second pass must see again (`declined` or `dead_letter`)."""
    again = F.col("_status").isin(DECLINED, "dead_letter")
    return F.collect_list(F.when(again, _position_hash())).alias("set_aside")


def narrowed_to(lines: DataFrame, hashes: list[int] | None) -> DataFrame:
    """`lines` (``LINE_SCHEMA``) narrowed to the positions whose hashes `hashes` holds
    (:func:`set_aside_metric`), before any parse; all of them when `hashes` is None or
    longer than ``MAX_SET_ASIDE``. A hash shared by another record lets it through: the
    second pass classifies what it reads, so it decides that one as the first did."""
    if hashes is None or len(hashes) > MAX_SET_ASIDE:
        return lines
    return lines.where(_position_hash().isin(sorted(set(hashes))))


REASONS = (
    "too_large",
    "invalid_utf8",
    "malformed_json",
    "not_an_object",
    "invalid_envelope",
    "unknown_op",
    "missing_key",
)


def status_metrics(reasons: tuple[str, ...] = REASONS) -> list[Column]:
    """What :func:`count_statuses` counts, as aggregates for `DataFrame.observe`: the
    counts then come with the first write of the records, without a job of their own.
    `reasons`: the dead-letter reasons the records may have (python_jobs.dms has its
    own; none for :func:`classify_fast`, which decides no dead letter)."""
    status, reason = F.col("_status"), F.col("_error_reason")
    return [
        F.count(F.lit(1)).alias("records_read"),
        *[F.count_if(status == name).alias(key) for name, key in _STATUS_KEYS.items()],
        F.max("source_committed_at").alias("max_source_committed_at"),
        *[F.count_if(reason == name).alias(f"reason_{name}") for name in reasons],
    ]


# `_status` values and their keys in the counts.
_STATUS_KEYS = {
    "bronze": "bronze_rows",
    "dead_letter": "dead_letters",
    "tombstone": "tombstones",
    DECLINED: "declined",
}


def observed_counts(
    metrics: Mapping[str, object], reasons: tuple[str, ...] = REASONS
) -> dict[str, object]:
    """The result of :func:`status_metrics` as :func:`count_statuses` returns it."""
    counts: dict[str, object] = {
        name: int(metrics[name])  # type: ignore[call-overload]
        for name in ("records_read", *_STATUS_KEYS.values())
    }
    counts["max_source_committed_at"] = metrics["max_source_committed_at"]
    found = {name: int(metrics[f"reason_{name}"]) for name in reasons}  # type: ignore[call-overload]
    counts["reasons"] = {name: n for name, n in found.items() if n}
    return counts


def count_statuses(records: DataFrame) -> dict[str, object]:
    """Records read, per status (`declined`: left undecided by :func:`classify_fast`),
    dead letters per reason, and the newest source commit time, from one small
    aggregation."""
    groups = (
        records.groupBy("_status", "_error_reason")
        .agg(F.count(F.lit(1)).alias("n"), F.max("source_committed_at").alias("newest"))
        .collect()
    )
    per_status = {s: sum(g["n"] for g in groups if g["_status"] == s) for s in _STATUS_KEYS}
    newest = [g["newest"] for g in groups if g["newest"] is not None]
    return {
        "records_read": sum(per_status.values()),
        **{key: per_status[name] for name, key in _STATUS_KEYS.items()},
        "max_source_committed_at": max(newest) if newest else None,
        "reasons": {g["_error_reason"]: g["n"] for g in groups if g["_status"] == "dead_letter"},
    }


def with_declined(first: Mapping[str, object], declined: Mapping[str, object]) -> dict[str, object]:
    """The counts of a batch classified in two passes: `first` counts every record
    (:func:`classify_fast`), `declined` the records it declined, classified by
    :func:`classify_declined`; they are Bronze rows, dead letters (with reasons) or,
    never in practice, tombstones."""
    newest = (first["max_source_committed_at"], declined["max_source_committed_at"])
    times = [t for t in newest if t is not None]
    return {
        "records_read": first["records_read"],
        "bronze_rows": int(first["bronze_rows"]) + int(declined["bronze_rows"]),  # type: ignore[call-overload]
        "dead_letters": declined["dead_letters"],
        "tombstones": int(first["tombstones"]) + int(declined["tombstones"]),  # type: ignore[call-overload]
        "declined": 0,
        "max_source_committed_at": max(times) if times else None,  # type: ignore[type-var]
        "reasons": declined["reasons"],
    }


# --- tables --------------------------------------------------------------------------------


def ensure_delta_table(
    spark: SparkSession,
    path: str,
    schema: StructType,
    partition_by: Iterable[str] = (),
    properties: dict[str, str] | None = None,
) -> bool:
    """Create an empty Delta table by path if there is none; add missing columns to an
    older one (new columns are nullable, so old rows read as null). True if this call
    created it.

    Safe to call from two processes at once: the loser of the race for the first
    commit finds the winner's table and returns (False).
    """
    if not DeltaTable.isDeltaTable(spark, path):
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        partitions = list(partition_by)
        if partitions:
            builder = builder.partitionedBy(*partitions)
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        try:
            builder.execute()
        except Exception:
            if not DeltaTable.isDeltaTable(spark, path):
                raise
            return False
        return True
    table = DeltaTable.forPath(spark, path)
    existing = set(table.toDF().columns)
    missing = [f for f in schema.fields if f.name not in existing]
    if missing:
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in missing)
        spark.sql(f"alter table delta.`{path}` add columns ({columns})")
    # A table made before row tracking was on gets it (its rows then carry the version
    # of the commit that enables it).
    wanted = {k: v for k, v in (properties or {}).items() if k in ROW_TRACKING}
    current = _table_properties(table) if wanted else {}
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        assignments = ", ".join(f"'{k}' = '{v}'" for k, v in changed.items())
        spark.sql(f"alter table delta.`{path}` set tblproperties ({assignments})")
    return False


def _table_properties(table: DeltaTable) -> dict[str, str]:
    """A Delta table's properties, from the snapshot its DeltaTable just loaded.

    `DeltaTable.detail()` computes them too, but with the table's size and file count:
    Spark jobs over its whole state (about 9 s for the five ingestion tables in a new
    process, against 1 s from the log's metadata). Through Delta's log where this Delta
    version exposes it, else `detail()`.
    """
    try:
        return logged_properties(table)
    except Py4JError:  # another Delta's internals: the public, slower way
        return table.detail().select("properties").first()["properties"]


def logged_properties(table: DeltaTable) -> dict[str, str]:
    """The properties in the metadata of the table's latest loaded snapshot."""
    configuration = table._jdt.deltaLog().unsafeVolatileSnapshot().metadata().configuration()
    entries = configuration.iterator()
    properties = {}
    while entries.hasNext():
        entry = entries.next()
        properties[entry._1()] = entry._2()
    return properties


def dead_letter_path() -> str:
    return str(paths()["bronze"] / "dead_letter")


def batches_path() -> str:
    return str(paths()["ops"] / "ingestion_batches")


def ensure_tables(spark: SparkSession, topics: list[Topic]) -> set[str]:
    """Every table the ingestion job writes: one Bronze table per topic, the dead
    letters and the batch log; with the shared catalog, also registered in it. Returns
    the paths of the tables this call created (empty: nothing to check in them)."""
    created = {str(t.bronze_path) for t in topics if ensure_table(spark, t)}
    if ensure_delta_table(
        spark, dead_letter_path(), DEAD_LETTER_SCHEMA, [PARTITION_COLUMN], DEAD_LETTER_PROPERTIES
    ):
        created.add(dead_letter_path())
    if ensure_delta_table(spark, batches_path(), BATCH_SCHEMA, (), TABLE_PROPERTIES):
        created.add(batches_path())
    if shared_catalog() and spark.conf.get("spark.sql.catalogImplementation") == "hive":
        register_tables(spark, topics)
    return created


def catalog_tables(topics: list[Topic]) -> list[tuple[str, str, str]]:
    """(schema, table, location) of every table the ingestion job writes by path, as
    the dbt sources name them (models/staging/blog/_blog__sources.yml)."""
    return [
        *[("bronze", topic.table, str(topic.bronze_path)) for topic in topics],
        ("bronze", "dead_letter", dead_letter_path()),
        ("ops", "ingestion_batches", batches_path()),
    ]


def register_tables(spark: SparkSession, topics: list[Topic]) -> None:
    """Register the ingestion job's tables in the shared catalog as external Delta
    tables at their paths (they are still written by path), if they are not yet.

    Safe from several processes at once (ingestion and dbt starting together on a new
    lakehouse): the loser of a race to register finds the winner's table.
    With the embedded catalog dbt registers them instead, at the start of every
    invocation (macros/utils/register_ingestion_tables.sql).
    """
    for schema, table, location in catalog_tables(topics):
        name = f"{schema}.{table}"
        if spark.catalog.tableExists(name):
            continue
        try:
            spark.sql(f"create database if not exists {schema}")
            escaped = location.replace("\\", "\\\\").replace("'", "\\'")
            spark.sql(f"create table if not exists {name} using delta location '{escaped}'")
        except Exception:
            if not spark.catalog.tableExists(name):
                raise


def append_as_bronze(frame: DataFrame, table: str, merge_schema: bool = False) -> None:
    """Append `frame` to the catalog table `table` (`schema.name`) in one commit; a new
    table is first created empty, laid out as a Bronze table is for its readers (row
    tracking: each row's commit version; no deletion vectors) but open to any write,
    every column nullable: the input of a benchmark or a test that stands in for
    Bronze."""
    spark = frame.sparkSession
    if not spark.catalog.tableExists(table):
        fields = [StructField(f.name, f.dataType, True, f.metadata) for f in frame.schema]
        builder = DeltaTable.createIfNotExists(spark).tableName(table)
        builder = builder.addColumns(StructType(fields))
        for key, value in {**ROW_TRACKING, **APPENDED_ONLY}.items():
            builder = builder.property(key, value)
        builder.execute()
    frame.write.format("delta").mode("append").option(
        "mergeSchema", str(merge_schema).lower()
    ).saveAsTable(table)


def ensure_table(spark: SparkSession, topic: Topic) -> bool:
    """The topic's Bronze table (empty, by path) if it does not exist yet; True if this
    call created it."""
    return ensure_delta_table(
        spark, str(topic.bronze_path), BRONZE_SCHEMA, [PARTITION_COLUMN], BRONZE_PROPERTIES
    )
