"""The local Kafka broker, and the simulator's Kafka sink against it. No mocks.

The broker is real (``python_jobs.tools.kafka_broker``: Apache Kafka from Maven Central, KRaft,
on loopback). The sink is checked against the file sink: the same seed and chaos options
must give, per topic, the same multiset of record values (tombstones as None) and, per
key, the same order; and the same truth dir, byte for byte.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from python_jobs.simulate import replay
from python_jobs.simulate.kafka_sink import PARTITIONS, records
from python_jobs.tools.kafka_broker import (
    Broker,
    broker_status,
    create_topics,
    free_port,
    port_open,
)
from tests.helpers import run_simulator

REPO = Path(__file__).resolve().parents[2]
USERS, ARTICLES, VISITS = "blog.public.users", "blog.public.articles", "blog.visits"
TOPICS = (USERS, ARTICLES, VISITS)
KEY_COLUMN = {USERS: "user_id", ARTICLES: "article_id"}
# Small, with every kind of chaos well represented (duplicates, out of order, broken and
# invalid visits, wrapped envelopes, deletes with 'null' and empty tombstones).
CHAOS = (
    "--seed", "11",
    "--users", "40",
    "--articles", "20",
    "--days", "2",
    "--changes-per-day", "160",
    "--visits-per-day", "200",
    "--files-per-topic", "3",
    "--duplicate-rate", "0.1",
    "--out-of-order-rate", "0.1",
    "--malformed-rate", "0.15",
    "--wrapped-rate", "0.5",
    "--delete-rate", "0.2",
)  # fmt: skip
IPV4_LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
IPV4_MAPPED_LOOPBACK = "0000000000000000FFFF00000100007F"  # ::ffff:127.0.0.1 in tcp6
Record = tuple[bytes | None, bytes | None]  # (key, value)


# --- helpers ---------------------------------------------------------------------------


def broker_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m python_jobs.tools.kafka_broker`` in its own LAKEHOUSE_HOME."""
    return subprocess.run(
        [sys.executable, "-m", "python_jobs.tools.kafka_broker", *args],
        cwd=REPO,
        env={**os.environ, "LAKEHOUSE_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
    )


def expected_key(topic: str, line: str) -> bytes | None:
    """The record key a line must get, worked out here from the contract's formats."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if topic == VISITS:
        if not isinstance(record, dict) or record.get("visit_id") is None:
            return None
        return json.dumps(record["visit_id"], separators=(",", ":")).encode()
    envelope = record["payload"] if "schema" in record else record
    row = envelope["after"] if envelope["after"] is not None else envelope["before"]
    column = KEY_COLUMN[topic]
    return json.dumps({column: row[column]}, separators=(",", ":")).encode()


def landing_records(landing: Path, topic: str) -> list[Record]:
    """(key, value) of every line of the topic's files, in delivery order."""
    out: list[Record] = []
    key: bytes | None = None
    for _, line in replay.iter_lines(landing, topic):
        if line in ("", "null"):  # a tombstone: the key of the delete it follows
            out.append((key, None))
        else:
            key = expected_key(topic, line)
            out.append((key, line.encode("utf-8")))
    return out


def kafka_records(bootstrap: str, topic: str) -> dict[int, list[Record]]:
    """Every record of the topic, per partition, in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{topic}",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: dict[int, list[Record]] = {p: [] for p in ends}
        remaining = sum(ends.values())
        while remaining:
            message = consumer.poll(10)
            assert message is not None, f"{topic}: {remaining} records not read back"
            assert message.error() is None, message.error()
            out[message.partition()].append((message.key(), message.value()))
            remaining -= 1
        return out
    finally:
        consumer.close()


def by_key(stream: list[Record]) -> dict[bytes | None, list[bytes | None]]:
    grouped: dict[bytes | None, list[bytes | None]] = defaultdict(list)
    for key, value in stream:
        grouped[key].append(value)
    return dict(grouped)


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the IPv4/IPv6 sockets listening on ``port`` (from /proc)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


# --- the broker ------------------------------------------------------------------------


def test_broker_serves_on_loopback_only(kafka_broker: Broker) -> None:
    assert broker_status() == kafka_broker
    assert kafka_broker.bootstrap == f"127.0.0.1:{kafka_broker.port}"
    assert kafka_broker.home == Path(os.environ["LAKEHOUSE_HOME"]) / "kafka"
    for port in (kafka_broker.port, kafka_broker.controller_port):
        # 127.0.0.1 (the JVM may show it IPv4-mapped in tcp6), nothing else.
        assert listening_addresses(port) in ({IPV4_LOOPBACK}, {IPV4_MAPPED_LOOPBACK})

    assert create_topics(kafka_broker.bootstrap, ["t.created"], 2) == ["t.created"]
    assert create_topics(kafka_broker.bootstrap, ["t.created"], 5) == []  # kept as it is
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    assert len(admin.list_topics(timeout=10).topics["t.created"].partitions) == 2


def test_topics_are_never_created_automatically(kafka_broker: Broker) -> None:
    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": kafka_broker.bootstrap,
            "message.timeout.ms": 2000,
            "log_level": 0,
            "on_delivery": lambda error, _message: errors.append(error),
        }
    )
    producer.produce("t.never.created", value=b"x")
    producer.flush(10)
    assert len(errors) == 1 and errors[0] is not None
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    assert "t.never.created" not in admin.list_topics(timeout=10).topics


def test_cli_up_status_down(lakehouse_home: Path) -> None:
    """A second broker in its own home: up, up again (kept), status, down (port closed),
    down again (nothing to do); then a broker that can't start fails with its log."""
    home = lakehouse_home / "cli-broker"
    up = broker_cli(home, "up")
    assert up.returncode == 0, up.stderr
    bootstrap = up.stdout.strip()
    port = int(bootstrap.rpartition(":")[2])
    try:
        assert bootstrap == f"127.0.0.1:{port}" and port_open(port)
        again = broker_cli(home, "up")
        assert again.returncode == 0 and again.stdout.strip() == bootstrap, again.stderr
        assert "already running" in again.stderr
        status = broker_cli(home, "status")
        assert status.returncode == 0 and f"bootstrap {bootstrap}" in status.stdout
    finally:
        down = broker_cli(home, "down")
    assert down.returncode == 0, down.stderr
    assert "stopped" in down.stderr
    assert not port_open(port)
    assert not (home / "kafka" / "broker.pid").exists()
    stopped = broker_cli(home, "status")
    assert stopped.returncode == 1 and "not running" in stopped.stdout
    assert broker_cli(home, "down").returncode == 0  # idempotent

    # Failure paths: a port in use, and a broker that exits during start-up.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        refused = broker_cli(home, "up", "--port", str(taken))
    assert refused.returncode == 1 and f"port {taken} on 127.0.0.1 is already in use" in (
        refused.stderr
    )
    meta = home / "kafka" / "data" / "meta.properties"
    meta.write_text(meta.read_text().replace("node.id=1", "node.id=7"))
    broken = broker_cli(home, "up")
    assert broken.returncode == 1
    assert "the Kafka broker exited during start-up" in broken.stderr
    assert "server.log (last" in broken.stderr  # the tail of the broker's log
    assert broker_cli(home, "status").returncode == 1


# --- the simulator's Kafka sink --------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "line", "key"),
    [
        (USERS, '{"before":null,"after":{"user_id":3,"x":1},"op":"c"}', b'{"user_id":3}'),
        (USERS, '{"schema":{},"payload":{"before":{"user_id":4},"after":null}}', b'{"user_id":4}'),
        (ARTICLES, '{"before":null,"after":{"article_id":9},"op":"r"}', b'{"article_id":9}'),
        (VISITS, '{"visit_id":"v-1","page":"/"}', b'"v-1"'),
        (VISITS, '{"visit_id":null,"page":"/"}', None),
        (VISITS, "{{not json}}", None),
        (USERS, '{"before":null,"after":null}', None),
    ],
)
def test_record_keys(topic: str, line: str, key: bytes | None) -> None:
    assert records(topic, [line]) == [(key, line.encode())]


