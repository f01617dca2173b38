"""The first slice end to end: simulator -> landing -> Bronze -> staging -> dbt tests."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from python_jobs import ingest
from python_jobs.topics import load_topics
from tests.helpers import bronze_records, ingested_records, landing_records

# topic -> Bronze table, from the registry (test_topics.py pins the list).
TOPICS = {t.topic: t.table for t in load_topics()}


def _micros(value: int | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1_000_000, tz=UTC).replace(tzinfo=None)


def _decimal(value: str | None) -> Decimal | None:
    if value is None:
        return None
    unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
    return Decimal(unscaled).scaleb(-2)


def expected_user_events(landing: Path) -> list[tuple]:
    """The users change events, decoded in plain Python, independently of the SQL."""
    events = []
    for file_name, line_number, raw in landing_records(landing, "blog.public.users"):
        record = json.loads(raw)
        envelope = record["payload"] if "payload" in record else record
        image = envelope["after"] or envelope["before"]
        after = envelope["after"] or {}
        events.append(
            (
                file_name,
                line_number,
                envelope["op"],
                image["user_id"],
                envelope["source"]["lsn"],
                after.get("email"),
                _decimal(after.get("lifetime_value")),
                _micros(after.get("updated_at")),
            )
        )
    return sorted(events)


def test_simulated_workload_flows_to_a_tested_staging_model(
    spark, dbt, clean_lakehouse, simulate
) -> None:
    landing = clean_lakehouse["landing"]
    simulate(landing, clean_lakehouse["home"] / "truth", "--seed", "11", "--days", "2")

    ingest.run(ingest.IngestOptions(landing=landing))
    for topic, table in TOPICS.items():
        expected = sorted(landing_records(landing, topic))
        assert ingested_records(spark, topic, table) == expected, topic

    # Ingesting again finds nothing new: Bronze is unchanged (no duplicates).
    versions = {
        t: spark.sql(f"describe history delta.`{clean_lakehouse['bronze'] / t}`").count()
        for t in TOPICS.values()
    }
    ingest.run(ingest.IngestOptions(landing=landing))
    for table, version_count in versions.items():
        history = spark.sql(f"describe history delta.`{clean_lakehouse['bronze'] / table}`")
        assert history.count() == version_count, table

    # The staging layer and its tests (the whole project builds on a simulated workload
    # in test_demo.py, and over empty Bronze tables below).
    dbt("build", "--select", "path:models/staging")
    staged = spark.sql(
        "select _source_file, _line_number, op, user_id, _source_lsn, email,"
        " lifetime_value, updated_at from silver.stg_blog__users"
    ).collect()
    got = sorted((Path(r[0]).name, *tuple(r)[1:]) for r in staged)
    expected = expected_user_events(landing)
    assert got == expected
    assert {e[2] for e in expected} >= {"r", "c", "u", "d"}

    # The catalog holds exactly the medallion schemas (plus Spark's `default`).
    schemas = {r[0] for r in spark.sql("show schemas").collect()}
    assert schemas == {"default", "bronze", "silver", "gold", "ops"}

    # Bronze sources are fresh right after ingestion.
    dbt("source", "freshness")


def test_an_empty_landing_zone_builds_over_empty_bronze_tables(spark, dbt, clean_lakehouse) -> None:
    ingest.run(ingest.IngestOptions(landing=clean_lakehouse["landing"]))
    for table in TOPICS.values():
        assert bronze_records(spark, table) == []
    dbt("build")
    assert spark.table("silver.stg_blog__users").count() == 0


def test_a_failing_data_test_fails_the_build(spark, dbt, clean_lakehouse) -> None:
    landing = clean_lakehouse["landing"]
    topic_dir = landing / "blog.public.users"
    topic_dir.mkdir(parents=True)
    # A well-formed change event whose key is not a number (a type change upstream):
    # Bronze keeps it, the staging model cannot type it, and its tests must catch it.
    (topic_dir / "000001.json").write_text(
        '{"before":null,"after":{"user_id":"u-1"},"source":{"ts_ms":1,"lsn":1},"op":"c"}\n'
    )
    ingest.run(ingest.IngestOptions(landing=landing))
    result = dbt("build", "--select", "stg_blog__users", expect_fail=True)
    failed = {r.node.name for r in result.result.results if r.status in ("fail", "error")}
    assert "not_null_stg_blog__users_user_id" in failed
