"""Which Kafka topic a streaming checkpoint read: its topic id, checked at every start.

A checkpoint of the Kafka source holds offsets and nothing else. A topic deleted and
created again under the same name (a connector reset, a cluster rebuilt) starts its
offsets at 0 again: if the new topic already holds more records than the checkpoint
read from the old one, Spark skips the new topic's first records without a word; if
fewer, it reports lost offsets, as if retention had deleted them. Kafka gives every
topic an id (a UUID) at creation, so the ingestion records the id beside the checkpoint
(`<checkpoint>/lakehouse/topic.json`, moved with it) and compares it with the broker's
at every start and before every batch's writes; a different id stops the query with
what to do. Bronze cannot hold the new topic's records beside the old topic's (their
positions repeat), so `--reingest-recreated-topics` sets the old topic's Bronze table
and checkpoint aside and reads the new topic from its first offset.
"""

from __future__ import annotations

import json
import shutil
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

RECORD = Path("lakehouse") / "topic.json"
TIMEOUT_S = 30.0
FAILURE_TIMEOUT_S = 10.0


class TopicIdentityError(RuntimeError):
    """The checkpoint's topic is not the broker's topic of that name (or is gone)."""


class BrokersUnreachable(TopicIdentityError):
    """The brokers did not answer in time: the id could not be checked."""


def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def topic_ids(
    bootstrap: str, names: list[str], admin=None, timeout: float | None = None
) -> dict[str, str | None]:
    """Each topic's id on the brokers (base64, as Kafka's tools print it); None for a
    topic that does not exist. Brokers that cannot answer in `timeout` (default
    TIMEOUT_S) raise BrokersUnreachable; a refused request, TopicIdentityError."""
    from confluent_kafka import TopicCollection

    admin = admin or admin_client(bootstrap)
    timeout = TIMEOUT_S if timeout is None else timeout
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
    return {name: _topic_id(name, future, bootstrap, timeout) for name, future in futures.items()}


def _topic_id(name: str, future, bootstrap: str, timeout: float) -> str | None:
    from confluent_kafka import KafkaError, KafkaException

    unreachable = BrokersUnreachable(
        f"{name}: the brokers at {bootstrap} did not answer within {timeout:g}s (to check "
        "the topic's id against the checkpoint's); is Kafka up, and are the bootstrap "
        "servers right?"
    )
    try:
        # The request's own timeout first: its error says what happened.
        return str(future.result(timeout=timeout + 10).topic_id)
    except TimeoutError:
        raise unreachable from None
    except KafkaException as error:
        code = error.args[0].code()
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        if code in (
            KafkaError._TIMED_OUT,
            KafkaError._TIMED_OUT_QUEUE,
            KafkaError._TRANSPORT,
            KafkaError._ALL_BROKERS_DOWN,
            KafkaError._RESOLVE,
        ):
            raise unreachable from None
        raise TopicIdentityError(
            f"{name}: the brokers at {bootstrap} cannot describe the topic (to check "
            f"its id against the checkpoint's): {error}"
        ) from None


def recorded_id(checkpoint: Path) -> str | None:
    return _read(checkpoint).get("topic_id")


def _read(checkpoint: Path) -> dict:
    path = checkpoint / RECORD
    return json.loads(path.read_text()) if path.exists() else {}


def _write(checkpoint: Path, record: dict) -> None:
    path = checkpoint / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.rename(path)


def record_id(
    checkpoint: Path, topic: str, topic_id: str, reingest: bool = False, aside: str = ""
) -> None:
    """Write the topic's id beside the checkpoint (atomically). `reingest`: the record
    of a topic re-ingested from scratch, before its new query has started; `aside`: the
    name the old checkpoint is moved to (a record prepared as `<checkpoint>.new`)."""
    recorded_at = datetime.now(UTC).isoformat(timespec="seconds")
    record = {"topic": topic, "topic_id": topic_id, "recorded_at": recorded_at}
    _write(checkpoint, {**record, "reingest": reingest, "aside": aside})


def reingests(checkpoint: Path) -> bool:
    """The topic is being re-ingested from scratch and its new query has not started
    (no `metadata`): the dead letters' records of the old topic are expected."""
    if (checkpoint / "metadata").exists():
        return False
    return bool(_read(checkpoint).get("reingest"))


def _aside(path: Path, stamp: str) -> Path:
    target = path.with_name(f"{path.name}.recreated-{stamp}")
    number = 1
    while target.exists():
        number += 1
        target = path.with_name(f"{path.name}.recreated-{stamp}-{number}")
    return target


def _finish_move(checkpoint: Path, bronze: Path) -> tuple[Path, Path | None] | None:
    """A re-ingestion that died with a new checkpoint prepared (`<checkpoint>.new`):
    after moving the old one aside, put the new one in its place (returns where the old
    checkpoint and Bronze table went, as :func:`reingest`); before (the old one still
    there), or if the old one went by other hands (not to the name prepared), drop it
    (a run with the flag prepares it again)."""
    new = checkpoint.with_name(checkpoint.name + ".new")
    if not new.exists():
        return None
    aside = _read(new).get("aside")
    if not checkpoint.exists() and aside and checkpoint.with_name(aside).exists():
        new.rename(checkpoint)
        moved = _read(checkpoint.with_name(aside)).get("bronze_aside")
        return checkpoint.with_name(aside), bronze.with_name(moved) if moved else None
    shutil.rmtree(new)
    return None


