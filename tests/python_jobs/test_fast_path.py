"""The ingestion's hot path: line numbering of streamed files and the one-parse fast path
for CDC records, which must agree with the exact classification on every record."""

from __future__ import annotations

from pathlib import Path

import pytest

from python_jobs import bronze
from python_jobs.topics import Topic, load_topics

USERS = Topic(topic="t.users", kind="cdc", key=("user_id",), table="t_users")
SOURCE = '"source":{"ts_ms":1727740800000,"lsn":100,"txId":7,"table":"users"}'


def _rows(spark, tasks: list[list[tuple[str, str, int]]]):
    """Rows as the text source yields them: one Spark partition per task, in order."""
    rdd = spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(lambda rows: rows)
    return spark.createDataFrame(rdd, "_raw string, _source_file string, _block_start long")


def test_lines_are_numbered_within_their_file_and_split(spark) -> None:
    # Task 0 reads the split at 0 (two lines), task 1 the split at 1024.
    tasks = [[("a", "file:/f.json", 0), ("b", "file:/f.json", 0)], [("c", "file:/f.json", 1024)]]
    numbered = bronze.number_lines(_rows(spark, tasks), "t.x", {("file:/f.json", 1024): 2})
    assert numbered.columns == bronze.LINE_COLUMNS
    got = [(r._raw, r._source_file, r._line_number, r._topic) for r in numbered.collect()]
    assert got == [
        ("a", "file:/f.json", 1, "t.x"),
        ("b", "file:/f.json", 2, "t.x"),
        ("c", "file:/f.json", 3, "t.x"),
    ]


def test_a_split_without_its_line_count_fails_instead_of_guessing(spark) -> None:
    tasks = [[("a", "file:/f.json", 0)], [("c", "file:/f.json", 1024)]]
    with pytest.raises(Exception, match="no line count for the split of file:/f.json at byte 1024"):
        bronze.number_lines(_rows(spark, tasks), "t.x").collect()


def _paths(spark, raws: list[str | None], topic: Topic) -> tuple[list, list, list]:
    """Every record classified three ways, in line order: in one pass (`classify`), in
    the ingestion's two passes (`classify_fast`, then `classify_declined` for the
    records it declined), and by the exact rules alone."""
    rows = [(raw, topic.topic, None, None, "f.json", n) for n, raw in enumerate(raws, start=1)]
    lines = spark.createDataFrame(rows, bronze.LINE_SCHEMA)
    columns = ["_line_number", "_status", "_error_reason", "_error_detail"] + [
        f.name for f in bronze.ENVELOPE_FIELDS
    ]

    def ordered(frame):  # type: ignore[no-untyped-def]
        return frame.select(*columns).orderBy("_line_number").collect()

    decided = bronze.classify_fast(lines, topic, 10_000).where("_status != 'declined'")
    two_passes = decided.unionByName(bronze.classify_declined(lines, topic, 10_000))
    return (
        ordered(bronze.classify(lines, topic, 10_000)),
        ordered(two_passes),
        ordered(bronze._classify_exact(lines, topic, 10_000)),
    )


def _both_paths(spark, raws: list[str | None], topic: Topic) -> tuple[list, list]:
    one_pass, two_passes, exact = _paths(spark, raws, topic)
    assert two_passes == exact
    return one_pass, exact


