"""AWS DMS change files to Bronze rows (python_jobs/dms.py): the registry's layouts,
CSV and Parquet records translated into Debezium's encodings with exact rows, and every
bad record in the dead letters with its reason."""

from __future__ import annotations

import base64
import json
import shutil
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from python_jobs import bronze, dms, ingest
from python_jobs.topics import load_topics

# The registry entry of a topic in format {fmt}; its `dms:` block follows.
ENTRY = """
topics:
  - topic: shop.public.accounts
    kind: cdc
    format: {fmt}
    key: [id]
    table: shop_public_accounts
    dms:
"""
ACCOUNTS = (
    ENTRY
    + """\
      columns:
        - commit_ts
        - id bigint
        - email string
        - balance decimal(12,2)
        - opened_on date
        - updated_at timestamp
        - last_login timestamptz
        - active boolean
        - score double
        - BI_id
      commit_timestamp: commit_ts
      before_image_prefix: BI_
"""
)
TOPIC = "shop.public.accounts"
COLUMNS = (
    "commit_ts string, id bigint, email string, balance decimal(12,2), opened_on date,"
    " updated_at timestamp, last_login timestamp, active boolean, score double, BI_id bigint"
)
LOADED = datetime(2024, 1, 1)


def accounts(tmp_path: Path, fmt: str, registry: str = ACCOUNTS):
    path = tmp_path / "topics.yml"
    path.write_text(registry.format(fmt=fmt))
    (topic,) = load_topics(path)
    return topic


def csv_lines(spark, files: dict[str, str]):
    """Landing files' texts as numbered lines, as the ingestion job reads them."""
    frame = spark.createDataFrame(
        [(text, f"file:/landing/{TOPIC}/{name}") for name, text in files.items()],
        "value string, _source_file string",
    )
    return bronze.split_lines(frame, TOPIC)


def rows(records) -> list[tuple]:
    """(file, record number, status, reason, detail, op, key, before, after, committed,
    position, snapshot, sequence), in file and record order."""
    got = [
        (
            Path(r["_source_file"]).name,
            r["_line_number"],
            r["_status"],
            r["_error_reason"],
            r["_error_detail"],
            r["op"],
            r["record_key"],
            r["before"],
            r["after"],
            r["source_committed_at"],
            r["source_lsn"],
            r["source_snapshot"],
            r["source_sequence"],
        )
        for r in records.collect()
    ]
    return sorted(got, key=lambda r: (r[0], r[1], r[5] or ""))


def image(**values: object) -> str:
    """A row image as Debezium's JSON converter writes it (the test's own encoding)."""
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False)


def num(value: str) -> str:
    """numeric(12,2) as base64 of the unscaled value's minimal two's complement."""
    unscaled = int(Decimal(value).scaleb(2))
    return base64.b64encode(
        unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
    ).decode()


def micros(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1_000_000)


def days(text: str) -> int:
    return (date.fromisoformat(text) - date(1970, 1, 1)).days


def account(
    id: int,
    email: str | None = None,
    balance: str | None = None,
    opened_on: str | None = None,
    updated_at: str | None = None,
    last_login: str | None = None,
    active: bool | None = None,
    score: float | None = None,
) -> str:
    return image(
        id=id,
        email=email,
        balance=num(balance) if balance is not None else None,
        opened_on=days(opened_on) if opened_on else None,
        updated_at=micros(updated_at) if updated_at else None,
        last_login=last_login,
        active=active,
        score=score,
    )


def ok(name, number, op, key, before, after, committed, position, sequence=None) -> tuple:
    snapshot = "true" if name.startswith("LOAD") else "false"
    record_key = json.dumps({"id": str(key)}, separators=(",", ":"))
    return (name, number, "bronze", None, None, op, record_key, before, after, committed,
            position, snapshot, sequence)  # fmt: skip


def dead(name, number, reason, detail) -> tuple:
    return (name, number, "dead_letter", reason, detail, *[None] * 8)


CDC = "20240102-1200000000.csv"
CDC_POSITION = 202401021200000000