def reingest(topic: str, checkpoint: Path, bronze: Path, topic_id: str) -> tuple[Path, Path | None]:
    """Set the old topic's checkpoint and Bronze table aside (both kept, renamed
    `<name>.recreated-<UTC time>`, one time), and put a new checkpoint in place whose
    record says the topic is read from scratch. Each step can be repeated after a
    crash: the Bronze table's new name is written in the old checkpoint's record before
    it moves, so a run after a crash that moved it names it, and gives the checkpoint
    the same time."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    record = _read(checkpoint)
    bronze_aside = None
    if bronze.exists():
        bronze_aside = _aside(bronze, stamp)
        _write(checkpoint, {**record, "bronze_aside": bronze_aside.name})
        bronze.rename(bronze_aside)
    elif record.get("bronze_aside") and bronze.with_name(record["bronze_aside"]).exists():
        bronze_aside = bronze.with_name(record["bronze_aside"])
        stamp = bronze_aside.name.removeprefix(f"{bronze.name}.recreated-")
    new = checkpoint.with_name(checkpoint.name + ".new")
    if new.exists():
        shutil.rmtree(new)
    checkpoint_aside = _aside(checkpoint, stamp)
    record_id(new, topic, topic_id, reingest=True, aside=checkpoint_aside.name)
    checkpoint.rename(checkpoint_aside)
    new.rename(checkpoint)
    return checkpoint_aside, bronze_aside


def has_read(checkpoint: Path) -> bool:
    """The checkpoint's query planned at least one batch (it holds offsets)."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(f.name.isdigit() for f in offsets.iterdir())


RECOVERY = (
    "Nothing was written. Bronze cannot hold the new topic's records beside the old "
    "topic's (their positions repeat): once the topic exists, ingest once with "
    "--reingest-recreated-topics, which sets the old topic's Bronze table and checkpoint "
    "aside and reads the new topic from its first offset, then rebuild the models that "
    "read it with --full-refresh."
)


def recreated_message(topic: str, checkpoint: Path, old: str, new: str) -> str:
    return (
        f"{topic}: the topic was deleted and created again since the checkpoint "
        f"{checkpoint} read it (topic id {old} then, {new} now). Its offsets start again "
        "at 0: resuming would skip the new topic's first records, or fail as if retention "
        f"had deleted them. {RECOVERY}"
    )


def check_at_start(
    topic: str,
    checkpoint: Path,
    topic_id: str | None,
    bootstrap: str,
    bronze: Path,
    reingest_recreated: bool = False,
) -> tuple[Path, Path | None] | None:
    """Compare the brokers' id of `topic` with the checkpoint's record before its query
    starts; a different id (or the topic gone) fails, or with `reingest_recreated` the
    topic is re-ingested from scratch (:func:`reingest`; returns where the old checkpoint
    and Bronze table went, also when this start completes a re-ingestion that died
    between the checkpoints). Records the id of a checkpoint that has none: a new
    query, or one made before ids were recorded (taken unchecked)."""
    finished = _finish_move(checkpoint, bronze)
    if finished is not None:
        return finished
    read = has_read(checkpoint)
    if topic_id is None:
        if read:
            raise TopicIdentityError(
                f"{topic}: the topic does not exist on {bootstrap}, but the checkpoint "
                f"{checkpoint} has read it: it was deleted. {RECOVERY}"
            )
        # A new query on a topic not created yet: its first batch records the id.
        return
    old = recorded_id(checkpoint)
    if old is None or not read:
        if old != topic_id:
            record_id(checkpoint, topic, topic_id, reingest=reingests(checkpoint))
        return None
    if old == topic_id:
        return None
    if not reingest_recreated:
        raise TopicIdentityError(recreated_message(topic, checkpoint, old, topic_id))
    return reingest(topic, checkpoint, bronze, topic_id)


class BatchCheck:
    """The check before a batch's writes: the topic still has the id the query started
    with (the first batch records it when the topic did not exist at the start)."""

    def __init__(self, topic: str, checkpoint: Path, bootstrap: str) -> None:
        self.topic = topic
        self.checkpoint = checkpoint
        self.bootstrap = bootstrap
        self._admin = None

    def current(self, timeout: float | None = None) -> str | None:
        if self._admin is None:
            self._admin = admin_client(self.bootstrap)
        return topic_ids(self.bootstrap, [self.topic], self._admin, timeout)[self.topic]

    def problem(self, timeout: float | None = None) -> str | None:
        """What is wrong with the topic now, or None (recording a first id)."""
        old, new = recorded_id(self.checkpoint), self.current(timeout)
        if new is None and old is None:
            return (
                f"{self.topic}: the topic does not exist on {self.bootstrap} (yet): nothing "
                "to read. Create it (start its producer or connector), or leave it out of "
                "this run's topics."
            )
        if new is None:
            return (
                f"{self.topic}: the topic was deleted on {self.bootstrap} while this query "
                f"read it. {RECOVERY}"
            )
        if old is None:
            record_id(self.checkpoint, self.topic, new)
            return None
        if old != new:
            return recreated_message(self.topic, self.checkpoint, old, new)
        return None

    def explains(self) -> str | None:
        """After the query failed: the topic deleted, or created again, since the
        checkpoint recorded its id (the cause behind Spark's lost offsets or unknown
        topic), or None. The brokers' request gets FAILURE_TIMEOUT_S, not TIMEOUT_S:
        they may be what failed."""
        if recorded_id(self.checkpoint) is None:
            return None
        with suppress(TopicIdentityError):
            return self.problem(FAILURE_TIMEOUT_S)
        return None
