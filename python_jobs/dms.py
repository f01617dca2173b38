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
  of PostgreSQL types (those the staging models decode, macros/cdc/decode_debezium_*):
  `timestamp` as epoch microseconds, `date` as days, `numeric` as base64 unscaled
  bytes, `timestamptz` as ISO-8601 UTC;
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
from dataclasses import asdict, dataclass
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
    "invalid_utf8",
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


def layout_to_json(layout: DmsLayout) -> dict:
    """The layout as JSON-ready values (a replay's pin: python_jobs/ingest.py)."""
    return asdict(layout)


def layout_from_json(values: dict) -> DmsLayout:
    """The layout that :func:`layout_to_json` wrote."""
    columns = tuple(DmsColumn(**column) for column in values["columns"])
    return DmsLayout(**{**values, "columns": columns})


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
    line that leaves a quote open continues on the next. A record keeps its lines joined
    by `\\n` and the number of its first line. (An unclosed quote takes the rest of its
    file into one record, which then fails to parse.) Only the files with a line of an
    odd number of quotes are joined (a window over each file's lines); in the others a
    line is a record."""
    raw = F.col("_raw")
    odd = ((F.length(raw) - F.length(F.regexp_replace(raw, '"', ""))) % 2).cast("int")
    flagged = (
        lines.select("_source_file", odd.alias("_odd"))
        .where("_odd = 1")
        .select("_source_file")
        .distinct()
    )
    single = lines.join(F.broadcast(flagged), "_source_file", "left_anti")
    spanning = lines.join(F.broadcast(flagged), "_source_file", "left_semi")
    in_file = Window.partitionBy("_source_file").orderBy("_line_number")
    opened = spanning.select(
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
    joined = grouped.select(
        F.concat_ws("\n", F.col("_lines._raw")).alias("_raw"),
        *bronze.LINE_COLUMNS[1:],
    )
    return single.select(*bronze.LINE_COLUMNS).unionByName(joined)


def _value(index: int) -> str:
    """The column of a record's `index`-th declared field, typed (its text: `_text_`).
    Top-level columns, not a struct: Spark inlines a struct's fields into every place
    that reads them, and each is read several times."""
    return f"_value_{index}"


def _values(layout: DmsLayout) -> dict[str, Column]:
    return {c.name: F.col(_value(i)) for i, c in enumerate(layout.columns)}


def _parse_csv(
    records: DataFrame, layout: DmsLayout, max_record_bytes: int
) -> tuple[DataFrame, list[bronze.Check], list[bronze.Check]]:
    """CSV records to `_op` (the `Op` text or null) and the declared fields (`_text_i`
    as written, `_value_i` typed), with the checks on the record (before the Op's) and
    on its values (after). The checks read `_load` (:func:`classify` adds it)."""
    size = F.octet_length(F.col("_raw"))
    text, tokens = F.col("_text"), F.col("_tokens")
    width = len(layout.columns)
    tokenized = (
        records.select(
            *bronze.LINE_COLUMNS, F.regexp_replace(F.col("_raw"), r"\r$", "").alias("_text")
        )
        .select("*", F.when(size <= max_record_bytes, _tokens(text, layout)).alias("_tokens"))
        .select(
            "*",
            # Full-load files have no Op unless IncludeOpForFullLoad; CDC files always do.
            (F.size(tokens) == width + 1).alias("_has_op"),
        )
    )
    has_op = F.col("_has_op")
    offset = F.when(has_op, F.lit(1)).otherwise(F.lit(0))
    fields = tokenized.select(
        "*",
        F.when(has_op, F.try_element_at(tokens, F.lit(1))).alias("_token_op"),
        *[F.try_element_at(tokens, offset + (i + 1)).alias(f"_token_{i}") for i in range(width)],
    )

    def unquoted(name: str) -> Column:
        value = F.col(name)
        if not layout.rfc4180:
            return F.when(value != F.lit(layout.null_value), value)
        inside = F.regexp_replace(value.substr(F.lit(2), F.length(value) - 2), '""', '"')
        return (
            F.when(value.startswith('"'), inside)
            .when(value == F.lit(layout.null_value), F.lit(None))
            .otherwise(value)
        )

    texts = [unquoted(f"_token_{i}").alias(f"_text_{i}") for i in range(width)]
    parsed = fields.select("*", unquoted("_token_op").alias("_op"), *texts)
    values = [
        _from_text(F.col(f"_text_{i}"), c.type).alias(_value(i))
        for i, c in enumerate(layout.columns)
    ]
    typed = parsed.select("*", *values)
    count, load = F.size(tokens), F.col("_load")
    record_checks: list[bronze.Check] = [
        _size_check(size, max_record_bytes),
        # The regular expressions that split the record read it as UTF-8, replacing
        # what is not with U+FFFD (`_text` already): its values would reach Bronze
        # altered.
        (~F.is_valid_utf8(F.col("_raw")), "invalid_utf8", "not valid UTF-8"),
        (
            F.concat_ws(layout.delimiter, tokens) != text,
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
    for i, column in enumerate(layout.columns):
        given, got = F.col(f"_text_{i}"), F.col(_value(i))
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
        *[F.col(c.name).alias(_value(i)) for i, c in enumerate(layout.columns)],
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
    return F.regexp_replace(F.substring_index(path, "/", -1), r"\.(csv|csv\.gz|parquet)$", "")


def _cdc_file_position(name: Column) -> Column:
    """A CDC file's time from its name, `yyyyMMdd-HHmmss` and any fraction digits,
    as the number yyyyMMddHHmmssffff (four fraction digits); null for another name."""
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
    values: dict[str, Column], columns: tuple[DmsColumn, ...], names: list[str] | None = None
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
    first failing wins: `too_large`, `invalid_utf8` (CSV), `malformed_csv`,
    `wrong_column_count`,
    `unknown_file_name` (neither `LOAD...` nor `yyyyMMdd-HHmmss...`), `unknown_op`
    (missing in a CDC file, `U`/`D` in a full-load file, any other value),
    `invalid_value` (a field that is not of its declared type, the first in file
    order; a commit timestamp that is not a time; a change sequence that does not
    start with 16 digits), `missing_key` (every key column null). An update that
    changes the key (its before-image columns differ) gives two rows, a delete and an
    insert, each a record for the counts.

    Built in stages of top-level columns, each computed once per record.
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
    values = _values(layout)
    path = F.col("_source_file")
    sequence = values[layout.change_sequence] if layout.change_sequence else _null_text()
    named = parsed.select("*", _file_name(path).alias("_file"))
    located = named.select(
        "*",
        F.col("_file").startswith("LOAD").alias("_load"),
        _cdc_file_position(F.col("_file")).alias("_cdc_file"),
        (
            values[layout.commit_timestamp].try_cast("timestamp")
            if layout.commit_timestamp
            else F.lit(None).cast("timestamp")
        ).alias("_committed"),
        sequence.alias("_sequence"),
    )
    load, op_text = F.col("_load"), F.col("_op")
    from_sequence = F.when(
        F.col("_sequence").rlike("^[0-9]{16}"), F.substring("_sequence", 1, 16).cast("bigint")
    )
    ops = F.create_map(*[F.lit(x) for pair in OPS.items() for x in pair])
    headed = located.select(
        "*",
        F.when(load & (op_text.isNull() | (op_text == "I")), F.lit("r"))
        .when(~load, F.element_at(ops, op_text))
        .alias("_op_code"),
        F.when(load, F.lit(0).cast("bigint"))
        .otherwise(from_sequence if layout.change_sequence else F.col("_cdc_file"))
        .alias("_position"),
    )
    reason, detail = bronze._first_failure(
        [
            *record_checks,
            *_header_checks(layout),
            *value_checks,
            *_header_value_checks(layout, values),
            (
                F.coalesce(*[values[k] for k in topic.key]).isNull(),
                "missing_key",
                f"no key ({', '.join(topic.key)}) in the row",
            ),
        ]
    )
    header = ["_committed", "_position", "_load", "_sequence"]
    judged = headed.select(
        *bronze.LINE_COLUMNS,
        *header,
        "_op_code",
        reason.alias("_error_reason"),
        detail.alias("_error_detail"),
        _image(values, layout.table_columns).alias("_image"),
        _before_image(layout, values).alias("_before"),
        _moved(topic, layout, values).alias("_moved"),
        _key(topic, layout, values).alias("_key"),
        _key(topic, layout, values, before=True).alias("_old_key"),
    )
    labelled = judged.select(
        *bronze.LINE_COLUMNS,
        *header,
        "_error_reason",
        "_error_detail",
        F.explode(_changes()).alias("_change"),
    )
    op = F.col("_change.op")
    is_bronze = F.col("_error_reason").isNull()

    def bronze_only(value: Column, name: str) -> Column:
        return F.when(is_bronze, value).alias(name)

    return labelled.select(
        *bronze.LINE_COLUMNS,
        F.when(is_bronze, F.lit("bronze")).otherwise(F.lit("dead_letter")).alias("_status"),
        "_error_reason",
        "_error_detail",
        bronze_only(bronze._key_json(F.col("_change.key"), topic.key), "record_key"),
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


def _header_checks(layout: DmsLayout) -> list[bronze.Check]:
    """The file's name, then the Op (on the columns `headed` adds in :func:`classify`)."""
    load, op_text = F.col("_load"), F.col("_op")
    return [
        (
            # With a change sequence, only full-load files are told by their name.
            F.lit(not layout.change_sequence) & ~load & F.col("_cdc_file").isNull(),
            "unknown_file_name",
            F.concat(
                F.lit("file '"),
                F.col("_file"),
                F.lit("' is neither a DMS full-load file (LOAD...) nor a CDC file "),
                F.lit("(yyyyMMdd-HHmmss...)"),
            ),
        ),
        (op_text.isNull() & ~load, "unknown_op", "Op is missing in a CDC file"),
        (
            F.col("_op_code").isNull(),
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


def _header_value_checks(layout: DmsLayout, values: dict[str, Column]) -> list[bronze.Check]:
    """The commit timestamp and the change sequence, after the columns' own checks."""
    checks: list[bronze.Check] = []
    if layout.commit_timestamp:
        text = values[layout.commit_timestamp]
        checks.append(
            (
                text.isNotNull() & F.col("_committed").isNull(),
                "invalid_value",
                F.concat(F.lit(f"{layout.commit_timestamp}: '"), text, F.lit("' is not a time")),
            )
        )
    if layout.change_sequence:
        checks.append(
            (
                ~F.col("_load") & F.col("_position").isNull(),
                "invalid_value",
                F.concat(
                    F.lit(f"{layout.change_sequence}: '"),
                    F.coalesce(F.col("_sequence"), F.lit("")),
                    F.lit("' is not a change sequence (YYYYMMDDHHmmSShh and a number)"),
                ),
            )
        )
    return checks


def _before_image(layout: DmsLayout, values: dict[str, Column]) -> Column:
    """The before-image columns as a row image named after their columns; null when
    there are none or all are null (an insert, or DMS without the rule)."""
    images = layout.before_images
    if not images:
        return _null_text()
    return F.when(
        F.coalesce(*[values[c.name] for c in images]).isNotNull(),
        _image(values, images, [c.of or "" for c in images]),
    )


def _moved(topic: Topic, layout: DmsLayout, values: dict[str, Column]) -> Column:
    """An update whose before image holds the key and differs from it: the key moved."""
    image_of = {c.of: c.name for c in layout.before_images}
    if not all(k in image_of for k in topic.key):
        return F.lit(False)
    old_key = [values[image_of[k]] for k in topic.key]
    same = F.lit(True)
    for k in topic.key:
        same = same & values[image_of[k]].eqNullSafe(values[k])
    return (F.col("_op_code") == "u") & F.coalesce(*old_key).isNotNull() & ~same


def _key(
    topic: Topic, layout: DmsLayout, values: dict[str, Column], before: bool = False
) -> Column:
    """The key columns' values as the text of their encodings (what a Debezium image's
    fields read as text give: `record_key`); `before`: from the before-image columns."""
    columns = {c.name: c for c in layout.table_columns}
    source = {c.of: c.name for c in layout.before_images} if before else {k: k for k in topic.key}
    if not all(k in source for k in topic.key):
        return F.struct(*[_null_text().alias(k) for k in topic.key])
    return F.struct(
        *[_encode(values[source[k]], columns[k].type).cast("string").alias(k) for k in topic.key]
    )


def _changes() -> Column:
    """The record's changes, an array of (op, before, after, key): one, or for an update
    that moved the key, a delete of the old key and an insert of the new one, as
    Debezium delivers a key change (on the columns `judged` has in :func:`classify`)."""
    op, image, before = F.col("_op_code"), F.col("_image"), F.col("_before")
    key, null = F.col("_key"), _null_text()
    change = F.struct(
        op.alias("op"),
        F.when(op == "d", image).when(op == "u", before).otherwise(null).alias("before"),
        F.when(op != "d", image).alias("after"),
        key.alias("key"),
    )
    deleted = F.struct(
        F.lit("d").alias("op"),
        before.alias("before"),
        null.alias("after"),
        F.col("_old_key").alias("key"),
    )
    inserted = F.struct(
        F.lit("c").alias("op"), null.alias("before"), image.alias("after"), key.alias("key")
    )
    moved = F.col("_error_reason").isNull() & F.col("_moved")
    return F.when(moved, F.array(deleted, inserted)).otherwise(F.array(change))
