"""The Kafka sink of the simulator: topic lines as Kafka records instead of files.

:class:`KafkaWriter` has the interface of :class:`~python_jobs.simulate.writer.LandingWriter`
and is used in its place by ``--sink kafka``. Each line that the file sink would have
written into a landing file of a topic becomes one record of the Kafka topic of the
same name, in the same delivery order:

- the value is the line's bytes (UTF-8, no newline); a tombstone line (``null`` or empty)
  is a record with a null value;
- the key is the compact JSON of the record's key columns, read from the line:
  ``{"user_id":1}`` from ``after`` (``before`` for a delete), bare or in the
  ``schema``/``payload`` envelope; ``"<visit_id>"`` (a JSON string) for visits. A
  tombstone carries the key of the delete it follows, as Debezium's do. A line with no
  readable key (broken JSON, a visit without ``visit_id``) has a null key;
- the partitioner is Java's murmur2 of the key (librdkafka's ``murmur2``), so each key's
  records stay in order in one partition, and null keys all go to one partition: the
  same seed and options give the same records in the same partitions.

The producer is idempotent with ``acks=all``; :meth:`KafkaWriter.finish` flushes and
fails unless every record was acknowledged. Devices full loads stay files in the
landing zone. Topics are created with :data:`PARTITIONS` partitions when missing.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from python_jobs.simulate.debezium import dumps
from python_jobs.simulate.model import ARTICLES, USERS
from python_jobs.simulate.writer import LandingWriter, SinkError, topic_file_name
from python_jobs.tools.kafka_broker import BrokerError, create_topics

PARTITIONS = 3
VISITS_TOPIC = "blog.visits"
VISITS_KEY = "visit_id"
CDC_KEYS = {USERS.topic: (USERS.key,), ARTICLES.topic: (ARTICLES.key,)}
TOMBSTONES = ("", "null")
METADATA_TIMEOUT_S = 15.0
# A partition of a topic created a moment ago, before its leader is known.
LEADERLESS = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
)
# How long a record may stay unacknowledged (librdkafka retries until then).
DELIVERY_TIMEOUT_MS = 120_000


class KafkaSinkError(SinkError):
    """Kafka is unreachable, holds another run's records, or did not take every record."""


def record_key(topic: str, line: str) -> bytes | None:
    """The record key of a (non-tombstone) line of ``topic``, or None if unreadable."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    if topic == VISITS_TOPIC:
        visit_id = record.get(VISITS_KEY)
        return None if visit_id is None else dumps(visit_id).encode()
    columns = CDC_KEYS.get(topic)
    if columns is None:
        return None
    if "schema" in record and "payload" in record:
        record = record["payload"]
        if not isinstance(record, dict):
            return None
    row = record.get("after")
    if row is None:
        row = record.get("before")
    if not isinstance(row, dict) or any(column not in row for column in columns):
        return None
    return dumps({column: row[column] for column in columns}).encode()


def records(topic: str, units: list[str]) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every line of ``units`` (a unit: lines joined by newlines)."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for unit in units:
        key: bytes | None = None
        for line in unit.split("\n"):
            if line in TOMBSTONES:
                out.append((key, None))  # the key of the delete it follows
            else:
                key = record_key(topic, line)
                out.append((key, line.encode("utf-8")))
    return out


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    found = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise KafkaSinkError(f"bootstrap server {server.strip()!r} is not HOST:PORT")
        found.append((host.strip("[]"), int(port)))
    return found


def check_reachable(bootstrap: str) -> None:
    """Fail fast, with the address, when no bootstrap server accepts connections."""
    for host, port in _addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=3):
                return
        except OSError:
            continue
    raise KafkaSinkError(
        f"no Kafka broker accepts connections at {bootstrap} "
        "(start one with `make kafka-up` or `python -m python_jobs.tools.kafka_broker up`)"
    )


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def topic_record_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Records held by each of ``topics`` that exists (high minus low watermark)."""
    try:
        metadata = _admin(bootstrap).list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as error:
        raise KafkaSinkError(f"cannot read topic metadata from {bootstrap}: {error}") from None
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "python_jobs.simulate.check",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    counts: dict[str, int] = {}
    try:
        for topic in topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                continue
            total = 0
            for partition in described.partitions:
                low, high = _watermarks(consumer, TopicPartition(topic, partition))
                total += high - low
            counts[topic] = total
    finally:
        consumer.close()
    return counts


