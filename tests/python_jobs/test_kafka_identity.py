"""The topic id recorded beside a Kafka checkpoint (python_jobs/kafka_identity.py), on
directories laid out as a checkpoint and a Bronze table are; the ids are given, not
asked of a broker (tests/e2e/test_kafka_ingest.py does that with a real one)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

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


def _reingestion_dying_after_moving(what: Path, checkpoint: Path, bronze: Path, monkeypatch):
    """Run the re-ingestion (with the flag), killed just after it renamed `what`."""

    def die_after_moving(self: Path, target: Path) -> Path:
        real_rename(self, target)
        if self == what:
            raise OSError("the process died")
        return target

    real_rename = Path.rename
    monkeypatch.setattr(Path, "rename", die_after_moving)
    with pytest.raises(OSError, match="died"):
        _check(checkpoint, bronze, "B", reingest=True)
    monkeypatch.setattr(Path, "rename", real_rename)


@pytest.mark.parametrize("moved", ["bronze", "checkpoint"])
def test_a_reingestion_that_died_midway_completes_and_names_where_both_went(
    tmp_path, monkeypatch, moved
) -> None:
    """Died after Bronze moved, before the old checkpoint did: the next run with the flag
    moves the checkpoint, not Bronze again, names where Bronze went, and gives the
    checkpoint the same time. Died after the old checkpoint moved, before the new one
    took its place: the next run, with the flag or without, puts it there, reads from
    scratch and names both."""
    checkpoint, bronze = _checkpoint(tmp_path), _bronze(tmp_path)
    kafka_identity.record_id(checkpoint, TOPIC, "A")
    what = bronze if moved == "bronze" else checkpoint
    _reingestion_dying_after_moving(what, checkpoint, bronze, monkeypatch)
    [bronze_aside] = [p for p in bronze.parent.iterdir()]
    assert bronze_aside.name.startswith("users.recreated-")

    old_checkpoint, old_bronze = _check(checkpoint, bronze, "B", reingest=moved == "bronze")
    assert old_bronze == bronze_aside
    assert old_checkpoint.name == bronze_aside.name
    assert [p.name for p in bronze.parent.iterdir()] == [bronze_aside.name]
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == ["users", old_checkpoint.name]
    assert kafka_identity.recorded_id(old_checkpoint) == "A"
    assert kafka_identity.recorded_id(checkpoint) == "B"
    assert kafka_identity.reingests(checkpoint)


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


class _Brokers:
    """An admin client answering `describe_topics` with `answer` for every topic: an id,
    or a Kafka error (the topic unknown, the request refused)."""

    def __init__(self, answer: str | int) -> None:
        self.answer = answer
        self.timeouts: list[float] = []

    def describe_topics(self, topics, request_timeout: float) -> dict[str, Future]:
        self.timeouts.append(request_timeout)
        future: Future = Future()
        if isinstance(self.answer, int):
            future.set_exception(KafkaException(KafkaError(self.answer)))
        else:
            future.set_result(SimpleNamespace(topic_id=self.answer))
        return {name: future for name in topics.topic_names}


def _batch_check(checkpoint: Path, answer: str | int) -> kafka_identity.BatchCheck:
    check = kafka_identity.BatchCheck(TOPIC, checkpoint, "127.0.0.1:9")
    check._admin = _Brokers(answer)
    return check


def test_after_a_failed_query_a_recreated_or_deleted_topic_is_named(tmp_path) -> None:
    """Spark's error after a recreation says lost offsets or an unknown topic: what the
    brokers say of the topic's id then replaces it, naming the cause."""
    checkpoint = _checkpoint(tmp_path)
    kafka_identity.record_id(checkpoint, TOPIC, "A")
    same = _batch_check(checkpoint, "A")
    assert same.explains() is None
    # The brokers may be what failed the query: they get FAILURE_TIMEOUT_S to answer.
    assert same._admin.timeouts == [kafka_identity.FAILURE_TIMEOUT_S]
    assert _batch_check(checkpoint, "B").explains() == kafka_identity.recreated_message(
        TOPIC, checkpoint, "A", "B"
    )
    assert _batch_check(checkpoint, KafkaError.UNKNOWN_TOPIC_OR_PART).explains() == (
        f"{TOPIC}: the topic was deleted on 127.0.0.1:9 while this query read it. "
        f"{kafka_identity.RECOVERY}"
    )


def test_brokers_that_refuse_to_describe_the_topic_are_no_unanswered_check(tmp_path) -> None:
    """A refused request (no Describe permission) is an error of its own, which stops a
    batch; only brokers that do not answer let a batch go on unchecked."""
    checkpoint = _checkpoint(tmp_path)
    kafka_identity.record_id(checkpoint, TOPIC, "A")
    refused = _batch_check(checkpoint, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(kafka_identity.TopicIdentityError) as failed:
        refused.problem()
    assert not isinstance(failed.value, kafka_identity.BrokersUnreachable)
    assert "cannot describe the topic" in str(failed.value)
    assert refused.explains() is None  # after a failed query: Spark's own error stands
    with pytest.raises(kafka_identity.BrokersUnreachable):
        _batch_check(checkpoint, KafkaError._TRANSPORT).problem()
