"""Ingestion into Bronze: incremental, idempotent on replay, bad records aside, counted."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from python_jobs import bronze, ingest, kafka_identity
from python_jobs.spark import REPO_ROOT
from python_jobs.tools.kafka_broker import free_port
from python_jobs.topics import Topic, load_topics
from tests.helpers import bronze_records
from tests.python_jobs.test_dms import ENTRY

TOPIC = Topic(topic="test.events", kind="events", key=("id",), table="test_events")
_SECONDS = itertools.count()
CDC = Topic(topic="test.public.items", kind="cdc", key=("item_id",), table="test_public_items")


def _land(landing: Path, name: str, lines: list[str], topic: Topic = TOPIC) -> None:
    """Write a landing file atomically (elsewhere, then renamed in), a second after the
    previous one: Spark's file source takes files in modification-time order."""
    directory = landing / topic.topic
    directory.mkdir(parents=True, exist_ok=True)
    tmp = landing / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    stamp = time.time() + next(_SECONDS)
    os.utime(tmp, (stamp, stamp))
    tmp.rename(directory / name)


def _change(op: str, item_id: int, lsn: int, ts_ms: int, **columns: object) -> str:
    image = json.dumps({"item_id": item_id, **columns}, separators=(",", ":"))
    before, after = (image, "null") if op == "d" else ("null", image)
    source = f'{{"ts_ms":{ts_ms},"lsn":{lsn},"txId":1,"table":"items"}}'
    return f'{{"before":{before},"after":{after},"source":{source},"op":"{op}"}}'


def _commits(spark, topic: Topic = TOPIC) -> int:
    history = spark.sql(f"describe history delta.`{topic.bronze_path}`").collect()
    return sum(1 for h in history if h["operation"] == "WRITE")


def _table(spark, path: str):
    return spark.read.format("delta").load(path)


def _batches(spark, topic: Topic = TOPIC) -> list[tuple]:
    rows = _table(spark, bronze.batches_path()).where(f"topic = '{topic.topic}'").collect()
    return sorted(
        (
            (
                r.batch_id,
                r.is_heartbeat,
                r.records_read,
                r.bronze_rows,
                r.dead_letters,
                r.tombstones,
                r.source,
            )
            for r in rows
        ),
        key=lambda t: (t[0] is None, t[0] or 0),
    )


def _options(landing: Path, **overrides: object) -> ingest.IngestOptions:
    return ingest.IngestOptions(landing=landing, **overrides)  # type: ignore[arg-type]