def test_csv_full_loads_and_changes_become_debezium_shaped_rows(spark, tmp_path) -> None:
    topic = accounts(tmp_path, "dms-csv")
    files = {
        # A full load without Op; NULLs (empty fields) in every type.
        "LOAD00000001.csv": (
            "2024-01-01 00:00:00.000000,1,a@x.io,10.50,2020-01-02,2024-01-01 00:00:00,"
            "2024-01-01 08:00:00+02:00,true,1.5,\n"
            "2024-01-01 00:00:00.000000,2,,,,,,,,\n"
        ),
        # IncludeOpForFullLoad: I on full-load rows. Quotes around a value holding the
        # delimiter, a doubled quote and a line break (one record on two lines).
        "LOAD00000002.csv": (
            'I,2024-01-01 00:00:00.000000,3,"c,""q""@x.io",-0.01,,,,f,-2,\n'
            'I,2024-01-01 00:00:00.000000,5,"two\nlines",0,,,,,,\n'
        ),
        # Changes: an insert, an update (its before image holds the same key), an update
        # of the key (3 becomes 30), a delete (DMS writes the whole row).
        CDC: (
            "I,2024-01-02 12:00:00.100000,4,d@x.io,0.00,,,,,,\n"
            "U,2024-01-02 12:00:01.000000,1,a2@x.io,11.00,2020-01-02,"
            "2024-01-02 12:00:01,,true,,1\n"
            'U,2024-01-02 12:00:02.000000,30,"c,""q""@x.io",-0.01,,,,f,-2,3\n'
            "D,2024-01-02 12:00:03.000000,4,d@x.io,0.00,,,,,,\n"
        ),
    }
    got = rows(dms.classify(csv_lines(spark, files), topic, 10_000))

    quoted = 'c,"q"@x.io'
    assert got == [
        ok(CDC, 1, "c", 4, None, account(4, "d@x.io", "0.00"),
           datetime(2024, 1, 2, 12, 0, 0, 100000), CDC_POSITION),
        ok(CDC, 2, "u", 1, image(id=1),
           account(1, "a2@x.io", "11.00", "2020-01-02", "2024-01-02 12:00:01", None, True),
           datetime(2024, 1, 2, 12, 0, 1), CDC_POSITION),
        # The key moved: the old key deleted, the new one inserted, as Debezium does.
        ok(CDC, 3, "c", 30, None, account(30, quoted, "-0.01", active=False, score=-2.0),
           datetime(2024, 1, 2, 12, 0, 2), CDC_POSITION),
        ok(CDC, 3, "d", 3, image(id=3), None, datetime(2024, 1, 2, 12, 0, 2), CDC_POSITION),
        ok(CDC, 4, "d", 4, account(4, "d@x.io", "0.00"), None,
           datetime(2024, 1, 2, 12, 0, 3), CDC_POSITION),
        ok("LOAD00000001.csv", 1, "r", 1, None,
           account(1, "a@x.io", "10.50", "2020-01-02", "2024-01-01 00:00:00",
                   "2024-01-01T06:00:00.000000Z", True, 1.5),
           LOADED, 0),
        ok("LOAD00000001.csv", 2, "r", 2, None, account(2), LOADED, 0),
        ok("LOAD00000002.csv", 1, "r", 3, None,
           account(3, quoted, "-0.01", active=False, score=-2.0), LOADED, 0),
        ok("LOAD00000002.csv", 2, "r", 5, None, account(5, "two\nlines", "0"), LOADED, 0),
    ]  # fmt: skip
    # A record keeps its text as written, lines joined.
    raw = {r["_line_number"]: r["_raw"] for r in dms.classify(
        csv_lines(spark, {"LOAD00000002.csv": files["LOAD00000002.csv"]}), topic, 10_000
    ).collect()}  # fmt: skip
    assert raw[2] == 'I,2024-01-01 00:00:00.000000,5,"two\nlines",0,,,,,,'


