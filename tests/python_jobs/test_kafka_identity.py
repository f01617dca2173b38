"""The topic id recorded beside a Kafka checkpoint (python_jobs/kafka_identity.py), on
directories laid out as a checkpoint and a Bronze table are; the ids are given, not
asked of a broker (tests/e2e/test_kafka_ingest.py does that with a real one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from python_jobs import kafka_identity
from python_jobs.tools.kafka_broker import free_port

TOPIC = "blog.public.users"


def _checkpoint(root: Path, read: bool = True) -> Path:
    checkpoint = root / "checkpoints" / "users"
    (checkpoint / "offsets").mkdir(parents=True)
    if read:
        (checkpoint / "offsets" / "0").write_text("v1\n")
        (checkpoint / "metadata").write_text('{"id":"q"}\n')
    return checkpoint


def _bronze(root: Path) -> Path:
    bronze = root / "bronze" / "users"
    (bronze / "_delta_log").mkdir(parents=True)
    (bronze / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    return bronze


def _check(checkpoint: Path, bronze: Path, topic_id: str | None, reingest: bool = False):
    return kafka_identity.check_at_start(
        TOPIC, checkpoint, topic_id, "127.0.0.1:9", bronze, reingest
    )


def test_a_checkpoint_without_a_record_takes_the_brokers_id_then_holds_to_it(tmp_path) -> None:
    checkpoint, bronze = _checkpoint(tmp_path), _bronze(tmp_path)
    assert _check(checkpoint, bronze, "A") is None
    assert kafka_identity.recorded_id(checkpoint) == "A"
    assert _check(checkpoint, bronze, "A") is None
    with pytest.raises(kafka_identity.TopicIdentityError) as failed:
        _check(checkpoint, bronze, "B")
    assert str(failed.value) == kafka_identity.recreated_message(TOPIC, checkpoint, "A", "B")
    assert kafka_identity.recorded_id(checkpoint) == "A"
    assert sorted(p.name for p in tmp_path.glob("*/*")) == ["users", "users"]


def test_a_topic_gone_fails_once_read_and_is_awaited_before(tmp_path) -> None:
    new = _checkpoint(tmp_path / "new", read=False)
    assert _check(new, tmp_path / "none", None) is None
    assert kafka_identity.recorded_id(new) is None
    read = _checkpoint(tmp_path / "read")
    with pytest.raises(kafka_identity.TopicIdentityError) as failed:
        _check(read, tmp_path / "none", None)
    assert str(failed.value) == (
        f"{TOPIC}: the topic does not exist on 127.0.0.1:9, but the checkpoint {read} has "
        f"read it: it was deleted. {kafka_identity.RECOVERY}"
    )


def test_a_reingestion_sets_the_checkpoint_and_bronze_aside(tmp_path) -> None:
    checkpoint, bronze = _checkpoint(tmp_path), _bronze(tmp_path)
    kafka_identity.record_id(checkpoint, TOPIC, "A")
    old_checkpoint, old_bronze = _check(checkpoint, bronze, "B", reingest=True)
    assert old_checkpoint.name.startswith("users.recreated-")
    assert old_bronze is not None and old_bronze.name == old_checkpoint.name
    assert kafka_identity.recorded_id(old_checkpoint) == "A"
    assert (old_checkpoint / "offsets" / "0").exists()
    assert (old_bronze / "_delta_log" / "00000000000000000000.json").exists()
    assert not bronze.exists()
    # The new checkpoint: the record only, read from scratch until its query starts.
    assert sorted(p.name for p in checkpoint.rglob("*")) == ["lakehouse", "topic.json"]
    assert kafka_identity.recorded_id(checkpoint) == "B"
    assert kafka_identity.reingests(checkpoint)
    assert _check(checkpoint, bronze, "B") is None
    assert kafka_identity.reingests(checkpoint)
    (checkpoint / "metadata").write_text('{"id":"q2"}\n')
    assert not kafka_identity.reingests(checkpoint)


def test_a_reingestion_that_died_after_moving_bronze_completes(tmp_path, monkeypatch) -> None:
    """Died after Bronze moved, before the old checkpoint did: the next run (with the
    flag) moves the checkpoint, not Bronze again, names where Bronze went, and gives the
    checkpoint the same time."""
    checkpoint, bronze = _checkpoint(tmp_path), _bronze(tmp_path)
    kafka_identity.record_id(checkpoint, TOPIC, "A")

    def die_after_moving_bronze(self: Path, target: Path) -> Path:
        real_rename(self, target)
        if self == bronze:
            raise OSError("the process died")
        return target

    real_rename = Path.rename
    monkeypatch.setattr(Path, "rename", die_after_moving_bronze)
    with pytest.raises(OSError, match="died"):
        _check(checkpoint, bronze, "B", reingest=True)
    monkeypatch.setattr(Path, "rename", real_rename)
    [moved] = [p for p in bronze.parent.iterdir()]
    assert moved.name.startswith("users.recreated-")

    old_checkpoint, old_bronze = _check(checkpoint, bronze, "B", reingest=True)
    assert old_bronze == moved
    assert old_checkpoint.name == moved.name
    assert [p.name for p in bronze.parent.iterdir()] == [moved.name]
    assert kafka_identity.recorded_id(old_checkpoint) == "A"
    assert kafka_identity.recorded_id(checkpoint) == "B"
    assert kafka_identity.reingests(checkpoint)
    assert not checkpoint.with_name("users.new").exists()


def test_a_reingestion_that_died_between_the_checkpoints_completes(tmp_path) -> None:
    """Died after the old checkpoint moved aside, before the new one took its place: the
    next run, with the flag or without, puts it there and reads from scratch."""
    root = tmp_path / "checkpoints"
    checkpoint, bronze = root / "users", tmp_path / "bronze" / "users"
    aside = "users.recreated-20261207T000000"
    kafka_identity.record_id(root / "users.new", TOPIC, "B", reingest=True, aside=aside)
    kafka_identity.record_id(root / aside, TOPIC, "A")
    assert _check(checkpoint, bronze, "B") is None
    assert kafka_identity.recorded_id(checkpoint) == "B"
    assert kafka_identity.reingests(checkpoint)
    assert sorted(p.name for p in root.iterdir()) == ["users", "users.recreated-20261207T000000"]


def test_a_new_checkpoint_left_prepared_is_dropped_unless_the_old_one_went_aside(
    tmp_path,
) -> None:
    """A re-ingestion that died before moving the old checkpoint, which someone then
    deleted by hand: the prepared one is not put in its place (it would excuse the
    dead letters of a checkpoint lost, not set aside); the run records the id anew."""
    root = tmp_path / "checkpoints"
    checkpoint, bronze = root / "users", tmp_path / "bronze" / "users"
    aside = "users.recreated-20261207T000000"
    kafka_identity.record_id(root / "users.new", TOPIC, "B", reingest=True, aside=aside)
    assert _check(checkpoint, bronze, "B") is None
    assert sorted(p.name for p in root.iterdir()) == ["users"]
    assert kafka_identity.recorded_id(checkpoint) == "B"
    assert not kafka_identity.reingests(checkpoint)


def test_brokers_that_do_not_answer_leave_a_failure_as_spark_gave_it(
    tmp_path, monkeypatch
) -> None:
    """After a query failed, the brokers are asked whether the topic was recreated, for
    FAILURE_TIMEOUT_S at most; brokers that do not answer (likely what failed the query)
    explain nothing, and Spark's own error stands. Before a batch, the same brokers are
    BrokersUnreachable (a warning), not a topic that was recreated."""
    monkeypatch.setattr(kafka_identity, "FAILURE_TIMEOUT_S", 1.0)
    monkeypatch.setattr(kafka_identity, "TIMEOUT_S", 1.0)
    checkpoint = _checkpoint(tmp_path)
    check = kafka_identity.BatchCheck(TOPIC, checkpoint, f"127.0.0.1:{free_port()}")
    assert check.explains() is None  # no record yet: nothing to compare
    kafka_identity.record_id(checkpoint, TOPIC, "A")
    assert check.explains() is None
    with pytest.raises(kafka_identity.BrokersUnreachable, match="did not answer within 1s"):
        check.problem()
