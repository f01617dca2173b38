"""The same workload through a real Kafka broker and through the landing zone gives the
same Bronze (ignoring the transport columns) and the same dead letters."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import replace

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from delta.tables import DeltaTable
from pyspark.errors import AnalysisException

from python_jobs import bronze, ingest, kafka_identity
from python_jobs.tools.kafka_broker import create_topics
from python_jobs.topics import Topic, load_topics
from tests.helpers import reset_lakehouse

WORKLOAD = (
    "--seed", "5",
    "--users", "40",
    "--articles", "20",
    "--days", "2",
    "--files-per-topic", "3",
    "--malformed-rate", "0.1",
    "--wrapped-rate", "0.5",
    "--delete-rate", "0.2",
    "--add-column-at", "0.5",
)  # fmt: skip
TRANSPORT = {"_topic", "_partition", "_offset", "_source_file", "_line_number"}
DECORATION = {"_ingested_at", "_batch_id", "_ingest_date"}


def _content(spark) -> dict[str, Counter]:
    """Each Bronze table and the dead letters as multisets of rows, without transport
    and ingestion-time columns."""
    tables = {t.topic: str(t.bronze_path) for t in load_topics()}
    tables["dead_letter"] = bronze.dead_letter_path()
    content = {}
    for name, path in tables.items():
        frame = spark.read.format("delta").load(path)
        kept = [c for c in frame.columns if c not in TRANSPORT | DECORATION]
        content[name] = Counter(tuple(r) for r in frame.select(*kept).collect())
    return content


def _batch_totals(spark) -> dict[str, tuple[int, int, int, int]]:
    rows = (
        spark.read.format("delta")
        .load(bronze.batches_path())
        .groupBy("topic")
        .sum("records_read", "bronze_rows", "dead_letters", "tombstones")
        .collect()
    )
    return {r[0]: tuple(r[1:]) for r in rows}


@pytest.mark.slow
def test_kafka_and_files_give_the_same_bronze(spark, clean_lakehouse, simulate, kafka_broker):
    home = clean_lakehouse["home"]
    landing = clean_lakehouse["landing"]
    simulate(landing, home / "truth-files", *WORKLOAD)
    ingest.run(ingest.IngestOptions(landing=landing))
    from_files = _content(spark)
    totals_files = _batch_totals(spark)

    reset_lakehouse(spark)
    simulate(
        landing,
        home / "truth-kafka",
        *WORKLOAD,
        "--sink", "kafka",
        "--bootstrap-servers", kafka_broker.bootstrap,
        "--force",
    )  # fmt: skip
    options = ingest.IngestOptions(source="kafka", bootstrap_servers=kafka_broker.bootstrap)
    ingest.run(options)
    from_kafka = _content(spark)

    assert set(from_kafka) == set(from_files)
    for name in from_files:
        assert from_kafka[name] == from_files[name], name
    assert sum(from_files["blog.visits"].values()) > 100
    assert sum(from_files["dead_letter"].values()) > 0
    assert _batch_totals(spark) == totals_files
    positions = spark.read.format("delta").load(str(load_topics()[0].bronze_path))
    assert positions.where("_offset is null or _partition is null").count() == 0
    assert positions.where("_source_file is not null").count() == 0
    # A second run reads nothing new.
    before = _content(spark)
    ingest.run(options)
    assert _content(spark) == before


LOSS = Topic(topic="test.loss", kind="events", key=("id",), table="test_loss")


def _produce(bootstrap: str, ids: range, topic: Topic = LOSS) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for n in ids:
        producer.produce(topic.topic, value=f'{{"id":{n}}}'.encode())
    assert producer.flush(30) == 0


def _ids(spark, topic: Topic = LOSS) -> list[int]:
    frame = spark.read.format("delta").load(str(topic.bronze_path))
    return sorted(json.loads(r[0])["id"] for r in frame.select("_raw").collect())


@pytest.mark.slow
def test_records_deleted_before_they_were_read_stop_ingestion_until_accepted(
    spark, clean_lakehouse, kafka_broker
):
    """Retention deletes offsets 3 and 4 (ids 4 and 5) before the query reads them: the
    run fails, saying what to do, and writes nothing; a run that accepts the loss goes
    on from the earliest retained offset (id 6), once; later runs need no flag."""
    bootstrap = kafka_broker.bootstrap
    create_topics(bootstrap, [LOSS.topic], 1)
    options = ingest.IngestOptions(source="kafka", bootstrap_servers=bootstrap)
    _produce(bootstrap, range(1, 4))
    ingest.run(options, topics=[LOSS])
    assert _ids(spark) == [1, 2, 3]

    _produce(bootstrap, range(4, 7))
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.delete_records([TopicPartition(LOSS.topic, 0, 5)]).values():
        assert future.result(timeout=30).low_watermark == 5  # the earliest offset left
    with pytest.raises(ingest.IngestError) as failed:
        ingest.run(options, topics=[LOSS])
    message = str(failed.value)
    assert "deleted (retention) before this query read them (Could not read records" in message
    assert message.endswith(
        "ingest once with --accept-data-loss to go on from the earliest "
        "offset the broker still has."
    )
    assert _ids(spark) == [1, 2, 3]

    ingest.run(replace(options, accept_data_loss=True), topics=[LOSS])
    assert _ids(spark) == [1, 2, 3, 6]
    _produce(bootstrap, range(7, 8))
    ingest.run(options, topics=[LOSS])
    assert _ids(spark) == [1, 2, 3, 6, 7]


RECREATED = Topic(topic="test.recreated", kind="events", key=("id",), table="test_recreated")


def _topic_id(bootstrap: str) -> str | None:
    return kafka_identity.topic_ids(bootstrap, [RECREATED.topic])[RECREATED.topic]


def _ids_once_written(spark) -> list[int]:
    """The ids in the topic's Bronze table, [] before the run has created it."""
    try:
        return _ids(spark, RECREATED)
    except AnalysisException:
        return []


