"""Independent replay of a landing zone: what a correct pipeline must produce from it.

A pure-Python reader that knows only the contract (sections 2 to 4), not the
simulator's internals: it reads the files of a topic in name order, parses bare and
wrapped Debezium envelopes, skips tombstones, decodes Debezium's value encodings with
its own code (``datetime``, ``decimal``), and applies the changes. Tests compare its
results with the simulator's ground truth, and later suites can compare a pipeline's
tables with it.

Output rows use the truth's plain-JSON form: ints, timestamps as
``YYYY-MM-DD HH:MM:SS.ffffff`` strings (UTC), decimals as strings with the declared
scale (``"123.40"``), null.

Public functions:

- :func:`replay_cdc` -> ``(final_rows, history_rows)`` of a CDC topic.
- :func:`cdc_delivery_stats` -> lines, tombstones, events, duplicates and out-of-order
  deliveries of a CDC topic.
- :func:`replay_visits` -> ``(valid_rows, stats)`` after the contract's visits filters.
- :func:`replay_devices` -> ``(loads, history_rows)`` of the devices full loads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

# --- what the contract says about the sources -------------------------------------------


@dataclass(frozen=True)
class CdcTable:
    """A CDC topic's key and columns, with the columns that need decoding."""

    key: str
    columns: tuple[str, ...]
    timestamps: frozenset[str]
    decimals: dict[str, int]  # column -> scale


CDC_TABLES: dict[str, CdcTable] = {
    "blog.public.users": CdcTable(
        key="user_id",
        columns=(
            "user_id", "email", "full_name", "country", "plan", "lifetime_value",
            "created_at", "updated_at",
            "preferred_language",  # added by schema drift; null where never set
        ),
        timestamps=frozenset({"created_at", "updated_at"}),
        decimals={"lifetime_value": 2},
    ),
    "blog.public.articles": CdcTable(
        key="article_id",
        columns=(
            "article_id", "author_id", "title", "category", "status", "published_at",
            "updated_at",
        ),
        timestamps=frozenset({"published_at", "updated_at"}),
        decimals={},
    ),
}  # fmt: skip

VISITS_TOPIC = "blog.visits"
VISIT_COLUMNS = (
    "visit_id", "event_time", "user_id", "article_id", "page", "device_type",
    "device_version", "referrer",
)  # fmt: skip
VISIT_FILTERS = (
    "missing_visit_id",
    "unparseable_event_time",
    "future_event_time",
    "missing_page",
    "unsupported_device",
)
SUPPORTED_DEVICE_TYPES = frozenset({"desktop", "mobile", "tablet"})
FUTURE_TOLERANCE = timedelta(minutes=5)
DEVICES_DIR = Path("reference") / "devices"
_EPOCH = datetime(1970, 1, 1)
_TEXT_FORMAT = "%Y-%m-%d %H:%M:%S.%f"

# --- reading files ---------------------------------------------------------------------


def topic_files(landing_dir: Path, topic: str) -> list[Path]:
    """The topic's files in ingestion (name) order; none if the topic has no dir."""
    directory = Path(landing_dir) / topic
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".json")


def iter_lines(landing_dir: Path, topic: str) -> Iterator[tuple[int, str]]:
    """``(file_index, line)`` for every line of the topic, in delivery order.

    A file's final newline ends its last line; it doesn't make an extra empty line.
    """
    for index, path in enumerate(topic_files(landing_dir, topic)):
        text = path.read_text(encoding="utf-8")
        if not text:
            continue
        if text.endswith("\n"):
            text = text[:-1]
        for line in text.split("\n"):
            yield index, line


def is_tombstone(line: str) -> bool:
    return line.strip() in ("", "null")


# --- decoding --------------------------------------------------------------------------


