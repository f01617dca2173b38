"""The same workload through a real Kafka broker and through the landing zone gives the
same Bronze (ignoring the transport columns) and the same dead letters."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from python_jobs import bronze, ingest
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


def _produce(bootstrap: str, ids: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for n in ids:
        producer.produce(LOSS.topic, value=f'{{"id":{n}}}'.encode())
    assert producer.flush(30) == 0


def _ids(spark) -> list[int]:
    frame = spark.read.format("delta").load(str(LOSS.bronze_path))
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
