"""Records to Bronze rows and dead letters: the pure transforms, with exact rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from delta.tables import DeltaTable

from python_jobs import bronze
from python_jobs.topics import Topic

# Late in the UTC day: a time zone shift would move the partition date too.
INGESTED_AT = datetime(2024, 10, 7, 23, 30, 0, tzinfo=UTC)
NAIVE_UTC = datetime(2024, 10, 7, 23, 30, 0)
USERS = Topic(topic="t.users", kind="cdc", key=("user_id",), table="t_users")
PAIRS = Topic(topic="t.pairs", kind="cdc", key=("a", "b"), table="t_pairs")
VISITS = Topic(topic="t.visits", kind="events", key=("visit_id",), table="t_visits")
SOURCE = (
    '"source":{"ts_ms":1727740800000,"lsn":100,"txId":7,"sequence":"[\\"90\\",\\"100\\"]",'
    '"snapshot":"false","db":"blog","schema":"public","table":"users"}'
)


def _lines(spark, raws: list[str | None], topic: Topic = USERS):
    rows = [(raw, topic.topic, None, None, "f.json", n) for n, raw in enumerate(raws, start=1)]
    return spark.createDataFrame(rows, bronze.LINE_SCHEMA)


def _classify(spark, raws: list[str | None], topic: Topic = USERS, limit: int = 10_000):
    rows = bronze.classify(_lines(spark, raws, topic), topic, limit).collect()
    return sorted(rows, key=lambda r: r["_line_number"])


def test_split_lines_keeps_raw_lines_and_numbers_them(spark) -> None:
    files = spark.createDataFrame(
        [
            ('{"a":1}\n{"a":2}\n', "f1.json"),  # trailing newline: no extra line
            ('{"a":3}\nnull\n\n{"a":4}', "f2.json"),  # tombstones kept here
            ("", "empty.json"),  # an empty file has no lines
            ('  {"b": "x y"}  \n', "f3.json"),  # whitespace kept exactly
        ],
        "value string, _source_file string",
    )
    out = bronze.split_lines(files, "t.x")
    assert out.columns == bronze.LINE_COLUMNS
    got = sorted((r._raw, r._source_file, r._line_number, r._topic) for r in out.collect())
    assert got == [
        ("", "f2.json", 3, "t.x"),
        ('  {"b": "x y"}  ', "f3.json", 1, "t.x"),
        ("null", "f2.json", 2, "t.x"),
        ('{"a":1}', "f1.json", 1, "t.x"),
        ('{"a":2}', "f1.json", 2, "t.x"),
        ('{"a":3}', "f2.json", 1, "t.x"),
        ('{"a":4}', "f2.json", 4, "t.x"),
    ]


def test_cdc_envelopes_bare_and_wrapped_are_parsed(spark) -> None:
    raws = [
        '{"before":null,"after":{"user_id":1,"email":"a"},' + SOURCE + ',"op":"c","ts_ms":1}',
        '{"schema":{"type":"struct"},"payload":{"before":null,"after":{"user_id":2},'
        + SOURCE
        + ',"op":"u"}}',
        '{"before":{"user_id":3},"after":null,' + SOURCE + ',"op":"d"}',
        '{"before":null,"after":{"user_id":4},' + SOURCE + ',"op":"r"}',
        '{"before":null,"after":null,' + SOURCE + ',"op":"t"}',
    ]
    got = [(r._status, r.record_key, r.op, r.before, r.after) for r in _classify(spark, raws)]
    assert got == [
        ("bronze", '{"user_id":"1"}', "c", None, '{"user_id":1,"email":"a"}'),
        ("bronze", '{"user_id":"2"}', "u", None, '{"user_id":2}'),
        ("bronze", '{"user_id":"3"}', "d", '{"user_id":3}', None),
        ("bronze", '{"user_id":"4"}', "r", None, '{"user_id":4}'),
        ("bronze", None, "t", None, None),
    ]
    first = _classify(spark, raws[:1])[0]
    assert (
        first.source_committed_at,
        first.source_lsn,
        first.source_tx_id,
        first.source_sequence,
        first.source_snapshot,
        first.source_db,
        first.source_schema,
        first.source_table,
        first._error_reason,
    ) == (
        datetime(2024, 10, 1, 0, 0),
        100,
        7,
        '["90","100"]',
        "false",
        "blog",
        "public",
        "users",
        None,
    )


def test_tombstones_are_labelled_not_parsed(spark) -> None:
    raws = ["null", "", "  ", "null\r", "\t", None, '"null"']
    got = [(r._status, r._error_reason) for r in _classify(spark, raws)]
    # A JSON string "null" is not a tombstone: it is a record that is not an object.
    assert got == [("tombstone", None)] * 6 + [("dead_letter", "not_an_object")]


@pytest.mark.parametrize(
    ("raw", "reason", "detail"),
    [
        ('{"a":1', "malformed_json", "not valid JSON"),
        ('{"a":1} x', "malformed_json", "not valid JSON"),
        ('{"a":1}{"a":2}', "malformed_json", "not valid JSON"),
        ('{"a":1},{"a":2}', "malformed_json", "more than one JSON value"),
        ('{"a":1}]junk', "malformed_json", "not valid JSON"),
        ('{"a":1}] , [2', "malformed_json", "not valid JSON"),
        ("{'a':1}", "malformed_json", "not valid JSON"),
        ('{"a":NaN}', "malformed_json", "not valid JSON"),
        ("[1,2]", "not_an_object", "valid JSON but not an object"),
        ("42", "not_an_object", "valid JSON but not an object"),
        (
            '{"before":null,"after":{"user_id":1},' + SOURCE + ',"op":"x"}',
            "unknown_op",
            "op 'x' is not one of c,u,d,r,t",
        ),
        ('{"before":null,"after":{"user_id":1},' + SOURCE + "}", "unknown_op", "op is missing"),
        (
            '{"after":{"user_id":1},"op":"c"}',
            "invalid_envelope",
            "source is missing or not an object",
        ),
        (
            '{"after":{"user_id":1},"source":{"lsn":"x","ts_ms":1},"op":"c"}',
            "invalid_envelope",
            "source.lsn is missing or not an integer",
        ),
        (
            '{"after":{"user_id":1},"source":{"lsn":1},"op":"c"}',
            "invalid_envelope",
            "source.ts_ms is missing or not an integer",
        ),
        (
            '{"after":{"user_id":1},"source":{"lsn":1,"ts_ms":253402300800000},"op":"c"}',
            "invalid_envelope",
            "source.ts_ms 253402300800000 is not a time in years 1970 to 9999",
        ),
        (
            '{"after":{"user_id":1},"source":{"lsn":1,"ts_ms":-1},"op":"c"}',
            "invalid_envelope",
            "source.ts_ms -1 is not a time in years 1970 to 9999",
        ),
        (
            '{"schema":{},"payload":"{\\"op\\":\\"c\\"}"}',
            "invalid_envelope",
            "payload is not a JSON object",
        ),
        (
            '{"before":null,"after":"{\\"user_id\\":1}",' + SOURCE + ',"op":"c"}',
            "invalid_envelope",
            "after is not a JSON object",
        ),
        (
            '{"before":[1],"after":{"user_id":1},' + SOURCE + ',"op":"u"}',
            "invalid_envelope",
            "before is not a JSON object",
        ),
        (
            '{"before":null,"after":null,' + SOURCE + ',"op":"c"}',
            "invalid_envelope",
            "op c without a row image in after",
        ),
        (
            '{"before":null,"after":null,' + SOURCE + ',"op":"d"}',
            "invalid_envelope",
            "op d without a row image in before",
        ),
        (
            '{"before":null,"after":{"email":"x"},' + SOURCE + ',"op":"c"}',
            "missing_key",
            "no key (user_id) in after",
        ),
        (
            '{"before":{"user_id":null},"after":null,' + SOURCE + ',"op":"d"}',
            "missing_key",
            "no key (user_id) in before",
        ),
    ],
)
def test_bad_cdc_records_are_dead_letters_with_a_reason(spark, raw, reason, detail) -> None:
    (row,) = _classify(spark, [raw])
    assert (row._status, row._error_reason, row._error_detail) == ("dead_letter", reason, detail)
    assert (row.op, row.record_key, row.source_lsn) == (None, None, None)


def test_a_record_over_the_size_limit_is_a_dead_letter_whatever_it_holds(spark) -> None:
    ok = '{"before":null,"after":{"user_id":1},' + SOURCE + ',"op":"c"}'
    size = len(ok.encode())
    rows = _classify(spark, [ok, ok + " "], limit=size)
    assert [(r._status, r._error_reason, r._error_detail) for r in rows] == [
        ("bronze", None, None),
        ("dead_letter", "too_large", f"{size + 1} bytes, over the limit of {size}"),
    ]


def test_a_composite_key_needs_one_part_only(spark) -> None:
    raws = [
        '{"after":{"a":1,"b":null},' + SOURCE + ',"op":"c"}',
        '{"after":{"b":"x"},' + SOURCE + ',"op":"c"}',
        '{"after":{"a":null,"b":null},' + SOURCE + ',"op":"c"}',
    ]
    got = [(r._status, r.record_key, r._error_reason) for r in _classify(spark, raws, PAIRS)]
    assert got == [
        ("bronze", '{"a":"1","b":null}', None),
        ("bronze", '{"a":null,"b":"x"}', None),
        ("dead_letter", None, "missing_key"),
    ]


def test_events_need_an_object_not_a_key(spark) -> None:
    raws = ['{"visit_id":"v1","page":"/"}', '{"page":"/"}', '["v1"]', "{oops", "null"]
    got = [(r._status, r.record_key, r.op, r._error_reason) for r in _classify(spark, raws, VISITS)]
    assert got == [
        ("bronze", '{"visit_id":"v1"}', None, None),
        ("bronze", '{"visit_id":null}', None, None),
        ("dead_letter", None, None, "not_an_object"),
        ("dead_letter", None, None, "malformed_json"),
        ("tombstone", None, None, None),
    ]


def test_bronze_and_dead_letter_rows_have_their_tables_columns(spark) -> None:
    raws = ['{"visit_id":"v1"}', "{oops", "null"]
    records = bronze.decorate(
        bronze.classify(_lines(spark, raws, VISITS), VISITS, 100), 7, INGESTED_AT
    )
    rows = bronze.bronze_rows(records)
    dead = bronze.dead_letter_rows(records)
    assert rows.columns == bronze.BRONZE_SCHEMA.fieldNames()
    assert dead.columns == bronze.DEAD_LETTER_SCHEMA.fieldNames()
    assert [
        (r._raw, r._line_number, r._ingested_at, r._batch_id, r._ingest_date)
        for r in rows.collect()
    ] == [('{"visit_id":"v1"}', 1, NAIVE_UTC, 7, date(2024, 10, 7))]
    assert [
        (r._raw, r._error_reason, r._topic, r._source_file, r._line_number) for r in dead.collect()
    ] == [("{oops", "malformed_json", "t.visits", "f.json", 2)]
    counts = bronze.count_statuses(records)
    assert counts == {
        "records_read": 3,
        "bronze_rows": 1,
        "dead_letters": 1,
        "tombstones": 1,
        "declined": 0,
        "max_source_committed_at": None,
        "reasons": {"malformed_json": 1},
    }


def test_decorate_stores_the_utc_instant_whatever_the_callers_zone(spark) -> None:
    in_kolkata = INGESTED_AT.astimezone(timezone(timedelta(hours=5, minutes=30)))
    row = (
        bronze.decorate(_lines(spark, ["x"]), 0, in_kolkata)
        .selectExpr("date_format(_ingested_at, 'yyyy-MM-dd HH:mm') as t", "_ingest_date")
        .first()
    )
    assert (row.t, row._ingest_date) == ("2024-10-07 23:30", date(2024, 10, 7))


def test_decorate_refuses_a_naive_time(spark) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        bronze.decorate(_lines(spark, ["x"]), 0, NAIVE_UTC)


def test_ensure_tables_creates_empty_append_only_tables_once(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    topic = Topic(topic="t.x", kind="events", key=("id",), table="t_x")
    bronze.ensure_tables(spark, [topic])
    bronze.ensure_tables(spark, [topic])  # idempotent
    for path, partitions in [
        (tmp_path / "bronze" / "t_x", ["_ingest_date"]),
        (tmp_path / "bronze" / "dead_letter", ["_ingest_date"]),
        (tmp_path / "ops" / "ingestion_batches", []),
    ]:
        assert spark.read.format("delta").load(str(path)).count() == 0
        detail = spark.sql(f"describe detail delta.`{path}`").collect()[0]
        assert detail["partitionColumns"] == partitions
        assert detail["properties"]["delta.appendOnly"] == "true"
        # No deletion vectors (the session turns them on for new tables): nothing
        # deletes here, and the feature would cost every scan a job.
        assert "deletionVectors" not in detail["tableFeatures"]
        assert len(spark.sql(f"describe history delta.`{path}`").collect()) == 1


def test_ensure_tables_adds_new_columns_to_an_older_table(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    path = str(tmp_path / "ops" / "ingestion_batches")
    spark.createDataFrame([("t", 3)], "topic string, records_read bigint").write.format(
        "delta"
    ).save(path)
    bronze.ensure_tables(spark, [])
    table = spark.read.format("delta").load(path)
    assert table.columns == ["topic", "records_read"] + [
        f.name for f in bronze.BATCH_SCHEMA if f.name not in ("topic", "records_read")
    ]
    assert table.select("topic", "records_read", "source").collect()[0] == ("t", 3, None)


def test_bronze_rows_carry_the_version_of_the_commit_that_wrote_them(
    spark, tmp_path, monkeypatch
) -> None:
    """Row tracking (the windowed materializations read Bronze by commit version), also
    switched on for a Bronze table made before it was."""
    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    topic = Topic(topic="t.x", kind="events", key=("id",), table="t_x")
    path = str(tmp_path / "bronze" / "t_x")
    bronze.ensure_delta_table(spark, path, bronze.BRONZE_SCHEMA, ["_ingest_date"])  # older
    bronze.ensure_tables(spark, [topic])
    detail = spark.sql(f"describe detail delta.`{path}`").collect()[0]
    assert detail["properties"]["delta.enableRowTracking"] == "true"
    # What ensure_tables reads instead of describe detail (which costs Spark jobs).
    assert bronze.logged_properties(DeltaTable.forPath(spark, path)) == detail["properties"]
    versions = []
    for n, lines in enumerate([['{"id": "a"}', '{"id": "b"}'], ['{"id": "c"}']]):
        rows = [(line, topic.topic, None, None, "f.json", i) for i, line in enumerate(lines, 1)]
        frame = bronze.classify(spark.createDataFrame(rows, bronze.LINE_SCHEMA), topic, 1024)
        ingested = datetime(2024, 10, 7, 10 - n, tzinfo=UTC)  # the second clock is earlier
        bronze.bronze_rows(bronze.decorate(frame, n, ingested)).write.format("delta").mode(
            "append"
        ).save(path)
        versions.append(spark.sql(f"describe history delta.`{path}` limit 1").first()[0])
    got = spark.sql(
        f"select _line_number, _metadata.row_commit_version from delta.`{path}` order by 2, 1"
    ).collect()
    assert [tuple(r) for r in got] == [(1, versions[0]), (2, versions[0]), (1, versions[1])]
    assert versions[1] > versions[0]


def test_a_second_pass_reads_again_only_the_records_set_aside(spark, monkeypatch) -> None:
    """The first pass observes the position hashes of its declined records and dead
    letters; the second reads the lines narrowed to them, unparsed."""
    from pyspark.sql import Observation

    raws = ['{"id":1}', "{oops", "null", '{"id":2}', "[3]"]
    lines = _lines(spark, raws, VISITS)
    observation = Observation("set_aside")
    bronze.classify(lines, VISITS, 100).observe(
        observation, bronze.set_aside_metric()
    ).write.format("noop").mode("overwrite").save()
    hashes = list(observation.get["set_aside"])
    assert len(hashes) == 2
    narrowed = bronze.narrowed_to(lines, hashes).orderBy("_line_number").collect()
    assert [(r._line_number, r._raw) for r in narrowed] == [(2, "{oops"), (5, "[3]")]
    # Nothing observed, or more than the limit: every line, as before.
    assert bronze.narrowed_to(lines, None).count() == 5
    monkeypatch.setattr(bronze, "MAX_SET_ASIDE", 1)
    assert bronze.narrowed_to(lines, hashes).count() == 5