def micros_to_text(micros: int) -> str:
    """Debezium ``MicroTimestamp`` (epoch microseconds) -> ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    return (_EPOCH + timedelta(microseconds=micros)).strftime(_TEXT_FORMAT)


def millis_to_text(millis: int) -> str:
    return micros_to_text(millis * 1000)


def decimal_to_text(encoded: str, scale: int) -> str:
    """Connect ``Decimal`` (base64 big-endian two's complement) -> ``"123.40"``."""
    unscaled = int.from_bytes(base64.b64decode(encoded), byteorder="big", signed=True)
    return f"{Decimal(unscaled).scaleb(-scale):.{scale}f}"


def _decode_row(table: CdcTable, image: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name in table.columns:
        value = image.get(name)
        if value is not None:
            if name in table.timestamps:
                value = micros_to_text(value)
            elif name in table.decimals:
                value = decimal_to_text(value, table.decimals[name])
        row[name] = value
    return row


# --- CDC -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CdcEvent:
    """One change event as delivered (tombstones excluded)."""

    position: int  # delivery order across the topic's files
    file_index: int
    key: int
    op: str
    lsn: int
    ts_ms: int  # source commit time
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def _envelope(record: Any) -> dict[str, Any] | None:
    """The Debezium envelope of a parsed line, bare or wrapped; None for a tombstone."""
    if isinstance(record, dict) and "payload" in record and "schema" in record:
        record = record["payload"]
    if record is None:
        return None
    if not isinstance(record, dict) or "op" not in record:
        raise ValueError(f"not a Debezium envelope: {str(record)[:200]}")
    return record


def read_cdc_events(landing_dir: Path, topic: str) -> list[CdcEvent]:
    """Every change event of a CDC topic in delivery order (duplicates included)."""
    table = CDC_TABLES[topic]
    events: list[CdcEvent] = []
    for file_index, line in iter_lines(landing_dir, topic):
        if is_tombstone(line):
            continue
        envelope = _envelope(json.loads(line))
        if envelope is None:
            continue
        op = envelope["op"]
        if op == "t":
            raise ValueError(f"{topic}: truncate events are not supported by this replay")
        image = envelope["before"] if op == "d" else envelope["after"]
        source = envelope["source"]
        events.append(
            CdcEvent(
                position=len(events),
                file_index=file_index,
                key=image[table.key],
                op=op,
                lsn=int(source["lsn"]),
                ts_ms=int(source["ts_ms"]),
                before=envelope.get("before"),
                after=envelope.get("after"),
            )
        )
    return events


def replay_cdc(landing_dir: Path, topic: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Final state and SCD2 history of a CDC topic.

    Duplicates (same key and LSN) are dropped, keeping the first delivered copy; each
    key's changes are applied in ``source.lsn`` order, ties broken by delivery order.
    ``r``/``c``/``u`` close the key's open version (if any) at the change's commit time
    (``source.ts_ms``) and open a new one; ``d`` closes it.

    Returns ``final_rows`` (one per live key, sorted by key) and ``history_rows`` (every
    version with ``valid_from``, ``valid_to`` (null while current) and ``is_current``,
    sorted by key and ``valid_from``).
    """
    table = CDC_TABLES[topic]
    by_key: dict[int, list[CdcEvent]] = {}
    seen: set[tuple[int, int]] = set()
    for event in read_cdc_events(landing_dir, topic):
        identity = (event.key, event.lsn)
        if identity in seen:
            continue
        seen.add(identity)
        by_key.setdefault(event.key, []).append(event)
    final: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for key in sorted(by_key):
        versions: list[dict[str, Any]] = []
        current: dict[str, Any] | None = None
        for event in sorted(by_key[key], key=lambda e: (e.lsn, e.position)):
            at = millis_to_text(event.ts_ms)
            if current is not None:
                current["valid_to"] = at
                current["is_current"] = False
                current = None
            if event.op in ("r", "c", "u"):
                current = _decode_row(table, event.after or {})
                current.update(valid_from=at, valid_to=None, is_current=True)
                versions.append(current)
            elif event.op != "d":
                raise ValueError(f"{topic}: unknown op {event.op!r}")
        history.extend(versions)
        if current is not None:
            final.append({name: current[name] for name in table.columns})
    return final, history


def cdc_delivery_stats(landing_dir: Path, topic: str) -> dict[str, int]:
    """How a CDC topic was delivered.

    ``lines`` (all), ``tombstones`` (``null`` or empty lines), ``events`` (distinct
    changes), ``duplicates`` (extra copies of a change), ``out_of_order`` (changes
    delivered in a later file than a change with a higher LSN, i.e. after it), and
    ``wrapped`` (lines with the schema envelope).
    """
    lines = tombstones = wrapped = 0
    for _, line in iter_lines(landing_dir, topic):
        lines += 1
        if is_tombstone(line):
            tombstones += 1
        elif line.startswith('{"schema"'):
            wrapped += 1
    events = read_cdc_events(landing_dir, topic)
    distinct: set[tuple[int, int]] = set()
    duplicates = out_of_order = 0
    max_lsn_before_file = -1
    current_file = -1
    max_lsn_in_file = -1
    for event in events:
        if event.file_index != current_file:
            max_lsn_before_file = max(max_lsn_before_file, max_lsn_in_file)
            current_file, max_lsn_in_file = event.file_index, -1
        identity = (event.key, event.lsn)
        if identity in distinct:
            duplicates += 1
        else:
            distinct.add(identity)
            if event.lsn < max_lsn_before_file:
                out_of_order += 1
        max_lsn_in_file = max(max_lsn_in_file, event.lsn)
    return {
        "lines": lines,
        "tombstones": tombstones,
        "wrapped": wrapped,
        "events": len(distinct),
        "duplicates": duplicates,
        "out_of_order": out_of_order,
    }


# --- visits ----------------------------------------------------------------------------


def parse_event_time(value: Any) -> datetime | None:
    """An ISO-8601 ``event_time`` as an aware UTC datetime; None if not parseable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def visit_filter(record: dict[str, Any], now: datetime) -> str | None:
    """The first visits filter ``record`` fails (contract order), or None if valid.

    ``now`` is the ingestion time: an event_time more than 5 minutes after it is in the
    future. A missing field counts as null; null fails the filter.
    """
    if record.get("visit_id") in (None, ""):
        return "missing_visit_id"
    event_time = parse_event_time(record.get("event_time"))
    if event_time is None:
        return "unparseable_event_time"
    if event_time > now + FUTURE_TOLERANCE:
        return "future_event_time"
    if record.get("page") in (None, ""):
        return "missing_page"
    if record.get("device_type") not in SUPPORTED_DEVICE_TYPES:
        return "unsupported_device"
    return None


def replay_visits(
    landing_dir: Path, now: datetime | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Valid visits (one per visit_id, first delivered copy) and the filter counts.

    ``now`` (default: the current time) is the ingestion time the future filter compares
    with. ``stats``: ``lines`` read, ``malformed_lines`` (not a JSON object: dead
    letters), ``rows`` the filters saw, ``filters`` (rejected rows per filter in order),
    ``valid_rows``, ``duplicate_rows`` (valid rows dropped as later copies) and
    ``distinct_valid_rows``. Valid rows are sorted by visit_id, event_time as text.
    """
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    lines = malformed = valid_rows = 0
    rejected = dict.fromkeys(VISIT_FILTERS, 0)
    valid: dict[str, dict[str, Any]] = {}
    for _, line in iter_lines(landing_dir, VISITS_TOPIC):
        lines += 1
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            malformed += 1
            continue
        failed = visit_filter(record, now)
        if failed is not None:
            rejected[failed] += 1
            continue
        valid_rows += 1
        if record["visit_id"] in valid:
            continue
        row = {name: record.get(name) for name in VISIT_COLUMNS}
        event_time = parse_event_time(record["event_time"])
        assert event_time is not None
        row["event_time"] = event_time.strftime(_TEXT_FORMAT)
        valid[record["visit_id"]] = row
    stats = {
        "lines": lines,
        "malformed_lines": malformed,
        "rows": lines - malformed,
        "filters": [
            {"filter_name": name, "rejected_rows": rejected[name]} for name in VISIT_FILTERS
        ],
        "valid_rows": valid_rows,
        "duplicate_rows": valid_rows - len(valid),
        "distinct_valid_rows": len(valid),
    }
    return [valid[k] for k in sorted(valid)], stats


# --- devices ---------------------------------------------------------------------------


def replay_devices(
    landing_dir: Path,
) -> tuple[dict[str, list[dict[str, str]]], list[dict[str, Any]]]:
    """The devices full loads (load date -> rows) and their history per (type, version).

    A version opens at the load where the device appears or its ``full_name`` differs
    from the open version's, and closes (``valid_to`` = that load's date) at the load
    where it changes or is missing. Rows sorted by type, version, valid_from.
    """
    root = Path(landing_dir) / DEVICES_DIR
    loads: dict[str, list[dict[str, str]]] = {}
    if root.is_dir():
        for directory in sorted(p for p in root.iterdir() if p.is_dir()):
            rows: list[dict[str, str]] = []
            for path in sorted(directory.glob("*.json")):
                text = path.read_text(encoding="utf-8")
                rows.extend(json.loads(line) for line in text.splitlines() if line.strip())
            loads[directory.name] = sorted(rows, key=lambda r: (r["type"], r["version"]))
    history: list[dict[str, Any]] = []
    open_by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for load_date, rows in loads.items():
        names = {(r["type"], r["version"]): r["full_name"] for r in rows}
        for key, version in list(open_by_key.items()):
            if names.get(key) != version["full_name"]:
                version.update(valid_to=load_date, is_current=False)
                del open_by_key[key]
        for key, name in names.items():
            if key not in open_by_key:
                version = {
                    "type": key[0],
                    "version": key[1],
                    "full_name": name,
                    "valid_from": load_date,
                    "valid_to": None,
                    "is_current": True,
                }
                open_by_key[key] = version
                history.append(version)
    history.sort(key=lambda r: (r["type"], r["version"], r["valid_from"]))
    return loads, history