def test_bad_csv_records_go_to_the_dead_letters_with_their_reason(spark, tmp_path) -> None:
    topic = accounts(tmp_path, "dms-csv")
    files = {
        CDC: (
            "I,2024-01-02 12:00:00,1,a@x.io,1.00,,,,,,\n"  # fine
            + "I,2024-01-02 12:00:00,2,"
            + "x" * 200
            + ",,,,,,,\n"
            + 'I,2024-01-02 12:00:00,3,"ab"c,,,,,,,\n'
            + "2024-01-02 12:00:00,4,,,,,,,,\n"
            + "I,2024-01-02 12:00:00,5\n"
            + "X,2024-01-02 12:00:00,6,,,,,,,,\n"
            + "I,2024-01-02 12:00:00,seven,,,,,,,,\n"
            + "I,2024-01-02 12:00:00,8,,1.234,,,,,,\n"
            + "I,2024-01-02 12:00:00,9,,,2024-13-01,,,,,\n"
            + "I,2024-01-02 12:00:00,10,,,,yesterday,,,,\n"
            + "I,2024-01-02 12:00:00,11,,,,,,maybe,,\n"
            + "I,soon,12,,,,,,,,\n"
            + "I,2024-01-02 12:00:00,,a@x.io,,,,,,,\n"
            + 'I,2024-01-02 12:00:00,14,"never closed,,,,,,,\n'
            + "I,2024-01-02 12:00:00,15,,,,,,,,\n"
        ),
        "LOAD00000001.csv": "U,2024-01-01 00:00:00,16,,,,,,,,\n",
        "changes.csv": "I,2024-01-02 12:00:00,17,,,,,,,,\n",
    }
    got = rows(dms.classify(csv_lines(spark, files), topic, 150))

    assert got == [
        ok(CDC, 1, "c", 1, None, account(1, "a@x.io", "1.00"), datetime(2024, 1, 2, 12),
           CDC_POSITION),
        dead(CDC, 2, "too_large", "231 bytes, over the limit of 150"),
        dead(CDC, 3, "malformed_csv", "not a CSV record: a quote inside an unquoted field, "
             "text after a closing quote, or a quote never closed"),
        dead(CDC, 4, "wrong_column_count",
             "10 fields; expected 11 (Op and the 10 declared columns)"),
        dead(CDC, 5, "wrong_column_count",
             "3 fields; expected 11 (Op and the 10 declared columns)"),
        dead(CDC, 6, "unknown_op", "Op 'X' is not one of I,U,D"),
        dead(CDC, 7, "invalid_value", "id: 'seven' is not a bigint"),
        dead(CDC, 8, "invalid_value", "balance: '1.234' is not a decimal(12,2)"),
        dead(CDC, 9, "invalid_value", "opened_on: '2024-13-01' is not a date"),
        dead(CDC, 10, "invalid_value", "updated_at: 'yesterday' is not a timestamp"),
        dead(CDC, 11, "invalid_value", "active: 'maybe' is not a boolean"),
        dead(CDC, 12, "invalid_value", "commit_ts: 'soon' is not a time"),
        dead(CDC, 13, "missing_key", "no key (id) in the row"),
        # An unclosed quote takes the rest of its file into one record: nothing lost.
        dead(CDC, 14, "malformed_csv", "not a CSV record: a quote inside an unquoted field, "
             "text after a closing quote, or a quote never closed"),
        dead("LOAD00000001.csv", 1, "unknown_op", "Op 'U' in a full-load file"),
        dead("changes.csv", 1, "unknown_file_name", "file 'changes' is neither a DMS "
             "full-load file (LOAD...) nor a CDC file (yyyyMMdd-HHmmss...)"),
    ]  # fmt: skip


SEQUENCED = (
    ENTRY
    + """\
      columns: [id bigint, email string, seq]
      change_sequence: seq
      delimiter: ";"
      null_value: "NULL"
      rfc4180: false
"""
)