def test_tombstones_are_null_values_with_the_delete_key() -> None:
    delete = '{"before":{"user_id":5},"after":null,"op":"d"}'
    assert records(USERS, [f"{delete}\nnull", f"{delete}\n"]) == [
        (b'{"user_id":5}', delete.encode()),
        (b'{"user_id":5}', None),
        (b'{"user_id":5}', delete.encode()),
        (b'{"user_id":5}', None),
    ]


@pytest.fixture(scope="module")
def both_sinks(kafka_broker: Broker, lakehouse_home: Path) -> dict[str, Path]:
    """The same chaotic workload (a run and a resumed day) through both sinks."""
    base = lakehouse_home / "sinks"
    dirs = {name: base / name for name in ("files", "kafka")}
    sink_args = {
        "files": ("--sink", "files"),
        "kafka": ("--sink", "kafka", "--bootstrap-servers", kafka_broker.bootstrap),
    }
    for name, root in dirs.items():
        # --force: the session's broker may hold these topics from another test.
        first = run_simulator(root / "landing", root / "truth", *CHAOS, "--force", *sink_args[name])
        assert first.returncode == 0, first.stderr
        resumed = run_simulator(
            root / "landing", root / "truth", "--resume", "--days", "1", *sink_args[name]
        )
        assert resumed.returncode == 0, resumed.stderr
    assert "Kafka records in" in resumed.stdout
    return dirs