def _delete_topic(bootstrap: str) -> None:
    """Delete the topic and wait until the broker no longer knows it."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.delete_topics([RECREATED.topic]).values():
        future.result(timeout=30)
    deadline = time.monotonic() + 30
    while _topic_id(bootstrap) is not None:
        assert time.monotonic() < deadline, "the topic is still there"
        time.sleep(0.2)


def _fresh_topic(bootstrap: str) -> str:
    """The topic, new and empty (a test before may have left it); returns its id."""
    if _topic_id(bootstrap) is not None:
        _delete_topic(bootstrap)
    assert create_topics(bootstrap, [RECREATED.topic], 1) == [RECREATED.topic]
    topic_id = _topic_id(bootstrap)
    assert topic_id is not None
    return topic_id


def _recreate_topic(bootstrap: str, ids: range) -> str:
    """Delete the topic, create it again, write `ids` to it; returns its new id."""
    old = _topic_id(bootstrap)
    _delete_topic(bootstrap)
    assert create_topics(bootstrap, [RECREATED.topic], 1) == [RECREATED.topic]
    _produce(bootstrap, ids, RECREATED)
    new = _topic_id(bootstrap)
    assert new is not None and new != old
    return new


@pytest.mark.slow
def test_a_topic_deleted_and_created_again_stops_ingestion_until_it_is_reingested(
    spark, clean_lakehouse, kafka_broker
):
    """The topic is created again with more records than the checkpoint read from the old
    one (Spark alone would skip the first three): every run fails naming both topic ids
    and writes nothing; a run with --reingest-recreated-topics sets the old checkpoint
    and Bronze table aside (kept) and reads the new topic from offset 0, and later runs
    go on. Created again with fewer records (Spark alone: a retention loss), or deleted:
    the same refusal, in its words."""
    bootstrap = kafka_broker.bootstrap
    options = ingest.IngestOptions(source="kafka", bootstrap_servers=bootstrap)
    checkpoint = ingest.checkpoint_dir(RECREATED, "kafka")
    first_id = _fresh_topic(bootstrap)
    _produce(bootstrap, range(1, 4), RECREATED)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    producer.produce(RECREATED.topic, value=b'{"id":')  # a dead letter of the old topic
    assert producer.flush(30) == 0
    ingest.run(options, topics=[RECREATED])
    assert _ids(spark, RECREATED) == [1, 2, 3]
    assert kafka_identity.recorded_id(checkpoint) == first_id

    second_id = _recreate_topic(bootstrap, range(11, 16))
    for _ in range(2):
        with pytest.raises(ingest.IngestError) as failed:
            ingest.run(options, topics=[RECREATED])
        assert str(failed.value) == kafka_identity.recreated_message(
            RECREATED.topic, checkpoint, first_id, second_id
        )
        assert _ids(spark, RECREATED) == [1, 2, 3]

    ingest.run(replace(options, reingest_recreated_topics=True), topics=[RECREATED])
    assert _ids(spark, RECREATED) == [11, 12, 13, 14, 15]
    assert kafka_identity.recorded_id(checkpoint) == second_id
    # The old topic's checkpoint and Bronze table, set aside and kept.
    [old_checkpoint] = checkpoint.parent.glob(f"{checkpoint.name}.recreated-*")
    assert kafka_identity.recorded_id(old_checkpoint) == first_id
    [old_bronze] = RECREATED.bronze_path.parent.glob(f"{RECREATED.bronze_path.name}.recreated-*")
    old_rows = spark.read.format("delta").load(str(old_bronze)).select("_raw").collect()
    assert sorted(json.loads(r[0])["id"] for r in old_rows) == [1, 2, 3]
    # The new table was made by the ingestion, with Bronze's properties, before any write.
    made = bronze.logged_properties(DeltaTable.forPath(spark, str(RECREATED.bronze_path)))
    assert made.items() >= bronze.BRONZE_PROPERTIES.items()
    dead = spark.read.format("delta").load(bronze.dead_letter_path())
    assert dead.where(f"_topic = '{RECREATED.topic}'").count() == 1
    _produce(bootstrap, range(16, 17), RECREATED)
    ingest.run(options, topics=[RECREATED])
    assert _ids(spark, RECREATED) == [11, 12, 13, 14, 15, 16]

    third_id = _recreate_topic(bootstrap, range(21, 22))
    with pytest.raises(ingest.IngestError) as failed:
        ingest.run(options, topics=[RECREATED])
    assert str(failed.value) == kafka_identity.recreated_message(
        RECREATED.topic, checkpoint, second_id, third_id
    )

    _delete_topic(bootstrap)
    with pytest.raises(ingest.IngestError) as failed:
        ingest.run(options, topics=[RECREATED])
    assert str(failed.value) == (
        f"{RECREATED.topic}: the topic does not exist on {bootstrap}, but the checkpoint "
        f"{checkpoint} has read it: it was deleted. {kafka_identity.RECOVERY}"
    )
    assert _ids(spark, RECREATED) == [11, 12, 13, 14, 15, 16]


@pytest.mark.slow
def test_a_topic_created_again_while_a_continuous_query_reads_it_stops_the_query(
    spark, clean_lakehouse, kafka_broker
):
    """A continuous ingestion (a batch a second): the topic is deleted and created again
    with more records than the query read. The next batch stops the run before writing,
    with the deletion or the new id in the message, whichever the batch met."""
    bootstrap = kafka_broker.bootstrap
    checkpoint = ingest.checkpoint_dir(RECREATED, "kafka")
    first_id = _fresh_topic(bootstrap)
    _produce(bootstrap, range(1, 4), RECREATED)
    options = ingest.IngestOptions(
        source="kafka", bootstrap_servers=bootstrap, once=False, trigger_interval=1.0
    )
    failures: list[BaseException] = []

    def ingest_continuously() -> None:
        try:
            ingest.run(options, topics=[RECREATED])
        except BaseException as error:  # noqa: BLE001 - the test reads it
            failures.append(error)

    worker = threading.Thread(target=ingest_continuously, daemon=True)
    worker.start()
    deadline = time.monotonic() + 120
    while _ids_once_written(spark) != [1, 2, 3]:
        assert worker.is_alive() and time.monotonic() < deadline, failures
        time.sleep(0.5)
    second_id = _recreate_topic(bootstrap, range(11, 16))
    worker.join(timeout=120)
    if worker.is_alive():
        for query in spark.streams.active:
            query.stop()
        worker.join(timeout=60)
        pytest.fail("the continuous ingestion went on reading the recreated topic")
    [failure] = failures
    assert isinstance(failure, ingest.IngestError), failure
    recreated = kafka_identity.recreated_message(RECREATED.topic, checkpoint, first_id, second_id)
    deleted = (
        f"{RECREATED.topic}: the topic was deleted on {bootstrap} while this query read it. "
        f"{kafka_identity.RECOVERY}"
    )
    assert str(failure) in (recreated, deleted), str(failure)
    assert _ids(spark, RECREATED) == [1, 2, 3]