def test_a_change_sequence_positions_changes_whatever_the_file_name(spark, tmp_path) -> None:
    """The endpoint's other settings too: a `;` delimiter, a NULL marker, no quoting."""
    topic = accounts(tmp_path, "dms-csv", SEQUENCED)
    seq = "2024010212000001" + "0" * 18 + "7"
    files = {
        "LOAD00000001.csv": '1;"a"@x.io;\n2;;NULL\n',
        "any-name.csv": f"U;1;NULL;{seq}\nI;3;c;x\nI;4;d;NULL\n",
    }
    got = rows(dms.classify(csv_lines(spark, files), topic, 10_000))

    detail = "' is not a change sequence (YYYYMMDDHHmmSShh and a number)"
    assert got == [
        ok("LOAD00000001.csv", 1, "r", 1, None, image(id=1, email='"a"@x.io'), None, 0, ""),
        ok("LOAD00000001.csv", 2, "r", 2, None, image(id=2, email=""), None, 0),
        ok("any-name.csv", 1, "u", 1, None, image(id=1, email=None), None, 2024010212000001,
           seq),
        dead("any-name.csv", 2, "invalid_value", f"seq: 'x{detail}"),
        dead("any-name.csv", 3, "invalid_value", f"seq: '{detail}"),
    ]  # fmt: skip


def write_parquet(spark, directory: Path, name: str, rows: list[tuple], with_op: bool) -> None:
    """A Parquet file named as DMS names it (written aside by Spark, renamed in)."""
    schema = ("Op string, " if with_op else "") + COLUMNS
    scratch = directory / f"{name}.tmp"
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(scratch))
    (part,) = scratch.glob("part-*.parquet")
    part.rename(directory / name)
    shutil.rmtree(scratch)


