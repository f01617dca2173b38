"""The ``blog.visits`` event stream: page views, some late, some invalid.

Every record is labelled with what a correct pipeline must do with it: ``valid``, one of
the contract's visits filters (section 4, in order), or ``malformed_json`` (a line that
is not JSON at all: a dead letter in Bronze that never reaches the filters). An invalid
record breaks exactly one thing, so the label is also the first filter it fails.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from typing import Any

from python_jobs.simulate.debezium import dumps
from python_jobs.simulate.encoding import DAY_MS, format_millis, iso_millis
from python_jobs.simulate.model import KeyPool

VALID = "valid"
MALFORMED = "malformed_json"
FILTERS = (
    "missing_visit_id",
    "unparseable_event_time",
    "future_event_time",
    "missing_page",
    "unsupported_device",
)
INVALID_KINDS = (MALFORMED, *FILTERS)
COLUMNS = (
    "visit_id",
    "event_time",
    "user_id",
    "article_id",
    "page",
    "device_type",
    "device_version",
    "referrer",
)

DEVICE_TYPE_BAG = ("desktop",) * 9 + ("mobile",) * 9 + ("tablet",) * 2
REFERRERS = (
    "https://www.google.com/",
    "https://news.ycombinator.com/",
    "https://www.linkedin.com/",
    "https://duckduckgo.com/",
    "https://t.co/",
)
OTHER_PAGES = ("/", "/search", "/pricing", "/about")
UNPARSEABLE_TIMES = (
    "yesterday",
    "not-a-timestamp",
    "",
    "2024-10-32T25:61:00Z",
    "31/10/2024 08:15:00",
    None,
)
UNSUPPORTED_DEVICES = ("tv", "smartwatch", "console", None)
GARBAGE_LINES = (
    "<html><body><h1>502 Bad Gateway</h1></body></html>",
    "visit_id=7d1e&page=/&device_type=mobile",
    "{{not json}}",
)
HOUR_MS = 3_600_000


@dataclass(slots=True)
class VisitUnit:
    """One visit line and what a correct pipeline must do with it."""

    text: str
    label: str  # VALID, MALFORMED or the filter it fails
    row: dict[str, Any] | None = None  # the typed truth row of a valid visit


class VisitGenerator:
    """Makes the visits of one delivery window."""

    def __init__(self, rng: random.Random, late_rate: float, malformed_rate: float) -> None:
        self.rng = rng
        self.late_rate = late_rate
        self.malformed_rate = malformed_rate

    def window(
        self,
        start_ms: int,
        end_ms: int,
        count: int,
        users: KeyPool,
        articles: KeyPool,
        devices: dict[str, list[str]],
    ) -> list[VisitUnit]:
        """``count`` visits arriving in ``[start_ms, end_ms)``, in arrival order."""
        rng = self.rng
        arrivals = sorted(rng.randrange(start_ms, end_ms) for _ in range(count))
        units: list[VisitUnit] = []
        for arrival in arrivals:
            event_ms = arrival
            if self.late_rate and rng.random() < self.late_rate:
                event_ms = start_ms - rng.randrange(HOUR_MS, 3 * DAY_MS)
            record = self._record(event_ms, users, articles, devices)
            label = VALID
            if self.malformed_rate and rng.random() < self.malformed_rate:
                label = INVALID_KINDS[rng.randrange(len(INVALID_KINDS))]
            if label == VALID:
                row = dict(record)
                row["event_time"] = format_millis(event_ms)
                units.append(VisitUnit(dumps(record), VALID, row))
            elif label == MALFORMED:
                units.append(VisitUnit(self._malformed(dumps(record)), label))
            else:
                self._break(record, label)
                units.append(VisitUnit(dumps(record), label))
        return units

    def _record(
        self,
        event_ms: int,
        users: KeyPool,
        articles: KeyPool,
        devices: dict[str, list[str]],
    ) -> dict[str, Any]:
        rng = self.rng
        article = articles.choice(rng) if articles else 1 + rng.randrange(100)
        draw = rng.random()
        page = f"/articles/{article}" if draw < 0.85 else rng.choice(OTHER_PAGES)
        device_type = rng.choice(DEVICE_TYPE_BAG)
        versions = devices.get(device_type) or ["unknown"]
        return {
            "visit_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "event_time": iso_millis(event_ms),
            "user_id": None if not users or rng.random() < 0.35 else users.choice(rng),
            "article_id": article,
            "page": page,
            "device_type": device_type,
            "device_version": versions[rng.randrange(len(versions))],
            "referrer": None if rng.random() < 0.4 else rng.choice(REFERRERS),
        }

    def _break(self, record: dict[str, Any], label: str) -> None:
        """Make ``record`` fail exactly the filter ``label`` (and none before it)."""
        rng = self.rng
        if label == "missing_visit_id":
            how = rng.randrange(3)
            if how == 0:
                del record["visit_id"]
            else:
                record["visit_id"] = None if how == 1 else ""
        elif label == "unparseable_event_time":
            record["event_time"] = rng.choice(UNPARSEABLE_TIMES)
        elif label == "future_event_time":
            record["event_time"] = (
                f"2099-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
                f"T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00.000Z"
            )
        elif label == "missing_page":
            how = rng.randrange(3)
            if how == 0:
                del record["page"]
            else:
                record["page"] = None if how == 1 else ""
        elif label == "unsupported_device":
            record["device_type"] = rng.choice(UNSUPPORTED_DEVICES)
        else:
            raise ValueError(f"unknown invalid kind {label!r}")

    def _malformed(self, line: str) -> str:
        """A line no JSON parser accepts: a truncated record or plain garbage."""
        rng = self.rng
        if rng.random() < 0.3:
            text = rng.choice(GARBAGE_LINES)
        else:
            text = line[: rng.randrange(1, len(line) - 1)]
        try:
            json.loads(text)
        except ValueError:
            return text
        raise AssertionError(f"malformed visit line parses as JSON: {text!r}")
