"""The topic registry comes from dbt's Bronze source definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from python_jobs.topics import load_topics


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
