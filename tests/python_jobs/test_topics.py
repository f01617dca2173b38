"""The topic registry (topics.yml) and the dbt sources that declare its Bronze tables."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from python_jobs.bronze import (
    BATCH_SCHEMA,
    BRONZE_SCHEMA,
    DEAD_LETTER_SCHEMA,
    batches_path,
    dead_letter_path,
)
from python_jobs.spark import REPO_ROOT
from python_jobs.topics import load_topics

SOURCE_FILES = sorted((REPO_ROOT / "models").glob("**/_*__sources.yml"))


def test_registry_lists_the_contract_topics() -> None:
    got = [(t.topic, t.kind, t.key, t.table) for t in load_topics()]
    assert got == [
        ("blog.public.users", "cdc", ("user_id",), "blog_public_users"),
        ("blog.public.articles", "cdc", ("article_id",), "blog_public_articles"),
        ("blog.visits", "events", ("visit_id",), "blog_visits"),
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{topic: a.b, kind: cdc, table: a_b}", "topic 'a.b' lacks ['key']"),
        ("{topic: a.b, kind: stream, key: [id], table: a_b}", "topic 'a.b' has kind 'stream'"),
        ("{topic: a.b, kind: cdc, key: [id], table: dead_letter}", "cannot feed 'dead_letter'"),
        (
            "{topic: a.b, kind: cdc, key: [id], table: a_b}\n"
            "  - {topic: a.c, kind: cdc, key: [id], table: a_b}",
            "table declared twice: ['a_b']",
        ),
    ],
)
def test_a_bad_registry_entry_fails_with_the_topic_named(
    tmp_path: Path, entry: str, message: str
) -> None:
    registry = tmp_path / "topics.yml"
    registry.write_text(f"topics:\n  - {entry}\n")
    with pytest.raises(ValueError, match=str(registry)) as err:
        load_topics(registry)
    assert message in str(err.value)


def test_an_empty_registry_fails(tmp_path: Path) -> None:
    registry = tmp_path / "topics.yml"
    registry.write_text("topics: []\n")
    with pytest.raises(ValueError, match="no topics declared"):
        load_topics(registry)


def _sources() -> list[dict]:
    return [
        source for path in SOURCE_FILES for source in yaml.safe_load(path.read_text())["sources"]
    ]


def _path_sources() -> list[dict]:
    """The sources whose tables the ingestion job writes by path (meta.path_root)."""
    return [s for s in _sources() if ((s.get("config") or {}).get("meta") or {}).get("path_root")]


def test_every_topic_table_is_a_bronze_source_of_a_system_and_nothing_else_is() -> None:
    declared = {
        (source["schema"], table["name"])
        for source in _path_sources()
        for table in source["tables"]
    }
    expected = {("bronze", t.table) for t in load_topics()}
    expected |= {("bronze", "dead_letter"), ("ops", "ingestion_batches")}
    assert declared == expected
    systems = {
        source["name"]
        for source in _path_sources()
        if any(table["name"] in {t.table for t in load_topics()} for table in source["tables"])
    }
    assert systems == {"blog"}


def _declared_columns() -> dict[str, list[str]]:
    return {
        f"{source['schema']}.{table['name']}": [c["name"] for c in table.get("columns", [])]
        for source in _path_sources()
        for table in source["tables"]
    }


def test_dbt_sources_declare_exactly_the_columns_ingestion_writes() -> None:
    declared = _declared_columns()
    expected = {f"bronze.{t.table}": BRONZE_SCHEMA.fieldNames() for t in load_topics()}
    expected["bronze.dead_letter"] = DEAD_LETTER_SCHEMA.fieldNames()
    expected["ops.ingestion_batches"] = BATCH_SCHEMA.fieldNames()
    assert declared == expected


def test_dbt_registers_each_table_where_ingestion_writes_it(lakehouse_home: Path) -> None:
    roots = {s["schema"]: s["config"]["meta"]["path_root"] for s in _path_sources()}
    registered = {
        f"{schema}.{t.table}": lakehouse_home / roots[schema] / t.table
        for schema in ("bronze",)
        for t in load_topics()
    }
    registered["bronze.dead_letter"] = lakehouse_home / roots["bronze"] / "dead_letter"
    registered["ops.ingestion_batches"] = lakehouse_home / roots["ops"] / "ingestion_batches"
    assert {k: str(v) for k, v in registered.items()} == {
        **{f"bronze.{t.table}": str(t.bronze_path) for t in load_topics()},
        "bronze.dead_letter": dead_letter_path(),
        "ops.ingestion_batches": batches_path(),
    }