def test_kafka_sink_delivers_what_the_files_hold(
    both_sinks: dict[str, Path], kafka_broker: Broker
) -> None:
    landing = both_sinks["files"] / "landing"
    manifest = json.loads((both_sinks["files"] / "truth" / "manifest.json").read_text())
    for topic in TOPICS:
        expected = landing_records(landing, topic)
        partitions = kafka_records(kafka_broker.bootstrap, topic)
        received = [record for stream in partitions.values() for record in stream]
        assert len(partitions) == PARTITIONS
        assert len(received) == len(expected) == manifest["topics"][topic]["lines"]
        # The same multiset of values (tombstones as None) ...
        assert Counter(v for _, v in received) == Counter(v for _, v in expected), topic
        # ... each key (null keys included) in one partition, in the files' order.
        homes: dict[bytes | None, set[int]] = defaultdict(set)
        for partition, stream in partitions.items():
            for key, _ in stream:
                homes[key].add(partition)
        assert all(len(p) == 1 for p in homes.values()), topic
        per_key: dict[bytes | None, list[bytes | None]] = {}
        for stream in partitions.values():
            per_key.update(by_key(stream))
        assert per_key == by_key(expected), topic
        # Keys really spread over the partitions (murmur2 of the key).
        assert all(partitions.values()), topic


def test_the_workload_has_every_kind_of_chaos(both_sinks: dict[str, Path]) -> None:
    """Guards the comparison above against passing on a tame workload."""
    landing = both_sinks["files"] / "landing"
    manifest = json.loads((both_sinks["files"] / "truth" / "manifest.json").read_text())
    cdc = [line for topic in (USERS, ARTICLES) for _, line in replay.iter_lines(landing, topic)]
    visits = [line for _, line in replay.iter_lines(landing, VISITS)]
    assert cdc.count("null") > 0 and cdc.count("") > 0
    assert sum(line.startswith('{"schema"') for line in cdc) > 0
    assert sum(expected_key(VISITS, line) is None for line in visits) > 0
    for topic in TOPICS:
        assert manifest["topics"][topic]["duplicates"] > 0, topic
        assert manifest["topics"][topic]["delayed"] > 0, topic
    assert len(manifest["runs"]) == 2


def test_kafka_sink_writes_the_same_truth_and_devices(both_sinks: dict[str, Path]) -> None:
    files, kafka = both_sinks["files"], both_sinks["kafka"]
    assert tree(kafka / "truth") == tree(files / "truth")
    devices = "reference/devices/"
    landed = tree(kafka / "landing")
    assert landed and all(name.startswith(devices) for name in landed)
    assert landed == {k: v for k, v in tree(files / "landing").items() if k.startswith(devices)}


def test_kafka_sink_refuses_to_mix_runs(
    both_sinks: dict[str, Path], kafka_broker: Broker, lakehouse_home: Path
) -> None:
    root = lakehouse_home / "sinks-again"
    sink = ("--sink", "kafka", "--bootstrap-servers", kafka_broker.bootstrap)
    fresh = run_simulator(root / "landing", root / "truth", *CHAOS, *sink)
    assert fresh.returncode == 1
    assert "the Kafka topics at" in fresh.stderr and "already hold records" in fresh.stderr
    kafka = both_sinks["kafka"]
    files_resume = run_simulator(kafka / "landing", kafka / "truth", "--resume", "--sink", "files")
    assert files_resume.returncode == 1 and "is missing" in files_resume.stderr
    assert not (root / "truth").exists()


def test_kafka_sink_unreachable_broker(lakehouse_home: Path) -> None:
    root = lakehouse_home / "sinks-unreachable"
    nowhere = f"127.0.0.1:{free_port()}"
    proc = run_simulator(
        root / "landing", root / "truth", "--sink", "kafka", "--bootstrap-servers", nowhere
    )
    assert proc.returncode == 1
    assert f"no Kafka broker accepts connections at {nowhere}" in proc.stderr
    assert not (root / "truth").exists()


def test_sink_option_errors(lakehouse_home: Path) -> None:
    root = lakehouse_home / "sinks-options"
    mixed = run_simulator(root / "l", root / "t", "--bootstrap-servers", "127.0.0.1:9092")
    assert mixed.returncode == 2 and "applies to --sink kafka only" in mixed.stderr
    # No --bootstrap-servers: the broker of the LAKEHOUSE_HOME, and this one has none.
    alone = run_simulator(root / "l", root / "t", "--sink", "kafka", home=root)
    assert alone.returncode == 1
    assert f"no --bootstrap-servers given and no broker running for {root}" in alone.stderr
    assert not (root / "t").exists()


def test_kafka_sink_resume_checks_the_topics(
    both_sinks: dict[str, Path], kafka_broker: Broker, lakehouse_home: Path
) -> None:
    """A --resume whose saved run is not what the topics hold is refused."""
    root = lakehouse_home / "sinks-other-run"
    other = run_simulator(root / "landing", root / "truth", "--days", "1", "--users", "5")
    assert other.returncode == 0, other.stderr
    sink = ("--sink", "kafka", "--bootstrap-servers", kafka_broker.bootstrap)
    proc = run_simulator(root / "landing", root / "truth", "--resume", *sink)
    assert proc.returncode == 1
    assert "--resume: topic blog.public.users at" in proc.stderr
    assert "it does not hold that run" in proc.stderr