TRICKY = [
    # Strings that hold JSON text where an object belongs: the exact path decides.
    '{"before":null,"after":"{\\"user_id\\":1}",' + SOURCE + ',"op":"c"}',
    '{"before":"{}","after":{"user_id":1},' + SOURCE + ',"op":"u"}',
    '{"before":null,"after":"\\u007b\\"user_id\\":1}",' + SOURCE + ',"op":"c"}',
    '{"schema":{},"payload":"{\\"op\\":\\"c\\"}"}',
    '{"schema":{},"payload":5,"after":{"user_id":1},' + SOURCE + ',"op":"c"}',
    '{"payload":null,"after":{"user_id":1},' + SOURCE + ',"op":"c"}',
    # Objects the fast path accepts, bare and wrapped, with spaces, escapes, floats.
    '{"before":null,"after":{"user_id":1,"v":1.50,"n":{"b":1,"a":2}},' + SOURCE + ',"op":"c"}',
    '{"schema":{"x":1},"payload":{"before":{"user_id":2},"after":null,' + SOURCE + ',"op":"d"}}',
    '{ "before" : null , "after" : { "user_id" : 3 , "s" : "a\\"b" } , ' + SOURCE + ' , "op":"r"}',
    '{"after":{"user_id":4,"user_id":5},' + SOURCE + ',"op":"c"}',
    '{"after":{"user_id":"{6}"},' + SOURCE + ',"op":"c"}',
    '{"after":{"user_id":7},"source":{"ts_ms":1,"lsn":"x"},"op":"c"}',
    '{"after":{"user_id":8},' + SOURCE + ',"op":"t"}',
    '{"after":[8],' + SOURCE + ',"op":"t"}',
    '{"after":{"user_id":9},' + SOURCE + ',"op":"c"} ',
    '{"after":{"user_id":9},' + SOURCE + ',"op":"c"}x',
    # Not objects, or not one value.
    '["v1"]',
    "42",
    '"{}"',
    "{}",
    "{} {}",
    '{"visit_id":"v1"}]',
    "null",
    "",
    None,
]


def test_the_fast_path_agrees_with_the_exact_one_on_tricky_records(spark) -> None:
    fast, exact = _both_paths(spark, TRICKY, USERS)
    assert fast == exact
    statuses = [r._status for r in exact]
    assert statuses.count("bronze") >= 6 and statuses.count("dead_letter") >= 5


def test_the_fast_path_declines_what_it_cannot_decide_and_takes_the_rest(spark) -> None:
    lines = spark.createDataFrame(
        [(raw, USERS.topic, None, None, "f.json", n) for n, raw in enumerate(TRICKY, start=1)],
        bronze.LINE_SCHEMA,
    )
    fast = bronze.classify_fast(lines, USERS, 10_000).orderBy("_line_number").collect()
    declined = bronze.classify_declined(lines, USERS, 10_000).orderBy("_line_number").collect()
    # The strings holding JSON text and the bad records are declined (the exact rules
    # decide them); the well-formed objects and the tombstones are decided at once.
    assert [r._line_number for r in fast if r._status == "declined"] == [
        r._line_number for r in declined
    ]
    assert [r._status for r in fast[:9]] == ["declined"] * 6 + ["bronze"] * 3
    assert [r._status for r in fast[-2:]] == ["tombstone", "tombstone"]
    assert all(r._error_reason is None for r in fast)
    assert {r._status for r in declined} == {"bronze", "dead_letter"}


def test_the_fast_path_agrees_with_the_exact_one_on_a_chaos_workload(
    spark, tmp_path: Path, simulate
) -> None:
    simulate(
        tmp_path / "landing",
        tmp_path / "truth",
        "--seed", "3",
        "--users", "60",
        "--articles", "30",
        "--days", "2",
        "--malformed-rate", "0.2",
        "--wrapped-rate", "0.5",
        "--delete-rate", "0.2",
        "--add-column-at", "0.5",
    )  # fmt: skip
    statuses: set[str] = set()
    for topic in load_topics():
        if topic.kind != "cdc":
            continue
        raws = []
        for file in sorted((tmp_path / "landing" / topic.topic).glob("*.json")):
            raws += file.read_text(encoding="utf-8").split("\n")[:-1]
        assert len(raws) > 100
        # The simulator breaks only visits: CDC dead letters come from TRICKY.
        fast, exact = _both_paths(spark, raws + TRICKY, topic)
        assert fast == exact, topic.topic
        statuses |= {r._status for r in exact}
    assert statuses == {"bronze", "dead_letter", "tombstone"}
