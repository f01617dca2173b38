"""The topic registry: `topics.yml` at the repository root.

Each entry names a topic, its kind (`cdc` or `events`), the key of its records, the
Bronze table it feeds and the format of its records: `json` (JSON lines: Debezium
envelopes, or event objects; the default), or `dms-csv` / `dms-parquet` (AWS DMS
change files, laid out as the entry's `dms:` block says: python_jobs/dms.py). The
ingestion job, the report and the benchmarks read it from here; dbt declares the same
tables as sources of their system (source `blog`, schema `bronze`), which
tests/python_jobs/test_topics.py checks against this registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from python_jobs.spark import REPO_ROOT, paths

if TYPE_CHECKING:
    from python_jobs.dms import DmsLayout

REGISTRY_FILE = REPO_ROOT / "topics.yml"
# Where dbt declares the Bronze tables of the blog system (and their freshness).
BLOG_SOURCES_FILE = REPO_ROOT / "models" / "staging" / "blog" / "_blog__sources.yml"
KINDS = ("cdc", "events")
FORMATS = ("json", "dms-csv", "dms-parquet")
# Bronze tables that are not topics: written by the ingestion job for every topic.
SHARED_TABLES = ("dead_letter",)


@dataclass(frozen=True)
class Topic:
    """One topic of the landing zone (or Kafka) and the Bronze table it feeds."""

    topic: str
    kind: str
    key: tuple[str, ...]
    table: str
    format: str = "json"
    dms: DmsLayout | None = None

    @property
    def bronze_path(self) -> Path:
        return paths()["bronze"] / self.table

    def landing_dir(self, landing: Path) -> Path:
        return landing / self.topic


def load_topics(registry_file: Path = REGISTRY_FILE) -> list[Topic]:
    """Every topic of the registry, in declaration order."""
    doc = yaml.safe_load(registry_file.read_text()) or {}
    topics: list[Topic] = []
    for entry in doc.get("topics") or []:
        name = entry.get("topic") or entry.get("table")
        missing = [k for k in ("topic", "kind", "key", "table") if not entry.get(k)]
        if missing:
            raise ValueError(f"{registry_file}: topic {name!r} lacks {missing}")
        if entry["kind"] not in KINDS:
            raise ValueError(
                f"{registry_file}: topic {name!r} has kind {entry['kind']!r}; "
                f"expected one of {KINDS}"
            )
        if entry["table"] in SHARED_TABLES:
            raise ValueError(
                f"{registry_file}: topic {name!r} cannot feed {entry['table']!r}, "
                "the ingestion job's own table"
            )
        topics.append(
            Topic(
                topic=entry["topic"],
                kind=entry["kind"],
                key=tuple(entry["key"]),
                table=entry["table"],
                **_format(entry, f"{registry_file}: topic {name!r}"),
            )
        )
    if not topics:
        raise ValueError(f"{registry_file}: no topics declared")
    tables = [t.table for t in topics]
    for field, values in (("topic", [t.topic for t in topics]), ("table", tables)):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"{registry_file}: {field} declared twice: {repeated}")
    return topics


def _format(entry: dict, where: str) -> dict:
    """The entry's `format` and, for a DMS format, its `dms:` layout."""
    fmt = entry.get("format", "json")
    if fmt not in FORMATS:
        raise ValueError(f"{where} has format {fmt!r}; expected one of {FORMATS}")
    if fmt == "json":
        if "dms" in entry:
            raise ValueError(f"{where}: a `dms:` block needs format dms-csv or dms-parquet")
        return {}
    if entry["kind"] != "cdc":
        raise ValueError(f"{where}: format {fmt} is for kind cdc")
    # Imported here: python_jobs.dms builds on python_jobs.bronze, which imports this.
    from python_jobs.dms import parse_layout

    return {"format": fmt, "dms": parse_layout(entry.get("dms"), tuple(entry["key"]), where)}