def test_parquet_files_translate_like_csv(spark, tmp_path) -> None:
    topic = accounts(tmp_path, "dms-parquet")
    landing = tmp_path / TOPIC
    landing.mkdir()
    stamp = "2024-01-01 00:00:00.000000"
    write_parquet(
        spark,
        landing,
        "LOAD00000001.parquet",
        [
            (stamp, 1, "a@x.io", Decimal("10.50"), date(2020, 1, 2), datetime(2024, 1, 1),
             datetime(2024, 1, 1, 6), True, 1.5, None),
            (stamp, 2, None, None, None, None, None, None, None, None),
        ],
        with_op=False,
    )  # fmt: skip
    write_parquet(
        spark,
        landing,
        "20240102-1200000000.parquet",
        [
            ("U", "2024-01-02 12:00:01", 30, "c@x.io", Decimal("-0.01"), None, None, None,
             False, None, 3),
            ("D", "2024-01-02 12:00:02", 1, "a@x.io", Decimal("10.50"), None, None, None,
             None, None, None),
            ("X", "2024-01-02 12:00:03", 5, None, None, None, None, None, None, None, None),
            (None, "2024-01-02 12:00:04", 6, None, None, None, None, None, None, None, None),
            ("I", "later", 7, None, None, None, None, None, None, None, None),
        ],
        with_op=True,
    )  # fmt: skip
    read = spark.read.format("parquet").schema(dms.parquet_schema(topic.dms)).load(str(landing))
    records = dms.classify(dms.with_file_positions(read), topic, 10_000)
    got = rows(records)

    cdc = "20240102-1200000000.parquet"
    assert got == [
        ok(cdc, 1, "c", 30, None, account(30, "c@x.io", "-0.01", active=False),
           datetime(2024, 1, 2, 12, 0, 1), CDC_POSITION),
        ok(cdc, 1, "d", 3, image(id=3), None, datetime(2024, 1, 2, 12, 0, 1), CDC_POSITION),
        ok(cdc, 2, "d", 1, account(1, "a@x.io", "10.50"), None,
           datetime(2024, 1, 2, 12, 0, 2), CDC_POSITION),
        dead(cdc, 3, "unknown_op", "Op 'X' is not one of I,U,D"),
        dead(cdc, 4, "unknown_op", "Op is missing in a CDC file"),
        dead(cdc, 5, "invalid_value", "commit_ts: 'later' is not a time"),
        ok("LOAD00000001.parquet", 1, "r", 1, None,
           account(1, "a@x.io", "10.50", "2020-01-02", "2024-01-01 00:00:00",
                   "2024-01-01T06:00:00.000000Z", True, 1.5),
           LOADED, 0),
        ok("LOAD00000001.parquet", 2, "r", 2, None, account(2), LOADED, 0),
    ]  # fmt: skip
    # Parquet has no text: `_raw` is the row as JSON, timestamps to the microsecond.
    (raw,) = [r["_raw"] for r in records.where("_line_number = 2 and op = 'd'").collect()]
    assert json.loads(raw) == {
        "Op": "D", "commit_ts": "2024-01-02 12:00:02", "id": 1, "email": "a@x.io",
        "balance": 10.5, "opened_on": None, "updated_at": None, "last_login": None,
        "active": None, "score": None, "BI_id": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("format: avro", "has format 'avro'"),
        ("format: dms-csv", "needs a `dms:` block with `columns`"),
        ("dms: {columns: [id bigint]}", "a `dms:` block needs format dms-csv or dms-parquet"),
        ("format: dms-csv\n    dms: {columns: [id]}", "column `id` has no type"),
        ("format: dms-csv\n    dms: {columns: [id uuid]}", "column `id` has type 'uuid'"),
        ("format: dms-csv\n    dms: {columns: ['id decimal(20,2)']}", "precision 1 to 18"),
        ("format: dms-csv\n    dms: {columns: [other bigint]}", "key columns ['id']"),
        ("format: dms-csv\n    dms: {columns: [id bigint, id string]}", "declared twice"),
        (
            "format: dms-csv\n    dms: {columns: [id bigint], commit_timestamp: ts}",
            "the commit_timestamp column `ts` is not in `columns`",
        ),
        (
            "format: dms-csv\n    dms: {columns: [id bigint, BI_x], before_image_prefix: BI_}",
            "before image `BI_x` of no declared column",
        ),
        ("format: dms-csv\n    dms: {columns: [id bigint], delimiter: '\"'}", "delimiter"),
        ("format: dms-csv\n    dms: {columns: [id bigint], quote: x}", "unknown `dms:`"),
    ],
)
def test_a_bad_dms_layout_fails_with_the_topic_named(tmp_path, entry: str, message: str) -> None:
    registry = tmp_path / "topics.yml"
    registry.write_text(
        f"topics:\n  - topic: a.b\n    kind: cdc\n    key: [id]\n    table: a_b\n    {entry}\n"
    )
    with pytest.raises(ValueError, match="topic 'a.b'") as err:
        load_topics(registry)
    assert message in str(err.value)


def test_the_registry_reads_a_dms_layout(tmp_path) -> None:
    topic = accounts(tmp_path, "dms-parquet")
    assert (topic.format, topic.dms) == (
        "dms-parquet",
        dms.DmsLayout(
            columns=(
                dms.DmsColumn("commit_ts", "string", "commit_timestamp"),
                dms.DmsColumn("id", "bigint"),
                dms.DmsColumn("email", "string"),
                dms.DmsColumn("balance", "decimal(12,2)"),
                dms.DmsColumn("opened_on", "date"),
                dms.DmsColumn("updated_at", "timestamp"),
                dms.DmsColumn("last_login", "timestamptz"),
                dms.DmsColumn("active", "boolean"),
                dms.DmsColumn("score", "double"),
                dms.DmsColumn("BI_id", "bigint", "before_image", "id"),
            ),
            commit_timestamp="commit_ts",
            before_image_prefix="BI_",
        ),
    )
    assert dms.parquet_schema(topic.dms) == "`Op` string, " + ", ".join(
        f"`{c.split()[0]}` {c.split()[1]}" for c in COLUMNS.split(", ")
    )


def test_dms_topics_are_refused_from_kafka(tmp_path) -> None:
    topic = accounts(tmp_path, "dms-csv")
    options = ingest.IngestOptions(source="kafka", bootstrap_servers="127.0.0.1:1")
    with pytest.raises(ingest.IngestError, match="landing zone only, not from Kafka"):
        ingest.run(options, topics=[topic])