def _watermarks(consumer: Consumer, partition: TopicPartition) -> tuple[int, int]:
    """A partition's low and high watermarks. A topic just created (by Kafka Connect,
    say) may have no leader for a moment: while the error says so (LEADERLESS), it is
    asked again for up to METADATA_TIMEOUT_S; any other error is raised at once."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=METADATA_TIMEOUT_S)
        except KafkaException as error:
            if error.args[0].code() not in LEADERLESS or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def delete_topics(bootstrap: str, topics: list[str], timeout: float = 30.0) -> None:
    """Delete the topics that exist and wait until the metadata no longer lists them."""
    admin = _admin(bootstrap)
    existing = set(admin.list_topics(timeout=METADATA_TIMEOUT_S).topics)
    doomed = [topic for topic in topics if topic in existing]
    if not doomed:
        return
    for topic, future in admin.delete_topics(doomed, operation_timeout=timeout).items():
        try:
            future.result(timeout=timeout)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaSinkError(f"deleting topic {topic} on {bootstrap}: {error}") from None
    deadline = time.monotonic() + timeout
    while set(doomed) & set(admin.list_topics(timeout=METADATA_TIMEOUT_S).topics):
        if time.monotonic() > deadline:
            raise KafkaSinkError(f"topics {doomed} still listed {timeout:.0f} s after deletion")
        time.sleep(0.2)


def prepare_topics(
    bootstrap: str,
    topics: list[str],
    expected: dict[str, int] | None,
    force: bool,
) -> None:
    """Make ``topics`` ready for a run, refusing to mix runs as the file sink does.

    A fresh run (``expected`` None) needs topics with no records; ``force`` deletes them
    first. A resumed run needs each topic to hold exactly the ``expected`` records of the
    runs before it. Missing topics are then created with :data:`PARTITIONS` partitions.
    """
    counts = topic_record_counts(bootstrap, topics)
    if expected is None:
        held = {topic: n for topic, n in counts.items() if n}
        if held and not force:
            shown = ", ".join(f"{topic} {n:,}" for topic, n in held.items())
            raise KafkaSinkError(
                f"the Kafka topics at {bootstrap} already hold records ({shown}); use "
                "--resume to continue that run, or --force to delete the topics and start over"
            )
        if force:
            delete_topics(bootstrap, topics)
    else:
        for topic in topics:
            if counts.get(topic, 0) != expected.get(topic, 0):
                raise KafkaSinkError(
                    f"--resume: topic {topic} at {bootstrap} holds {counts.get(topic, 0):,} "
                    f"records, the saved run delivered {expected.get(topic, 0):,}: it does "
                    "not hold that run (start over with --force)"
                )
    try:
        create_topics(bootstrap, topics, PARTITIONS)
    except (BrokerError, KafkaException) as error:
        raise KafkaSinkError(str(error)) from None


def producer_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "python_jobs.simulate",
        # Every record acknowledged by the in-sync replicas, written once, in order.
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2",
        "linger.ms": 20,
        "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        # Errors only: a fresh broker's "coordinator load in progress" is retried anyway.
        "log_level": 3,
    }


class KafkaWriter:
    """Produces the topic lines to Kafka; devices full loads go to ``landing`` as files."""

    def __init__(self, bootstrap: str, landing: Path) -> None:
        self.bootstrap = bootstrap
        self.files = LandingWriter(landing)
        self.produced = 0
        self.acknowledged = 0
        self.error: KafkaError | None = None
        self._producer = Producer({**producer_config(bootstrap), "on_delivery": self._delivered})

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acknowledged += 1
        elif self.error is None:
            self.error = error

    def write_topic_file(self, topic: str, counter: int, day: str, texts: list[str]) -> str:
        """Produce one delivery batch of ``topic`` (what would have been one file).

        Returns the name that file would have had, relative to the landing dir (the
        manifest lists delivery batches by that name, whatever the sink).
        """
        if self.error is not None:
            raise KafkaSinkError(f"producing to {self.bootstrap} failed: {self.error}")
        produce = self._producer.produce
        for key, value in records(topic, texts):
            while True:
                try:
                    produce(topic, value=value, key=key)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    self._producer.poll(0.1)
            self.produced += 1
        self._producer.poll(0)
        return f"{topic}/{topic_file_name(counter, day)}"

    def write_devices(self, day: str, lines: list[str]) -> str:
        return self.files.write_devices(day, lines)

    def finish(self) -> None:
        """Wait until every record is acknowledged (or failed); fail unless all were."""
        try:
            remaining = self._producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 30)
            if self.error is not None:
                raise KafkaSinkError(f"producing to {self.bootstrap} failed: {self.error}")
            if remaining or self.acknowledged != self.produced:
                raise KafkaSinkError(
                    f"{self.produced - self.acknowledged:,} of {self.produced:,} records were "
                    f"not acknowledged by {self.bootstrap}"
                )
        finally:
            self.files.finish()
