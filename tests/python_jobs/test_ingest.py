"""Ingestion into Bronze: incremental, idempotent on replay, safe without a checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from python_jobs import ingest
from python_jobs.topics import Topic
from tests.helpers import bronze_records

TOPIC = Topic(topic="test.events", kind="events", key=("id",), table="test_events")


def _land(landing: Path, name: str, lines: list[str]) -> None:
    """Write a landing file atomically (elsewhere, then renamed in)."""
    directory = landing / TOPIC.topic
    directory.mkdir(parents=True, exist_ok=True)
    tmp = landing / f".{name}.tmp"
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.rename(directory / name)


def _commits(spark) -> int:
    history = spark.sql(f"describe history delta.`{TOPIC.bronze_path}`").collect()
    return sum(1 for h in history if h["operation"] == "WRITE")


def test_ingestion_is_incremental_and_a_rerun_writes_nothing(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', "null", '{"id":2}'])
    ingest.run(landing, once=True, topics=[TOPIC])
    _land(landing, "000002.json", ['{"id":3}'])
    ingest.run(landing, once=True, topics=[TOPIC])
    ingest.run(landing, once=True, topics=[TOPIC])  # nothing new: no commit
    assert bronze_records(spark, TOPIC.table) == [
        ("000001.json", 1, '{"id":1}'),
        ("000001.json", 3, '{"id":2}'),
        ("000002.json", 1, '{"id":3}'),
    ]
    assert _commits(spark) == 2


def test_a_batch_replayed_after_a_crash_is_not_written_twice(spark, clean_lakehouse) -> None:
    """A crash after the Delta commit but before the checkpoint's commit: on restart,
    Spark replays the batch with the same id, and Delta's txnAppId/txnVersion skip it."""
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}', '{"id":2}'])
    ingest.run(landing, once=True, topics=[TOPIC])
    before = bronze_records(spark, TOPIC.table)
    commits = ingest.checkpoint_dir(TOPIC) / "commits"
    last = max(commits.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    # The checkpoint commit that "did not happen" (and its checksum file).
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)

    ingest.run(landing, once=True, topics=[TOPIC])
    assert (commits / last.name).exists(), "the batch was not replayed"
    assert bronze_records(spark, TOPIC.table) == before
    assert _commits(spark) == 1


def test_a_lost_checkpoint_stops_ingestion_instead_of_duplicating(spark, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "000001.json", ['{"id":1}'])
    ingest.run(landing, once=True, topics=[TOPIC])
    shutil.rmtree(ingest.checkpoint_dir(TOPIC))
    with pytest.raises(ingest.IngestError, match="checkpoint .* is missing"):
        ingest.run(landing, once=True, topics=[TOPIC])
    assert bronze_records(spark, TOPIC.table) == [("000001.json", 1, '{"id":1}')]


def test_command_line_validation() -> None:
    with pytest.raises(SystemExit):
        ingest.parse_args(["--trigger-interval", "0"])
    with pytest.raises(SystemExit):
        ingest.parse_args(["--once", "--trigger-interval", "5"])
    args = ingest.parse_args(["--trigger-interval", "2.5", "--landing-dir", "/x"])
    assert (args.trigger_interval, args.landing_dir) == (2.5, Path("/x"))