def test_ingestion_is_incremental_and_a_rerun_writes_nothing(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', "null", '{"id":2}'])
    ingest.run(_options(landing), topics=[TOPIC])
    _land(landing, "000002.json", ['{"id":3}'])
    ingest.run(_options(landing), topics=[TOPIC])
    ingest.run(_options(landing), topics=[TOPIC])  # nothing new: no commit, a heartbeat
    assert bronze_records(spark, TOPIC.table) == [
        ("000001.json", 1, '{"id":1}'),
        ("000001.json", 3, '{"id":2}'),
        ("000002.json", 1, '{"id":3}'),
    ]
    assert _commits(spark) == 2
    assert _batches(spark) == [
        (0, False, 3, 2, 0, 1, "files"),
        (1, False, 1, 1, 0, 0, "files"),
        (None, True, 0, 0, 0, 0, "files"),
    ]


def test_bad_records_go_to_the_dead_letters_and_every_record_is_counted(
    spark, clean_lakehouse
) -> None:
    landing = clean_lakehouse["landing"]
    lines = [
        _change("c", 1, 10, 1_727_740_800_000, name="a"),
        "{not json",
        "",
        _change("u", 1, 11, 1_727_740_801_000, name="b"),
        '{"before":null,"after":{"name":"x"},"source":{"ts_ms":1,"lsn":1},"op":"c"}',
        "null",
        '{"before":null,"after":{"item_id":2},"source":{"ts_ms":1,"lsn":1},"op":"z"}',
        _change("d", 1, 12, 1_727_740_802_000),
    ]
    _land(landing, "000001.json", lines, CDC)
    ingest.run(_options(landing), topics=[CDC])

    rows = _table(spark, str(CDC.bronze_path)).orderBy("_line_number").collect()
    assert [(r._line_number, r.op, r.record_key, r.source_lsn) for r in rows] == [
        (1, "c", '{"item_id":"1"}', 10),
        (4, "u", '{"item_id":"1"}', 11),
        (8, "d", '{"item_id":"1"}', 12),
    ]
    assert [r._raw for r in rows] == [lines[0], lines[3], lines[7]]
    dead = _table(spark, bronze.dead_letter_path()).orderBy("_line_number").collect()
    assert [(r._line_number, r._topic, r._error_reason, r._raw) for r in dead] == [
        (2, CDC.topic, "malformed_json", "{not json"),
        (5, CDC.topic, "missing_key", lines[4]),
        (7, CDC.topic, "unknown_op", lines[6]),
    ]
    assert all(Path(r._source_file).name == "000001.json" for r in dead)
    (batch,) = _table(spark, bronze.batches_path()).collect()
    # Conservation: records read = Bronze rows + dead letters + tombstones.
    assert (batch.records_read, batch.bronze_rows, batch.dead_letters, batch.tombstones) == (
        8,
        3,
        3,
        2,
    )
    assert batch.max_source_committed_at == datetime(2024, 10, 1, 0, 0, 2)
    expected_lag = (batch.started_at - batch.max_source_committed_at).total_seconds()
    assert batch.lag_seconds == pytest.approx(expected_lag)
    assert batch.duration_seconds > 0


def test_a_record_that_is_not_utf8_is_a_dead_letter_with_its_bytes(
    spark, clean_lakehouse, tmp_path
) -> None:
    """Bytes that are not UTF-8 (a Latin-1 `é`): Spark's JSON parser (and the regular
    expressions that split a DMS CSV record) would read them as U+FFFD and the record
    would reach Bronze altered. A dead letter instead, on the CDC fast path, the events
    path and a DMS CSV topic alike, its `_raw` holding the bytes received."""
    landing = clean_lakehouse["landing"]
    good = _change("c", 1, 10, 1_727_740_800_000, name="cafe")
    bad = _change("c", 2, 11, 1_727_740_801_000, name="caf\u00e9").replace("\\u00e9", "\xe9")
    dms = _dms_topic(tmp_path, "dms-csv", "id bigint, name string")
    landed = (
        (CDC, "000001.json", [good, bad]),
        (TOPIC, "000001.json", ['{"id":1}', '{"id":2,"n":"caf\xe9"}']),
        (dms, "LOAD00000001.csv", ["1,cafe", "2,caf\xe9"]),
    )
    for topic, name, lines in landed:
        directory = landing / topic.topic
        directory.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(b"".join(line.encode("latin-1") + b"\n" for line in lines))
    ingest.run(_options(landing), topics=[CDC, TOPIC, dms])

    assert [r.source_lsn for r in _table(spark, str(CDC.bronze_path)).collect()] == [10]
    assert bronze_records(spark, TOPIC.table) == [("000001.json", 1, '{"id":1}')]
    assert [r._raw for r in _table(spark, str(dms.bronze_path)).collect()] == ["1,cafe"]
    dead = _table(spark, bronze.dead_letter_path()).selectExpr(
        "_topic", "_line_number", "_error_reason", "_error_detail", "hex(cast(_raw as binary))"
    )
    assert sorted(tuple(r) for r in dead.collect()) == sorted(
        (topic.topic, 2, "invalid_utf8", "not valid UTF-8", line.encode("latin-1").hex().upper())
        for topic, _, (_, line) in landed
    )


def test_too_many_invalid_records_fail_the_query_and_write_nothing(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', "[1]", "{x", "{y"])
    with pytest.raises(ingest.IngestError) as error:
        ingest.run(_options(landing, max_invalid_ratio=0.5), topics=[TOPIC])
    assert "test.events: batch 0 has 3 invalid records out of 4 (ratio 0.750)" in str(error.value)
    assert bronze_records(spark, TOPIC.table) == []
    assert _table(spark, bronze.dead_letter_path()).count() == 0
    assert _batches(spark) == []
    # Nothing was lost: with a higher limit the same batch goes through.
    ingest.run(_options(landing, max_invalid_ratio=0.75), topics=[TOPIC])
    assert bronze_records(spark, TOPIC.table) == [("000001.json", 1, '{"id":1}')]
    assert _table(spark, bronze.dead_letter_path()).count() == 3


def test_a_column_added_mid_stream_lands_without_a_restart(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", [_change("c", 1, 10, 1000, name="a")], CDC)
    _land(landing, "000002.json", [_change("u", 1, 11, 2000, name="b", colour="red")], CDC)
    ingest.run(_options(landing, max_files=1), topics=[CDC])  # two batches, one run
    rows = _table(spark, str(CDC.bronze_path)).orderBy("source_lsn").collect()
    assert [(r._batch_id, r.after) for r in rows] == [
        (0, '{"item_id":1,"name":"a"}'),
        (1, '{"item_id":1,"name":"b","colour":"red"}'),
    ]
    assert _table(spark, bronze.dead_letter_path()).count() == 0


def test_a_batch_replayed_after_a_crash_is_not_written_twice(spark, clean_lakehouse) -> None:
    """A crash after the Delta commits but before the checkpoint's commit: on restart,
    Spark replays the batch with the same id, and Delta's txnAppId/txnVersion skip it."""
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', '{"id":2}', "[3]"])
    ingest.run(_options(landing), topics=[TOPIC])
    before = bronze_records(spark, TOPIC.table)
    commits = ingest.checkpoint_dir(TOPIC) / "commits"
    last = max(commits.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    # The checkpoint commit that "did not happen" (and its checksum file).
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)

    ingest.run(_options(landing), topics=[TOPIC])
    assert (commits / last.name).exists(), "the batch was not replayed"
    assert bronze_records(spark, TOPIC.table) == before
    assert _commits(spark) == 1
    assert _table(spark, bronze.dead_letter_path()).count() == 1
    assert _batches(spark) == [(0, False, 3, 2, 1, 0, "files")]


def test_records_the_fast_path_declines_land_once_across_a_crash_between_writes(
    spark, clean_lakehouse, monkeypatch
) -> None:
    """A CDC batch is written in two passes: the records the one-parse fast path takes,
    then (a write of their own) the ones it declined, classified by the exact rules. A
    crash between the two: the replay skips the first write and makes the second."""
    landing = clean_lakehouse["landing"]
    lines = [
        _change("c", 1, 10, 1000, name="a"),
        # A string value that starts with `{`: only the exact rules can tell it from a
        # row image given as a string; it is a good record.
        _change("u", 1, 11, 2000, name="{not an image}"),
        "{not json",
        "null",
        _change("c", 2, 12, 3000, name="c"),
    ]
    _land(landing, "000001.json", lines, CDC)
    append = ingest._append

    def crash_after_the_first_bronze_write(rows, path, app_id, version, partitioned):  # type: ignore[no-untyped-def]
        append(rows, path, app_id, version, partitioned)
        if path == str(CDC.bronze_path):
            raise RuntimeError("crash between the two Bronze writes")

    monkeypatch.setattr(ingest, "_append", crash_after_the_first_bronze_write)
    with pytest.raises(ingest.IngestError, match="crash between the two Bronze writes"):
        ingest.run(_options(landing), topics=[CDC])
    assert [r[1] for r in bronze_records(spark, CDC.table)] == [1, 5]
    monkeypatch.setattr(ingest, "_append", append)

    ingest.run(_options(landing), topics=[CDC])
    assert bronze_records(spark, CDC.table) == [
        ("000001.json", 1, lines[0]),
        ("000001.json", 2, lines[1]),
        ("000001.json", 5, lines[4]),
    ]
    assert _commits(spark, CDC) == 2
    dead = _table(spark, bronze.dead_letter_path()).collect()
    assert [(r._line_number, r._error_reason) for r in dead] == [(3, "malformed_json")]
    assert _batches(spark, CDC) == [(0, False, 5, 3, 1, 1, "files")]
    # A rerun writes nothing.
    ingest.run(_options(landing), topics=[CDC])
    assert _commits(spark, CDC) == 2 and len(bronze_records(spark, CDC.table)) == 3


def test_a_replayed_batch_is_classified_as_it_was_the_first_time(spark, clean_lakehouse) -> None:
    """The size limit changes between a crash and the restart: the replayed batch keeps
    the first classification, so no record lands in both tables or in neither."""
    landing = clean_lakehouse["landing"]
    big = '{"id":1,"pad":"' + "x" * 100 + '"}'
    _land(landing, "000001.json", [big, '{"id":2}'])
    ingest.run(_options(landing, max_record_bytes=1000), topics=[TOPIC])
    commits = ingest.checkpoint_dir(TOPIC) / "commits"
    (commits / "0").unlink()
    (commits / ".0.crc").unlink(missing_ok=True)
    ingest.run(_options(landing, max_record_bytes=50), topics=[TOPIC])
    assert (commits / "0").exists(), "the batch was not replayed"
    assert [r[2] for r in bronze_records(spark, TOPIC.table)] == [big, '{"id":2}']
    assert _table(spark, bronze.dead_letter_path()).count() == 0
    assert _batches(spark) == [(0, False, 2, 2, 0, 0, "files")]
    # A new batch uses the new limit.
    _land(landing, "000002.json", [big])
    ingest.run(_options(landing, max_record_bytes=50), topics=[TOPIC])
    dead = _table(spark, bronze.dead_letter_path()).collect()
    assert [(r._raw, r._error_reason, r._batch_id) for r in dead] == [(big, "too_large", 1)]


def test_a_replayed_batch_keeps_the_topics_kind_and_key_of_its_first_run(
    spark, clean_lakehouse
) -> None:
    """The registry declares the topic CDC between a crash and the restart: the replayed
    batch is classified as the events it was (Bronze rows, no dead letters), not as
    envelopes it lacks (dead letters of records already in Bronze); the next batch is
    classified by the new registry."""
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', '{"id":2}'])
    ingest.run(_options(landing), topics=[TOPIC])
    commits = ingest.checkpoint_dir(TOPIC) / "commits"
    (commits / "0").unlink()
    (commits / ".0.crc").unlink(missing_ok=True)
    as_cdc = replace(TOPIC, kind="cdc", key=("item_id",))
    ingest.run(_options(landing), topics=[as_cdc])
    assert (commits / "0").exists(), "the batch was not replayed"
    assert [r[2] for r in bronze_records(spark, TOPIC.table)] == ['{"id":1}', '{"id":2}']
    assert _table(spark, bronze.dead_letter_path()).count() == 0
    assert _batches(spark) == [(0, False, 2, 2, 0, 0, "files")]
    _land(landing, "000002.json", ['{"id":3}'])
    ingest.run(_options(landing), topics=[as_cdc])
    dead = _table(spark, bronze.dead_letter_path()).collect()
    assert [(r._raw, r._error_reason, r._batch_id) for r in dead] == [('{"id":3}', "unknown_op", 1)]


# A DMS topic (test_dms's registry entry) of two columns; {columns}: its list, in
# file order.
DMS_REGISTRY = ENTRY + "      columns: [{columns}]\n"


def _dms_topic(directory: Path, fmt: str, columns: str) -> Topic:
    registry = directory / f"topics-{fmt}-{len(list(directory.glob('topics-*')))}.yml"
    registry.write_text(DMS_REGISTRY.format(fmt=fmt, columns=columns))
    (topic,) = load_topics(registry)
    return topic


def _uncommit_first_batch(topic: Topic) -> Path:
    """The crash between the batch's writes and its commit: the commit file goes."""
    commits = ingest.checkpoint_dir(topic) / "commits"
    (commits / "0").unlink()
    (commits / ".0.crc").unlink(missing_ok=True)
    return commits


def test_a_replayed_dms_csv_batch_keeps_the_layout_of_its_first_run(
    spark, clean_lakehouse, tmp_path
) -> None:
    """The registry swaps the order of a DMS CSV topic's columns between a crash and
    the restart: the replayed batch is read with the layout of its first run (Bronze
    rows, no dead letters of records already in Bronze); the next file with the new."""
    landing = clean_lakehouse["landing"]
    first = _dms_topic(tmp_path, "dms-csv", "id bigint, name string")
    _land(landing, "LOAD00000001.csv", ["1,a", "2,b"], topic=first)
    ingest.run(_options(landing), topics=[first])
    commits = _uncommit_first_batch(first)
    swapped = _dms_topic(tmp_path, "dms-csv", "name string, id bigint")
    ingest.run(_options(landing), topics=[swapped])
    assert (commits / "0").exists(), "the batch was not replayed"
    assert _table(spark, bronze.dead_letter_path()).count() == 0
    _land(landing, "LOAD00000002.csv", ["c,3", "4,d"], topic=swapped)
    ingest.run(_options(landing), topics=[swapped])
    bronze_rows = _table(spark, str(first.bronze_path)).orderBy("_source_file", "_line_number")
    assert [(r._line_number, r._raw, r.record_key) for r in bronze_rows.collect()] == [
        (1, "1,a", '{"id":"1"}'), (2, "2,b", '{"id":"2"}'), (1, "c,3", '{"id":"3"}'),
    ]  # fmt: skip
    dead = _table(spark, bronze.dead_letter_path()).collect()
    assert [(r._raw, r._error_reason, r._batch_id) for r in dead] == [("4,d", "invalid_value", 1)]
    assert _batches(spark, first) == [
        (0, False, 2, 2, 0, 0, "files"), (1, False, 2, 1, 1, 0, "files"),
    ]  # fmt: skip


def test_a_replayed_dms_parquet_batch_with_another_layout_stops_until_it_is_put_back(
    spark, clean_lakehouse, tmp_path
) -> None:
    """A Parquet topic's files are read with the registry's layout (the query's
    schema): a replay under another layout stops with what to do, writing nothing;
    with the layout put back, the batch completes once."""
    landing = clean_lakehouse["landing"]
    first = _dms_topic(tmp_path, "dms-parquet", "id bigint, name string")
    directory = landing / first.topic
    directory.mkdir(parents=True)
    scratch = tmp_path / "LOAD00000001.parquet"
    spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, name string").coalesce(1) \
        .write.parquet(str(scratch))  # fmt: skip
    (part,) = scratch.glob("part-*.parquet")
    part.rename(directory / "LOAD00000001.parquet")
    ingest.run(_options(landing), topics=[first])
    bronze_path = str(first.bronze_path)
    versions = spark.sql(f"describe history delta.`{bronze_path}`").count()
    commits = _uncommit_first_batch(first)
    wider = _dms_topic(tmp_path, "dms-parquet", "id bigint, name string, note string")
    with pytest.raises(ingest.IngestError, match=r"batch 0 is being replayed .* put the layout"):
        ingest.run(_options(landing), topics=[wider])
    assert not (commits / "0").exists()
    assert spark.sql(f"describe history delta.`{bronze_path}`").count() == versions
    assert not Path(bronze.dead_letter_path()).exists() or (
        _table(spark, bronze.dead_letter_path()).count() == 0
    )
    ingest.run(_options(landing), topics=[first])
    assert (commits / "0").exists()
    rows = _table(spark, bronze_path).orderBy("_line_number").collect()
    assert [(r._line_number, r.record_key) for r in rows] == [(1, '{"id":"1"}'), (2, '{"id":"2"}')]
    assert _batches(spark, first) == [(0, False, 2, 2, 0, 0, "files")]


def test_a_batch_after_the_source_logged_ahead_numbers_every_split_of_its_files(
    spark, clean_lakehouse, monkeypatch
) -> None:
    """A crash after the file source logged its next file but before the query logged
    that batch's offsets: the next batch takes that file and a new one (the two logs'
    numbers part). Each file is larger than a split here (tiny splits), so its lines
    are numbered from the count of the splits before each one: the batch's files must
    be the ones it reads, both of them."""
    from python_jobs import spark as spark_module

    for key in spark_module.INGESTION_SETTINGS:
        monkeypatch.setitem(spark_module.INGESTION_SETTINGS, key, "24")
    landing = clean_lakehouse["landing"]
    rows = {n: [f'{{"id":{n}{i:02d}}}' for i in range(1, 8)] for n in (1, 2, 3)}
    _land(landing, "000001.json", rows[1])
    ingest.run(_options(landing, max_files=1), topics=[TOPIC])
    _land(landing, "000002.json", rows[2])
    # What the file source writes before the query's offsets: its entry 1, the new file.
    second = landing / TOPIC.topic / "000002.json"
    entry = {"path": second.as_uri(), "timestamp": int(second.stat().st_mtime * 1000), "batchId": 1}
    source_log = ingest.checkpoint_dir(TOPIC) / "sources" / "0"
    (source_log / "1").write_text("v1\n" + json.dumps(entry))
    _land(landing, "000003.json", rows[3])

    ingest.run(_options(landing, max_files=1), topics=[TOPIC])
    assert ingest.batch_files(ingest.checkpoint_dir(TOPIC), 1) == [
        entry["path"],
        (landing / TOPIC.topic / "000003.json").as_uri(),
    ]
    assert bronze_records(spark, TOPIC.table) == [
        (f"00000{n}.json", i, line) for n in (1, 2, 3) for i, line in enumerate(rows[n], 1)
    ]
    assert _batches(spark) == [(0, False, 7, 7, 0, 0, "files"), (1, False, 14, 14, 0, 0, "files")]


def test_a_file_larger_than_a_split_is_numbered_whatever_its_name_holds(
    spark, clean_lakehouse, monkeypatch
) -> None:
    """The file source logs a file's path as a URI (a space is `%20`); its split counts
    read the file itself, not a glob of its name (`[1]` would match only `1`)."""
    from python_jobs import spark as spark_module

    for key in spark_module.INGESTION_SETTINGS:
        monkeypatch.setitem(spark_module.INGESTION_SETTINGS, key, "24")
    landing = clean_lakehouse["landing"]
    lines = [f'{{"id":{i}}}' for i in range(101, 109)]
    _land(landing, "day one [1].json", lines)
    ingest.run(_options(landing), topics=[TOPIC])
    assert bronze_records(spark, TOPIC.table) == [
        ("day one [1].json", i, line) for i, line in enumerate(lines, 1)
    ]
    assert _batches(spark) == [(0, False, 8, 8, 0, 0, "files")]


def test_a_second_ingestion_on_the_same_checkpoint_is_refused(spark, clean_lakehouse) -> None:
    """Another process ingesting the topic holds its checkpoint: this run stops before
    reading anything, naming it; once the other has ended, it ingests."""
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}'])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_CHECKPOINT, TOPIC.topic, TOPIC.table],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert holder.stdout.readline() == "holding\n"
        with pytest.raises(
            ingest.IngestError, match=f"another ingestion process \\(pid {holder.pid}\\)"
        ):
            ingest.run(_options(landing), topics=[TOPIC])
    finally:
        holder.kill()
        holder.wait()
    assert not (clean_lakehouse["bronze"] / TOPIC.table).exists()
    ingest.run(_options(landing), topics=[TOPIC])
    assert bronze_records(spark, TOPIC.table) == [("000001.json", 1, '{"id":1}')]


# A process that holds a topic's checkpoint lock until killed.
HOLD_CHECKPOINT = """
import sys, time
from python_jobs import ingest
from python_jobs.topics import Topic
topic = Topic(topic=sys.argv[1], kind="events", key=("id",), table=sys.argv[2])
with ingest.checkpoint_locks([topic], "files"):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_checkpoint_older_than_the_tables_is_refused(spark, clean_lakehouse, tmp_path) -> None:
    landing = clean_lakehouse["landing"]
    checkpoint = ingest.checkpoint_dir(TOPIC)
    _land(landing, "000001.json", ['{"id":1}'])
    ingest.run(_options(landing), topics=[TOPIC])
    shutil.copytree(checkpoint, tmp_path / "backup")
    for n in (2, 3):
        _land(landing, f"00000{n}.json", [f'{{"id":{n}}}'])
        ingest.run(_options(landing), topics=[TOPIC])
    shutil.rmtree(checkpoint)
    shutil.copytree(tmp_path / "backup", checkpoint)
    _land(landing, "000004.json", ['{"id":4}'])
    with pytest.raises(ingest.IngestError, match="ends at batch 0 but batch 2 was already"):
        ingest.run(_options(landing), topics=[TOPIC])
    assert len(bronze_records(spark, TOPIC.table)) == 3


def test_a_checkpoint_one_batch_older_than_the_tables_is_refused(
    spark, clean_lakehouse, tmp_path
) -> None:
    """A backup of the checkpoint one batch behind the tables looks like a crash before
    the last batch's commit, but it has no plan of that batch: Spark would plan it anew
    with the files that came since, and Delta would skip its writes as done."""
    landing = clean_lakehouse["landing"]
    checkpoint = ingest.checkpoint_dir(TOPIC)
    _land(landing, "000001.json", ['{"id":1}'])
    ingest.run(_options(landing), topics=[TOPIC])
    shutil.copytree(checkpoint, tmp_path / "backup")
    _land(landing, "000002.json", ['{"id":2}'])
    ingest.run(_options(landing), topics=[TOPIC])
    shutil.rmtree(checkpoint)
    shutil.copytree(tmp_path / "backup", checkpoint)
    _land(landing, "000003.json", ['{"id":3}'])
    with pytest.raises(ingest.IngestError, match="ends at batch 0 but batch 1 was already"):
        ingest.run(_options(landing, max_invalid_ratio=1.0), topics=[TOPIC])
    assert [raw for _, _, raw in bronze_records(spark, TOPIC.table)] == ['{"id":1}', '{"id":2}']


def test_a_lost_checkpoint_stops_ingestion_instead_of_duplicating(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}'])
    ingest.run(_options(landing), topics=[TOPIC])
    shutil.rmtree(ingest.checkpoint_dir(TOPIC))
    with pytest.raises(ingest.IngestError, match="checkpoint .* is missing"):
        ingest.run(_options(landing), topics=[TOPIC])
    assert bronze_records(spark, TOPIC.table) == [("000001.json", 1, '{"id":1}')]


def test_a_lost_checkpoint_is_noticed_from_the_dead_letters_too(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ["{broken"])  # nothing reaches Bronze
    ingest.run(_options(landing), topics=[TOPIC])
    shutil.rmtree(ingest.checkpoint_dir(TOPIC))
    with pytest.raises(ingest.IngestError, match="checkpoint .* is missing"):
        ingest.run(_options(landing), topics=[TOPIC])
    assert _table(spark, bronze.dead_letter_path()).count() == 1


def test_command_line_validation() -> None:
    for bad in (
        ["--trigger-interval", "0"],
        ["--once", "--trigger-interval", "5"],
        ["--max-invalid-ratio", "1.5"],
        ["--source", "kafka"],
        ["--source", "ftp"],
        ["--accept-data-loss"],  # files: nothing to accept
        ["--reingest-recreated-topics"],  # files: no topic ids
        [
            "--source",
            "kafka",
            "--bootstrap-servers",
            "h:9",
            "--reingest-recreated-topics",
            "--trigger-interval",
            "5",
        ],
        # A continuous job would skip every later loss too.
        [
            "--source",
            "kafka",
            "--bootstrap-servers",
            "h:9",
            "--accept-data-loss",
            "--trigger-interval",
            "5",
        ],
    ):
        with pytest.raises(SystemExit):
            ingest.parse_args(bad)
    options = ingest.parse_args(["--trigger-interval", "2.5", "--landing-dir", "/x"])
    assert (options.once, options.trigger_interval, options.landing) == (False, 2.5, Path("/x"))
    options = ingest.parse_args(["--source", "kafka", "--bootstrap-servers", "127.0.0.1:9"])
    assert (options.source, options.bootstrap_servers, options.once) == (
        "kafka",
        "127.0.0.1:9",
        True,
    )
    assert not options.accept_data_loss
    kafka = ["--source", "kafka", "--bootstrap-servers", "127.0.0.1:9", "--accept-data-loss"]
    assert ingest.parse_args(kafka).accept_data_loss
    with pytest.raises(ValueError, match="for one run"):
        ingest.IngestOptions(
            source="kafka", bootstrap_servers="h:9", once=False, accept_data_loss=True
        )
    kafka = ["--source", "kafka", "--bootstrap-servers", "127.0.0.1:9"]
    assert ingest.parse_args([*kafka, "--reingest-recreated-topics"]).reingest_recreated_topics
    assert not ingest.parse_args(kafka).reingest_recreated_topics
    with pytest.raises(ValueError, match="for one run"):
        ingest.IngestOptions(
            source="kafka", bootstrap_servers="h:9", once=False, reingest_recreated_topics=True
        )


def test_kafka_brokers_that_do_not_answer_stop_ingestion_before_it_starts(
    spark, clean_lakehouse, monkeypatch
) -> None:
    """The topics' ids are checked before any query starts: brokers that do not answer
    (nothing listens on the port) fail the run in one line naming them, before it has
    made a Bronze table, a checkpoint or a query."""
    monkeypatch.setattr(kafka_identity, "TIMEOUT_S", 2.0)
    bootstrap = f"127.0.0.1:{free_port()}"
    options = ingest.IngestOptions(source="kafka", bootstrap_servers=bootstrap)
    with pytest.raises(ingest.IngestError) as failed:
        ingest.run(options, topics=[TOPIC])
    assert not TOPIC.bronze_path.exists()
    assert not (ingest.checkpoint_dir(TOPIC, "kafka") / "offsets").exists()
    assert not spark.streams.active
    assert str(failed.value) == (
        f"{TOPIC.topic}: the brokers at {bootstrap} did not answer within 2s (to check the "
        "topic's id against the checkpoint's); is Kafka up, and are the bootstrap servers "
        "right?"
    )
