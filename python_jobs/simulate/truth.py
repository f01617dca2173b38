"""The ground truth: what a correct pipeline must produce from the landing zone.

Built from the simulator's own model while it generates (commit order, labels), and
written beside the landing zone as JSON Lines sorted deterministically. Values are plain
JSON: ints, ``YYYY-MM-DD HH:MM:SS.ffffff`` strings for timestamps (UTC), strings with the
declared scale for decimals (``"123.40"``), null.

Files (in the truth dir):

- ``users_final.jsonl``, ``articles_final.jsonl``: one row per live key, all columns.
- ``users_history.jsonl``, ``articles_history.jsonl``: every version of every key with
  ``valid_from``, ``valid_to`` (null while current) and ``is_current``.
- ``visits_valid.jsonl``, ``visits_stats.json``: the valid visits (one per visit_id) and
  the counts of the contract's visits filters.
- ``devices_loads.json``, ``devices_history.jsonl``: the full loads and their SCD2 view.

On ``--resume`` the trackers load the previous truth files and continue from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from python_jobs.simulate.debezium import dumps
from python_jobs.simulate.jsonfmt import compile_formatter
from python_jobs.simulate.model import Column, Row, TableSpec
from python_jobs.simulate.visits import COLUMNS as VISIT_COLUMNS
from python_jobs.simulate.visits import FILTERS, MALFORMED, VALID, VisitUnit
from python_jobs.simulate.writer import atomic_write, lines_bytes

TRUTH_FILES = (
    "users_final.jsonl",
    "users_history.jsonl",
    "articles_final.jsonl",
    "articles_history.jsonl",
    "visits_valid.jsonl",
    "visits_stats.json",
    "devices_loads.json",
    "devices_history.jsonl",
    "manifest.json",
    "state.json",
)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines file (empty list if the file is empty)."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """JSON Lines from serialised lines, atomically."""
    atomic_write(path, lines_bytes(lines), path.parent)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    write_lines(path, (dumps(row) for row in rows))


def write_json(path: Path, value: Any, indent: int | None = 2) -> None:
    if indent is None:
        text = dumps(value) + "\n"
    else:
        text = json.dumps(value, indent=indent, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"), path.parent)


def truth_kind(column: Column) -> str:
    """How a column's value is written in the truth (see :mod:`jsonfmt`)."""
    if column.kind == "timestamp":
        return "timestamp_text"
    if column.kind == "decimal":
        return f"decimal_text:{column.scale}"
    return "int" if column.kind == "int64" else "str"


class CdcTruth:
    """Final state and SCD2 history of one CDC table, in commit order.

    Versions are kept as the JSON text of their business columns (all columns, late
    ones null where absent), formatted when the change happens: a million versions
    take a fraction of the memory of dicts and are written without re-encoding.
    """

    def __init__(self, table: TableSpec) -> None:
        self.table = table
        self._names = table.column_names
        self._format = compile_formatter([(c.name, truth_kind(c)) for c in table.all_columns])
        # key -> versions [business row JSON, valid_from, valid_to]
        self.versions: dict[int, list[list[Any]]] = {}

    def open(self, key: int, row: Row, commit_text: str) -> None:
        """A snapshot read, insert or update: closes the current version, opens one."""
        version = [self._format(row), commit_text, None]
        versions = self.versions.get(key)
        if versions is None:
            self.versions[key] = [version]
            return
        current = versions[-1]
        if current[2] is None:
            current[2] = commit_text
        versions.append(version)

    def close(self, key: int, commit_text: str) -> None:
        """A delete: the current version ends at the delete's commit time."""
        current = self.versions[key][-1]
        if current[2] is not None:
            raise ValueError(f"{self.table.name} key {key} deleted while not live")
        current[2] = commit_text

    def final_lines(self) -> list[str]:
        return [
            versions[-1][0]
            for _, versions in sorted(self.versions.items())
            if versions[-1][2] is None
        ]

    def history_lines(self) -> list[str]:
        """Every version: business columns, ``valid_from``, ``valid_to``, ``is_current``."""
        lines = []
        append = lines.append
        for _, versions in sorted(self.versions.items()):
            for business, valid_from, valid_to in versions:
                if valid_to is None:
                    closing = f',"valid_from":"{valid_from}","valid_to":null,"is_current":true}}'
                else:
                    closing = (
                        f',"valid_from":"{valid_from}","valid_to":"{valid_to}","is_current":false}}'
                    )
                append(business[:-1] + closing)
        return lines

    def final_rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.final_lines()]

    def history_rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.history_lines()]

    def load(self, history_path: Path) -> None:
        """Continue from a written history (``--resume``)."""
        key = self.table.key
        names = self._names
        for row in read_jsonl(history_path):
            business = dumps({name: row.get(name) for name in names})
            version = [business, row["valid_from"], row["valid_to"]]
            self.versions.setdefault(row[key], []).append(version)

    def write(self, truth_dir: Path) -> None:
        name = self.table.name
        write_lines(truth_dir / f"{name}_final.jsonl", self.final_lines())
        write_lines(truth_dir / f"{name}_history.jsonl", self.history_lines())


