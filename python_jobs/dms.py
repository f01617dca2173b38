"""AWS DMS change files (an S3 target, CSV or Parquet) as Bronze CDC rows.

A topic in format `dms-csv` or `dms-parquet` (topics.yml) carries the files an AWS DMS
task writes to its S3 target for one table: full-load files (`LOAD00000001.csv`, ...)
and CDC files named by time (`20141029-1134010000.csv`). Each record is a row of the
source table, in CDC files after an `Op` field (`I`, `U`, `D`); CSV files have no
header, so the registry declares every field after `Op`, in file order, with its type
(:class:`DmsLayout`). Records land in the same Bronze contract as Debezium's envelopes,
so the same staging, merge and history models read them:

- `op`: `r` for a full-load row (no `Op`, or `I` with `IncludeOpForFullLoad`), `c`,
  `u`, `d` for `I`, `U`, `D`;
- `after` (`before` for a delete): the row image as JSON text in Debezium's encodings
  of PostgreSQL types (CONTRACT.md section 2): `timestamp` as epoch microseconds,
  `date` as days, `numeric` as base64 unscaled bytes, `timestamptz` as ISO-8601 UTC;
- `source_committed_at`: the commit-timestamp column (the endpoint's
  `TimestampColumnName`);
- `source_lsn`: the DMS position, which with the file and the record's number in it
  orders the changes to one key: 0 for full-load rows (before every change), else the
  CDC file's time from its name (`yyyyMMddHHmmss` and four fraction digits), or, with
  a change-sequence column (`$AR_H_CHANGE_SEQ`), its time part (`YYYYMMDDHHmmSShh`);
  ties go to the file and the record's place in it, which is DMS's write order;
- an update of the key columns, seen through before-image columns
  (`add-before-image-columns`), becomes a delete of the old key and an insert of the
  new one, as Debezium delivers it.

Records that cannot be read go to the dead letters with a reason (``REASONS``).

Pure ``DataFrame -> DataFrame`` transforms: :func:`classify` takes what the landing
source yields (numbered lines for CSV, rows with :func:`with_file_positions` for
Parquet) and returns the columns of :func:`python_jobs.bronze.classify`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from python_jobs import bronze

if TYPE_CHECKING:
    from python_jobs.topics import Topic

FORMATS = ("dms-csv", "dms-parquet")
# The landing files each format reads (a gzip-compressed CSV file too: the endpoint's
# CompressionType GZIP).
GLOBS = {"dms-csv": "*.{csv,csv.gz}", "dms-parquet": "*.parquet"}
OP_COLUMN = "Op"
REASONS = (
    "too_large",
    "malformed_csv",
    "wrong_column_count",
    "unknown_file_name",
    "unknown_op",
    "invalid_value",
    "missing_key",
)
_INTEGERS = ("smallint", "int", "bigint")
_SIMPLE = (*_INTEGERS, "boolean", "float", "double", "string", "date", "timestamp", "timestamptz")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
# decode_debezium_decimal's limit: an unscaled value of at most 8 bytes.
MAX_DECIMAL_PRECISION = 18
OPS = {"I": "c", "U": "u", "D": "d"}


@dataclass(frozen=True)
class DmsColumn:
    """One field of a DMS file after `Op`: a column of the source table (`role`
    `column`), the commit timestamp, the change sequence, or a before image of a
    column (`of`)."""

    name: str
    type: str
    role: str = "column"
    of: str | None = None

    @property
    def spark_type(self) -> str:
        return "timestamp" if self.type == "timestamptz" else self.type


@dataclass(frozen=True)
class DmsLayout:
    """How a topic's DMS files are laid out: the registry's `dms:` block."""

    columns: tuple[DmsColumn, ...]
    commit_timestamp: str | None = None
    change_sequence: str | None = None
    before_image_prefix: str | None = None
    null_value: str = ""
    delimiter: str = ","
    rfc4180: bool = True

    @property
    def table_columns(self) -> tuple[DmsColumn, ...]:
        return tuple(c for c in self.columns if c.role == "column")

    @property
    def before_images(self) -> tuple[DmsColumn, ...]:
        return tuple(c for c in self.columns if c.role == "before_image")


def parse_layout(block: object, key: tuple[str, ...], where: str) -> DmsLayout:
    """The `dms:` block of a registry entry, validated; `where` names the entry in
    errors (ValueError)."""
    if not isinstance(block, Mapping) or not block.get("columns"):
        raise ValueError(f"{where}: a DMS topic needs a `dms:` block with `columns`")
    unknown = sorted(
        set(block)
        - {
            "columns",
            "commit_timestamp",
            "change_sequence",
            "before_image_prefix",
            "null_value",
            "delimiter",
            "rfc4180",
        }
    )
    if unknown:
        raise ValueError(f"{where}: unknown `dms:` settings {unknown}")
    specials = {
        block.get("commit_timestamp"): "commit_timestamp",
        block.get("change_sequence"): "change_sequence",
    }
    prefix = block.get("before_image_prefix")
    declared = [_split_column(item, where) for item in block["columns"]]
    typed = {name: kind for name, kind in declared if kind is not None}
    columns: list[DmsColumn] = []
    for name, kind in declared:
        if name in specials and name is not None:
            if kind is not None:
                raise ValueError(f"{where}: `{name}` is the {specials[name]} column: no type")
            columns.append(DmsColumn(name, "string", specials[name]))
        elif prefix and name.startswith(prefix) and kind is None:
            base = name[len(prefix) :]
            if base not in typed:
                raise ValueError(f"{where}: before image `{name}` of no declared column")
            columns.append(DmsColumn(name, typed[base], "before_image", base))
        elif kind is None:
            raise ValueError(f"{where}: column `{name}` has no type")
        else:
            columns.append(DmsColumn(name, kind))
    names = [c.name for c in columns]
    if OP_COLUMN in names:
        raise ValueError(f"{where}: `{OP_COLUMN}` is DMS's own first field: not in `columns`")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{where}: columns declared twice: {repeated}")
    for role, name in ((r, n) for n, r in specials.items() if n is not None):
        if name not in names:
            raise ValueError(f"{where}: the {role} column `{name}` is not in `columns`")
    missing = [k for k in key if k not in {c.name for c in columns if c.role == "column"}]
    if missing:
        raise ValueError(f"{where}: key columns {missing} are not in `columns`")
    delimiter = str(block.get("delimiter", ","))
    if len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"{where}: delimiter must be one character, not a quote or newline")
    rfc4180 = block.get("rfc4180", True)
    if not isinstance(rfc4180, bool):
        raise ValueError(f"{where}: rfc4180 must be true or false, got {rfc4180!r}")
    return DmsLayout(
        columns=tuple(columns),
        commit_timestamp=block.get("commit_timestamp"),
        change_sequence=block.get("change_sequence"),
        before_image_prefix=prefix,
        null_value=str(block.get("null_value", "")),
        delimiter=delimiter,
        rfc4180=rfc4180,
    )


def _split_column(item: object, where: str) -> tuple[str, str | None]:
    """`"name type"` (a column of the table) or `"name"` (a special column)."""
    parts = str(item).split(None, 1)
    if not parts:
        raise ValueError(f"{where}: an empty column in `columns`")
    if len(parts) == 1:
        return parts[0], None
    name, kind = parts[0], parts[1].replace(" ", "").lower()
    decimal = _DECIMAL.fullmatch(kind)
    if decimal:
        precision, scale = int(decimal[1]), int(decimal[2])
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise ValueError(
                f"{where}: column `{name}` is {kind}: precision 1 to "
                f"{MAX_DECIMAL_PRECISION}, scale at most the precision"
            )
    elif kind not in _SIMPLE:
        raise ValueError(
            f"{where}: column `{name}` has type {kind!r}; expected one of "
            f"{', '.join(_SIMPLE)} or decimal(p,s)"
        )
    return name, kind


def parquet_schema(layout: DmsLayout) -> str:
    """What the Parquet reader reads, as DDL: `Op` (absent from full-load files
    without IncludeOpForFullLoad: null), then every declared column with its type."""
    fields = [f"`{OP_COLUMN}` string"]
    fields += [f"`{c.name}` {c.spark_type}" for c in layout.columns]
    return ", ".join(fields)


def with_file_positions(rows: DataFrame) -> DataFrame:
    """Rows of the Parquet source with their file and 0-based row index in it (exact
    whatever the splits: Parquet's own row index)."""
    return rows.select(
        "*",
        F.col("_metadata.file_path").alias("_source_file"),
        F.col("_metadata.row_index").alias("_row_index"),
    )


# --- CSV -------------------------------------------------------------------------------


def csv_records(lines: DataFrame) -> DataFrame:
    """Numbered lines (``bronze.LINE_SCHEMA``) to CSV records, same columns: a quoted
    field may hold line breaks (DMS quotes such values, RFC 4180: its default), so a
    line that leaves a quote open continues on the next. A record keeps its lines joined by
    `\\n` and the number of its first line. (An unclosed quote takes the rest of its
    file into one record, which then fails to parse.)"""
    raw = F.col("_raw")
    odd = ((F.length(raw) - F.length(F.regexp_replace(raw, '"', ""))) % 2).cast("int")
    in_file = Window.partitionBy("_source_file").orderBy("_line_number")
    opened = lines.select(
        *bronze.LINE_COLUMNS,
        F.coalesce(
            F.sum(odd).over(in_file.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0)
        ).alias("_quotes_before"),
    )
    starts = ((F.col("_quotes_before") % 2) == 0).cast("int")
    numbered = opened.select(
        *bronze.LINE_COLUMNS,
        F.sum(starts).over(in_file.rowsBetween(Window.unboundedPreceding, 0)).alias("_record"),
    )
    grouped = numbered.groupBy("_source_file", "_record").agg(
        F.first("_topic").alias("_topic"),
        F.first("_partition").alias("_partition"),
        F.first("_offset").alias("_offset"),
        F.min("_line_number").alias("_line_number"),
        F.sort_array(F.collect_list(F.struct("_line_number", "_raw"))).alias("_lines"),
    )
    return grouped.select(
        F.concat_ws("\n", F.col("_lines._raw")).alias("_raw"),
        *bronze.LINE_COLUMNS[1:],
    )


def _parse_csv(
    records: DataFrame, layout: DmsLayout, max_record_bytes: int
) -> tuple[DataFrame, list[bronze.Check], list[bronze.Check]]:
    """CSV records to `_op` (the `Op` text or null) and `_values` (the declared
    columns, typed), with the checks on the record (before the Op's) and on its values
    (after)."""
    raw = F.col("_raw")
    size = F.octet_length(raw)
    text = F.regexp_replace(raw, "\r$", "")
    tokenized = records.select(
        *bronze.LINE_COLUMNS,
        F.when(size <= max_record_bytes, _tokens(text, layout)).alias("_tokens"),
    )
    width = len(layout.columns)
    count = F.size("_tokens")
    load = _is_full_load(F.col("_source_file"))
    # Full-load files have no Op unless IncludeOpForFullLoad; CDC files always have it.
    has_op = count == width + 1
    offset = F.when(has_op, F.lit(1)).otherwise(F.lit(0))

    def token(index: Column) -> Column:
        value = F.try_element_at(F.col("_tokens"), index)
        unquoted = F.regexp_replace(value.substr(F.lit(2), F.length(value) - 2), '""', '"')
        if not layout.rfc4180:
            return F.when(value != F.lit(layout.null_value), value)
        return (
            F.when(value.startswith('"'), unquoted)
            .when(value == F.lit(layout.null_value), F.lit(None))
            .otherwise(value)
        )

    texts = [token(offset + (i + 1)).alias(c.name) for i, c in enumerate(layout.columns)]
    parsed = tokenized.select(
        *bronze.LINE_COLUMNS,
        "_tokens",
        F.when(has_op, token(F.lit(1))).alias("_op"),
        F.struct(*texts).alias("_texts"),
    )
    values = [_from_text(F.col("_texts")[c.name], c.type).alias(c.name) for c in layout.columns]
    typed = parsed.select("*", F.struct(*values).alias("_values"))
    record_checks: list[bronze.Check] = [
        _size_check(size, max_record_bytes),
        (
            F.concat_ws(layout.delimiter, F.col("_tokens")) != text,
            "malformed_csv",
            "not a CSV record: a quote inside an unquoted field, text after a closing "
            "quote, or a quote never closed",
        ),
        (
            ~has_op & ((count != width) | ~load),
            "wrong_column_count",
            F.format_string(
                f"%d fields; expected {width + 1} (Op and the {width} declared columns)%s",
                count,
                F.when(load, F.lit(f", or {width} in a full-load file")).otherwise(F.lit("")),
            ),
        ),
    ]
    value_checks: list[bronze.Check] = []
    for column in layout.columns:
        given, got = F.col("_texts")[column.name], F.col("_values")[column.name]
        value_checks.append(
            (
                given.isNotNull() & (got.isNull() | ~_exact(given, got, column.type)),
                "invalid_value",
                F.concat(F.lit(f"{column.name}: '"), given, F.lit(f"' is not a {column.type}")),
            )
        )
    return typed, record_checks, value_checks


def _tokens(text: Column, layout: DmsLayout) -> Column:
    """A record's fields as written (quoted ones with their quotes)."""
    delimiter = re.escape(layout.delimiter)
    if not layout.rfc4180:
        return F.split(text, delimiter, -1)
    # Each field after a delimiter: quoted (doubled quotes inside) or plain. A leading
    # delimiter makes every field follow one, so no match is empty.
    field = f'{delimiter}("[^"]*(?:""[^"]*)*"|[^{delimiter}"]*)'
    return F.regexp_extract_all(F.concat(F.lit(layout.delimiter), text), F.lit(field), 1)


def _from_text(text: Column, kind: str) -> Column:
    """A CSV field's text as a value of the declared type; null when it is not one."""
    if kind == "string":
        return text
    if kind == "boolean":
        return F.when(
            F.lower(F.trim(text)).isin("t", "true", "1", "f", "false", "0"),
            text.try_cast("boolean"),
        )
    if kind in _INTEGERS:
        return F.when(F.trim(text).rlike(r"^[+-]?[0-9]+$"), text.try_cast(kind))
    return text.try_cast("timestamp" if kind == "timestamptz" else kind)


def _exact(text: Column, value: Column, kind: str) -> Column:
    """False when the value lost digits of its text (a decimal rounded to its scale)."""
    if not kind.startswith("decimal"):
        return F.lit(True)
    return text.try_cast("decimal(38,18)") == value.cast("decimal(38,18)")


# --- Parquet ---------------------------------------------------------------------------


def _parse_parquet(
    rows: DataFrame, layout: DmsLayout, topic: str, max_record_bytes: int
) -> tuple[DataFrame, list[bronze.Check], list[bronze.Check]]:
    """Parquet rows (``parquet_schema`` + :func:`with_file_positions`) to the columns
    of :func:`_parse_csv`; `_raw` is the row as JSON text (Parquet has no text)."""
    names = [OP_COLUMN, *[c.name for c in layout.columns]]
    raw = F.to_json(
        F.struct(*names),
        {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"},
    )
    parsed = rows.select(
        raw.alias("_raw"),
        F.lit(topic).alias("_topic"),
        F.lit(None).cast("int").alias("_partition"),
        F.lit(None).cast("bigint").alias("_offset"),
        "_source_file",
        (F.col("_row_index") + 1).cast("int").alias("_line_number"),
        F.col(OP_COLUMN).alias("_op"),
        F.struct(*[c.name for c in layout.columns]).alias("_values"),
    )
    return parsed, [_size_check(F.octet_length(F.col("_raw")), max_record_bytes)], []


def _size_check(size: Column, max_record_bytes: int) -> bronze.Check:
    return (
        size > max_record_bytes,
        "too_large",
        F.format_string(f"%d bytes, over the limit of {max_record_bytes}", size),
    )


# --- the Bronze row --------------------------------------------------------------------


def _file_name(path: Column) -> Column:
    """A landing file's name without its folders and extensions."""
    return F.regexp_extract(path, r"([^/]*?)(\.csv|\.csv\.gz|\.parquet)?$", 1)


def _is_full_load(path: Column) -> Column:
    return _file_name(path).startswith("LOAD")


def _cdc_file_position(path: Column) -> Column:
    """A CDC file's time from its name, `yyyyMMdd-HHmmss` and any fraction digits,
    as the number yyyyMMddHHmmssffff (four fraction digits); null for another name."""
    name = _file_name(path)
    pattern = r"^([0-9]{8})-([0-9]{6})([0-9]*)$"
    fraction = F.rpad(F.substring(F.regexp_extract(name, pattern, 3), 1, 4), 4, "0")
    digits = F.concat(
        F.regexp_extract(name, pattern, 1), F.regexp_extract(name, pattern, 2), fraction
    )
    return F.when(name.rlike(pattern), digits.cast("bigint"))


def _encode(value: Column, kind: str) -> Column:
    """A typed value in Debezium's JSON encoding of the PostgreSQL type."""
    decimal = _DECIMAL.fullmatch(kind)
    if decimal:
        scale = int(decimal[2])
        # The unscaled value, as Kafka Connect's Decimal: base64 of its minimal
        # big-endian two's-complement bytes (Java's BigInteger.toByteArray()).
        unscaled = (value * F.lit(10**scale).cast("decimal(19,0)")).cast("bigint")
        digits = F.hex(unscaled)
        positive = F.regexp_replace(F.lpad(digits, 16, "0"), "^(00)*(?=[0-7])", "")
        negative = F.regexp_replace(digits, "^(FF)*(?=[89A-F])", "")
        return F.base64(F.unhex(F.when(unscaled >= 0, positive).otherwise(negative)))
    if kind == "date":
        return F.unix_date(value)
    if kind == "timestamp":
        return F.unix_micros(value)
    if kind == "timestamptz":
        return F.date_format(value, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    return value


def _image(
    values: Column, columns: tuple[DmsColumn, ...], names: list[str] | None = None
) -> Column:
    """A row image as JSON text: `columns`' values encoded, named `names` (default:
    their own names); nulls written as `null`, as Debezium's converter does."""
    names = names or [c.name for c in columns]
    encoded = [
        _encode(values[c.name], c.type).alias(n) for c, n in zip(columns, names, strict=True)
    ]
    return F.to_json(F.struct(*encoded), {"ignoreNullFields": "false"})


def classify(rows: DataFrame, topic: Topic, max_record_bytes: int) -> DataFrame:
    """A DMS topic's records to the columns of :func:`python_jobs.bronze.classify`.

    `rows`: numbered lines (``bronze.LINE_SCHEMA``) for `dms-csv`; for `dms-parquet`,
    rows read with :func:`parquet_schema` and :func:`with_file_positions`. Reasons,
    first failing wins: `too_large`, `malformed_csv`, `wrong_column_count`,
    `unknown_file_name` (neither `LOAD...` nor `yyyyMMdd-HHmmss...`), `unknown_op`
    (missing in a CDC file, `U`/`D` in a full-load file, any other value),
    `invalid_value` (a field that is not of its declared type, the first in file
    order; a commit timestamp that is not a time; a change sequence that does not
    start with 16 digits), `missing_key` (every key column null). An update that
    changes the key (its before-image columns differ) gives two rows, a delete and an
    insert, each a record for the counts.
    """
    layout = topic.dms
    if layout is None:
        raise ValueError(f"{topic.topic}: not a DMS topic")
    if topic.format == "dms-csv":
        records = csv_records(rows) if layout.rfc4180 else rows
        parsed, record_checks, value_checks = _parse_csv(records, layout, max_record_bytes)
    else:
        parsed, record_checks, value_checks = _parse_parquet(
            rows, layout, topic.topic, max_record_bytes
        )
    header = _Header.of(layout, F.col("_values"), F.col("_op"), F.col("_source_file"))
    image = _image(F.col("_values"), layout.table_columns)
    key_missing = F.coalesce(*[F.col("_values")[k] for k in topic.key]).isNull()
    reason, detail = bronze._first_failure(
        [
            *record_checks,
            *header.checks[:-1],
            *value_checks,
            header.checks[-1],
            (key_missing, "missing_key", f"no key ({', '.join(topic.key)}) in the row"),
        ]
    )
    labelled = parsed.select(
        *bronze.LINE_COLUMNS,
        reason.alias("_error_reason"),
        detail.alias("_error_detail"),
        header.committed.alias("_committed"),
        header.position.alias("_position"),
        header.load.alias("_load"),
        header.sequence.alias("_sequence"),
        F.explode(_changes(topic, layout, header.op, image, reason.isNull())).alias("_change"),
    )
    op = F.col("_change.op")
    key_image = F.from_json(
        F.when(op == "d", F.col("_change.before")).otherwise(F.col("_change.after")),
        "map<string,string>",
    )
    is_bronze = F.col("_error_reason").isNull()

    def bronze_only(value: Column, name: str) -> Column:
        return F.when(is_bronze, value).alias(name)

    return labelled.select(
        *bronze.LINE_COLUMNS,
        F.when(is_bronze, F.lit("bronze")).otherwise(F.lit("dead_letter")).alias("_status"),
        "_error_reason",
        "_error_detail",
        bronze_only(bronze._key_json(key_image, topic.key), "record_key"),
        bronze_only(op, "op"),
        bronze_only(F.col("_change.before"), "before"),
        bronze_only(F.col("_change.after"), "after"),
        bronze_only(F.col("_committed"), "source_committed_at"),
        bronze_only(F.col("_position"), "source_lsn"),
        F.lit(None).cast("bigint").alias("source_tx_id"),
        bronze_only(F.col("_sequence"), "source_sequence"),
        bronze_only(F.when(F.col("_load"), "true").otherwise("false"), "source_snapshot"),
        *[_null_text().alias(n) for n in ("source_db", "source_schema", "source_table")],
    )


def _null_text() -> Column:
    return F.lit(None).cast("string")


@dataclass(frozen=True)
class _Header:
    """What a record says besides the row: full load or not, the op, the commit time,
    the position; and the checks on them (the last one after the value checks)."""

    load: Column
    op: Column
    committed: Column
    position: Column
    sequence: Column
    checks: list[bronze.Check]

    @classmethod
    def of(cls, layout: DmsLayout, values: Column, op_text: Column, path: Column) -> _Header:
        load = _is_full_load(path)
        op = F.when(load & (op_text.isNull() | (op_text == "I")), F.lit("r")).when(
            ~load, F.element_at(F.create_map(*[F.lit(x) for p in OPS.items() for x in p]), op_text)
        )
        cdc_file = _cdc_file_position(path)
        checks: list[bronze.Check] = [
            (
                # With a change sequence, only full-load files are told by their name.
                F.lit(not layout.change_sequence) & ~load & cdc_file.isNull(),
                "unknown_file_name",
                F.concat(
                    F.lit("file '"),
                    _file_name(path),
                    F.lit("' is neither a DMS full-load file (LOAD...) nor a CDC file "),
                    F.lit("(yyyyMMdd-HHmmss...)"),
                ),
            ),
            (op_text.isNull() & ~load, "unknown_op", "Op is missing in a CDC file"),
            (
                op.isNull(),
                "unknown_op",
                F.concat(
                    F.lit("Op '"),
                    op_text,
                    F.when(load, F.lit("' in a full-load file")).otherwise(
                        F.lit("' is not one of I,U,D")
                    ),
                ),
            ),
        ]
        committed = F.lit(None).cast("timestamp")
        if layout.commit_timestamp:
            text = values[layout.commit_timestamp]
            committed = text.try_cast("timestamp")
            checks.append(
                (
                    text.isNotNull() & committed.isNull(),
                    "invalid_value",
                    F.concat(
                        F.lit(f"{layout.commit_timestamp}: '"), text, F.lit("' is not a time")
                    ),
                )
            )
        sequence, position = _null_text(), cdc_file
        if layout.change_sequence:
            sequence = values[layout.change_sequence]
            position = F.when(
                sequence.rlike("^[0-9]{16}"), F.substring(sequence, 1, 16).cast("bigint")
            )
            checks.append(
                (
                    ~load & position.isNull(),
                    "invalid_value",
                    F.concat(
                        F.lit(f"{layout.change_sequence}: '"),
                        F.coalesce(sequence, F.lit("")),
                        F.lit("' is not a change sequence (YYYYMMDDHHmmSShh and a number)"),
                    ),
                )
            )
        # The header's value checks go together, after the columns' own.
        checks = [*checks[:3], _all_of(checks[3:])]
        position = F.when(load, F.lit(0).cast("bigint")).otherwise(position)
        return cls(load, op, committed, position, sequence, checks)


def _all_of(checks: list[bronze.Check]) -> bronze.Check:
    """One check failing with the first of `checks` that fails (never, if none)."""
    reason, detail = bronze._first_failure(checks)
    return reason.isNotNull(), "invalid_value", detail


def _changes(topic: Topic, layout: DmsLayout, op: Column, image: Column, valid: Column) -> Column:
    """The record's changes, an array of (op, before, after): one, or for an update
    that moved the key (its before image names another key), a delete of the old key
    and an insert of the new one, as Debezium delivers a key change."""
    values = F.col("_values")
    images = layout.before_images
    before = _null_text()
    if images:
        before = F.when(
            F.coalesce(*[values[c.name] for c in images]).isNotNull(),
            _image(values, images, [c.of or "" for c in images]),
        )
    moved = F.lit(False)
    image_of = {c.of: c.name for c in images}
    if all(k in image_of for k in topic.key):
        old_key = [values[image_of[k]] for k in topic.key]
        same = F.lit(True)
        for k in topic.key:
            same = same & values[image_of[k]].eqNullSafe(values[k])
        moved = (op == "u") & F.coalesce(*old_key).isNotNull() & ~same
    change = F.struct(
        op.alias("op"),
        F.when(op == "d", image).when(op == "u", before).otherwise(_null_text()).alias("before"),
        F.when(op != "d", image).alias("after"),
    )
    deleted = F.struct(F.lit("d").alias("op"), before.alias("before"), _null_text().alias("after"))
    inserted = F.struct(F.lit("c").alias("op"), _null_text().alias("before"), image.alias("after"))
    return F.when(valid & moved, F.array(deleted, inserted)).otherwise(F.array(change))
