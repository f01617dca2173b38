"""The topic registry comes from dbt's Bronze source definitions."""

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
from python_jobs.topics import SOURCES_FILE, load_topics


def test_registry_lists_the_contract_topics() -> None:
    got = [(t.topic, t.kind, t.key, t.table) for t in load_topics()]
    assert got == [
        ("blog.public.users", "cdc", ("user_id",), "blog_public_users"),
        ("blog.public.articles", "cdc", ("article_id",), "blog_public_articles"),
        ("blog.visits", "events", ("visit_id",), "blog_visits"),
    ]


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ("{topic: a.b, kind: cdc}", "lacks meta ['key']"),
        ("{topic: a.b, kind: stream, key: [id]}", "has kind 'stream'"),
    ],
)
def test_a_bad_declaration_fails_with_the_table_named(
    tmp_path: Path, meta: str, message: str
) -> None:
    sources = tmp_path / "_sources.yml"
    sources.write_text(
        "version: 2\nsources:\n  - name: bronze\n    tables:\n"
        f"      - name: a_b\n        config:\n          meta: {meta}\n"
    )
    with pytest.raises(ValueError, match=r"bronze table 'a_b'") as err:
        load_topics(sources)
    assert message in str(err.value)


def _declared_columns() -> dict[str, list[str]]:
    doc = yaml.safe_load(SOURCES_FILE.read_text())
    return {
        f"{source['schema']}.{table['name']}": [c["name"] for c in table.get("columns", [])]
        for source in doc["sources"]
        for table in source["tables"]
    }


def test_dbt_sources_declare_exactly_the_columns_ingestion_writes() -> None:
    declared = _declared_columns()
    expected = {f"bronze.{t.table}": BRONZE_SCHEMA.fieldNames() for t in load_topics()}
    expected["bronze.dead_letter"] = DEAD_LETTER_SCHEMA.fieldNames()
    expected["ops.ingestion_batches"] = BATCH_SCHEMA.fieldNames()
    assert declared == expected


def test_dbt_registers_each_table_where_ingestion_writes_it(lakehouse_home: Path) -> None:
    doc = yaml.safe_load(SOURCES_FILE.read_text())
    roots = {s["schema"]: s["config"]["meta"]["path_root"] for s in doc["sources"]}
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
