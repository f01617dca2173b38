"""The same workload through a real Kafka broker and through the landing zone gives the
same Bronze (ignoring the transport columns) and the same dead letters."""

from __future__ import annotations

from collections import Counter

import pytest

from python_jobs import bronze, ingest
from python_jobs.topics import load_topics
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