def empty_visit_stats() -> dict[str, Any]:
    return {
        "lines": 0,
        "malformed_lines": 0,
        "rows": 0,
        "filters": [{"filter_name": name, "rejected_rows": 0} for name in FILTERS],
        "valid_rows": 0,
        "duplicate_rows": 0,
        "distinct_valid_rows": 0,
    }


class VisitsTruth:
    """Valid visits and filter counts, over every delivered copy of every line.

    ``lines``: lines delivered; ``malformed_lines``: lines that are not JSON;
    ``rows``: the rest, which the filters see (duplicates included); ``filters``: rows
    rejected per filter in the contract's order (first failing filter wins);
    ``valid_rows``: rows that passed; ``duplicate_rows``: passed rows that are a later
    copy of an earlier visit_id; ``distinct_valid_rows``: rows in ``visits_valid``.
    """

    def __init__(self) -> None:
        self.valid: dict[str, dict[str, Any]] = {}
        self.lines = 0
        self.malformed = 0
        self.rejected = dict.fromkeys(FILTERS, 0)
        self.valid_rows = 0

    def delivered(self, units: Iterable[VisitUnit]) -> None:
        for unit in units:
            label, row = unit.label, unit.row
            self.lines += 1
            if label == VALID:
                assert row is not None
                self.valid_rows += 1
                self.valid.setdefault(row["visit_id"], row)
            elif label == MALFORMED:
                self.malformed += 1
            else:
                self.rejected[label] += 1

    def stats(self) -> dict[str, Any]:
        stats = empty_visit_stats()
        stats["lines"] = self.lines
        stats["malformed_lines"] = self.malformed
        stats["rows"] = self.lines - self.malformed
        stats["filters"] = [
            {"filter_name": name, "rejected_rows": self.rejected[name]} for name in FILTERS
        ]
        stats["valid_rows"] = self.valid_rows
        stats["duplicate_rows"] = self.valid_rows - len(self.valid)
        stats["distinct_valid_rows"] = len(self.valid)
        return stats

    def load(self, truth_dir: Path) -> None:
        for row in read_jsonl(truth_dir / "visits_valid.jsonl"):
            self.valid[row["visit_id"]] = {name: row[name] for name in VISIT_COLUMNS}
        stats = json.loads((truth_dir / "visits_stats.json").read_text(encoding="utf-8"))
        self.lines = stats["lines"]
        self.malformed = stats["malformed_lines"]
        self.rejected = {f["filter_name"]: f["rejected_rows"] for f in stats["filters"]}
        self.valid_rows = stats["valid_rows"]

    def write(self, truth_dir: Path) -> None:
        write_jsonl(truth_dir / "visits_valid.jsonl", (self.valid[k] for k in sorted(self.valid)))
        write_json(truth_dir / "visits_stats.json", self.stats())


def devices_history(loads: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
    """SCD2 over the full loads, per (type, version).

    A version opens at the load date where the device appeared or its ``full_name``
    changed, and closes at the load date where it changed or was missing.
    """
    open_versions: dict[tuple[str, str], dict[str, Any]] = {}
    closed: list[dict[str, Any]] = []
    for load_date in sorted(loads):
        seen: dict[tuple[str, str], str] = {
            (row["type"], row["version"]): row["full_name"] for row in loads[load_date]
        }
        for key in sorted(open_versions):
            if seen.get(key) != open_versions[key]["full_name"]:
                version = open_versions.pop(key)
                version["valid_to"] = load_date
                version["is_current"] = False
                closed.append(version)
        for key, name in sorted(seen.items()):
            if key not in open_versions:
                open_versions[key] = {
                    "type": key[0],
                    "version": key[1],
                    "full_name": name,
                    "valid_from": load_date,
                    "valid_to": None,
                    "is_current": True,
                }
    rows = closed + list(open_versions.values())
    rows.sort(key=lambda r: (r["type"], r["version"], r["valid_from"]))
    return rows


class DevicesTruth:
    """The devices full loads (date -> rows) and their SCD2 history."""

    def __init__(self) -> None:
        self.loads: dict[str, list[dict[str, str]]] = {}

    def add(self, load_date: str, rows: list[dict[str, str]]) -> None:
        self.loads[load_date] = rows

    def load(self, truth_dir: Path) -> None:
        text = (truth_dir / "devices_loads.json").read_text(encoding="utf-8")
        self.loads = json.loads(text)

    def write(self, truth_dir: Path) -> None:
        write_json(truth_dir / "devices_loads.json", {d: self.loads[d] for d in sorted(self.loads)})
        write_jsonl(truth_dir / "devices_history.jsonl", devices_history(self.loads))
