"""The topic registry, read from dbt's Bronze source definitions.

`models/staging/blog/_blog__sources.yml` declares every Bronze table with its topic,
kind and key in `config.meta`; this module reads that file so the Python layer and dbt
share one declaration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from python_jobs.spark import REPO_ROOT, paths

SOURCES_FILE = REPO_ROOT / "models" / "staging" / "blog" / "_blog__sources.yml"
KINDS = ("cdc", "events")
# Bronze tables that are not topics: written by the ingestion job for every topic.
SHARED_KINDS = ("dead_letter",)


@dataclass(frozen=True)
class Topic:
    """One topic of the landing zone (or Kafka) and the Bronze table it feeds."""

    topic: str
    kind: str
    key: tuple[str, ...]
    table: str

    @property
    def bronze_path(self) -> Path:
        return paths()["bronze"] / self.table

    def landing_dir(self, landing: Path) -> Path:
        return landing / self.topic


def load_topics(sources_file: Path = SOURCES_FILE) -> list[Topic]:
    """Every Bronze table declared in the dbt source `bronze`, in declaration order."""
    doc = yaml.safe_load(sources_file.read_text())
    topics: list[Topic] = []
    for source in doc["sources"]:
        if source["name"] != "bronze":
            continue
        for table in source["tables"]:
            meta = (table.get("config") or {}).get("meta") or {}
            if meta.get("kind") in SHARED_KINDS:
                continue
            missing = [k for k in ("topic", "kind", "key") if k not in meta]
            if missing:
                raise ValueError(
                    f"{sources_file}: bronze table {table['name']!r} lacks meta {missing}"
                )
            if meta["kind"] not in KINDS:
                raise ValueError(
                    f"{sources_file}: bronze table {table['name']!r} has kind "
                    f"{meta['kind']!r}; expected one of {KINDS}"
                )
            topics.append(
                Topic(
                    topic=meta["topic"],
                    kind=meta["kind"],
                    key=tuple(meta["key"]),
                    table=table["name"],
                )
            )
    if not topics:
        raise ValueError(f"{sources_file}: no bronze tables declared")
    return topics
