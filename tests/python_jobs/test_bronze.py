"""Landing files to Bronze rows: the pure transforms, with exact rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from python_jobs import bronze

# Late in the UTC day: a time zone shift would move the partition date too.
INGESTED_AT = datetime(2024, 10, 7, 23, 30, 0, tzinfo=UTC)
NAIVE_UTC = datetime(2024, 10, 7, 23, 30, 0)
LINES_SCHEMA = "_raw string, _source_file string, _line_number int"


def _files(spark, rows: list[tuple[str, str]]):
    return spark.createDataFrame(rows, "value string, _source_file string")


def test_split_lines_keeps_raw_lines_and_numbers_them(spark) -> None:
    files = _files(
        spark,
        [
            ('{"a":1}\n{"a":2}\n', "f1.json"),  # trailing newline: no extra line
            ('{"a":3}\nnull\n\n{"a":4}', "f2.json"),  # tombstones kept here
            ("", "empty.json"),  # an empty file has no lines
            ('  {"b": "x y"}  \n', "f3.json"),  # whitespace kept exactly
        ],
    )
    got = sorted(tuple(r) for r in bronze.split_lines(files).collect())
    assert got == [
        ("", "f2.json", 3),
        ('  {"b": "x y"}  ', "f3.json", 1),
        ("null", "f2.json", 2),
        ('{"a":1}', "f1.json", 1),
        ('{"a":2}', "f1.json", 2),
        ('{"a":3}', "f2.json", 1),
        ('{"a":4}', "f2.json", 4),
    ]


def test_decorate_drops_tombstones_and_adds_metadata(spark) -> None:
    lines = spark.createDataFrame(
        [
            ('{"a":1}', "f.json", 1),
            ("null", "f.json", 2),
            ("  ", "f.json", 3),
            ('{"a":2}', "f.json", 4),
            ("null\r", "f.json", 5),  # a CRLF file's tombstone
            ("\t", "f.json", 6),
            ('"null"', "f.json", 7),  # a JSON string, not a tombstone
        ],
        LINES_SCHEMA,
    )
    out = bronze.decorate(lines, batch_id=7, ingested_at=INGESTED_AT)
    assert [f.name for f in out.schema] == [f.name for f in bronze.BRONZE_SCHEMA]
    got = sorted(tuple(r) for r in out.collect())
    assert got == [
        ('"null"', "f.json", 7, NAIVE_UTC, 7, date(2024, 10, 7)),
        ('{"a":1}', "f.json", 1, NAIVE_UTC, 7, date(2024, 10, 7)),
        ('{"a":2}', "f.json", 4, NAIVE_UTC, 7, date(2024, 10, 7)),
    ]


def test_decorate_stores_the_utc_instant_whatever_the_callers_zone(spark) -> None:
    lines = spark.createDataFrame(
        [("x", "f.json", 1)], "_raw string, _source_file string, _line_number int"
    )
    in_kolkata = INGESTED_AT.astimezone(timezone(timedelta(hours=5, minutes=30)))
    row = (
        bronze.decorate(lines, 0, in_kolkata)
        .selectExpr("date_format(_ingested_at, 'yyyy-MM-dd HH:mm') as t", "_ingest_date")
        .first()
    )
    assert (row.t, row._ingest_date) == ("2024-10-07 23:30", date(2024, 10, 7))


def test_decorate_refuses_a_naive_time(spark) -> None:
    lines = spark.createDataFrame(
        [("x", "f.json", 1)], "_raw string, _source_file string, _line_number int"
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        bronze.decorate(lines, 0, NAIVE_UTC)


def test_ensure_table_creates_an_empty_append_only_table_once(spark, tmp_path, monkeypatch) -> None:
    from python_jobs.topics import Topic

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    topic = Topic(topic="t.x", kind="events", key=("id",), table="t_x")
    bronze.ensure_table(spark, topic)
    bronze.ensure_table(spark, topic)  # idempotent
    path = str(tmp_path / "bronze" / "t_x")
    assert spark.read.format("delta").load(path).count() == 0
    detail = spark.sql(f"describe detail delta.`{path}`").collect()[0]
    assert detail["partitionColumns"] == ["_ingest_date"]
    assert detail["properties"]["delta.appendOnly"] == "true"
    history = spark.sql(f"describe history delta.`{path}`").collect()
    assert len(history) == 1
