"""The workload simulator: truth == independent replay, determinism, encodings, resume.

No Spark: the simulator and its replay are pure Python. Each simulation here is small
(well under a second).
"""

from __future__ import annotations

import base64
import json
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from python_jobs.simulate import cli, replay
from python_jobs.simulate.encoding import (
    decode_decimal,
    encode_decimal,
    format_decimal,
    format_micros,
    iso_millis,
)
from python_jobs.simulate.jsonfmt import compile_formatter
from python_jobs.simulate.runner import SimOptions, simulate
from python_jobs.simulate.truth import read_jsonl

USERS = "blog.public.users"
ARTICLES = "blog.public.articles"
VISITS = "blog.visits"
CDC = {USERS: "users", ARTICLES: "articles"}
SMALL = {"users": 60, "articles": 30, "days": 3, "changes_per_day": 200, "visits_per_day": 300}
FILE_NAME = re.compile(r"^\d{6}-\d{4}-\d{2}-\d{2}\.json$")


# --- helpers ---------------------------------------------------------------------------


def run_sim(base: Path, **overrides: Any) -> tuple[Path, Path]:
    """Simulate into ``base/landing`` and ``base/truth``; returns both paths."""
    values: dict[str, Any] = {**SMALL, **overrides}
    options = SimOptions(
        landing_dir=base / "landing", truth_dir=base / "truth", quiet=True, **values
    )
    simulate(options, progress_stream=None)
    return base / "landing", base / "truth"


def run_cli(base: Path, *args: str) -> int:
    argv = ["--landing-dir", str(base / "landing"), "--truth-dir", str(base / "truth")]
    return cli.main([*argv, "--quiet", *args])


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def envelopes(landing: Path, topic: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(file index, bare envelope) of every non-tombstone line, in delivery order."""
    for index, line in replay.iter_lines(landing, topic):
        if line in ("", "null"):
            continue
        record = json.loads(line)
        yield index, record.get("payload", record) if "schema" in record else record


def distinct_events(landing: Path, topic: str) -> list[dict[str, Any]]:
    """Each change once (first delivered copy), in LSN order."""
    key = replay.CDC_TABLES[topic].key
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    for _, env in envelopes(landing, topic):
        image = env["before"] if env["op"] == "d" else env["after"]
        seen.setdefault((image[key], env["source"]["lsn"]), env)
    return sorted(seen.values(), key=lambda e: e["source"]["lsn"])


def assert_replay_matches_truth(landing: Path, truth: Path) -> None:
    for topic, name in CDC.items():
        final, history = replay.replay_cdc(landing, topic)
        assert final == read_jsonl(truth / f"{name}_final.jsonl"), f"{name} final state"
        assert history == read_jsonl(truth / f"{name}_history.jsonl"), f"{name} history"
    valid, stats = replay.replay_visits(landing, datetime.now(UTC))
    assert valid == read_jsonl(truth / "visits_valid.jsonl")
    assert stats == json.loads((truth / "visits_stats.json").read_text())
    loads, history = replay.replay_devices(landing)
    assert loads == json.loads((truth / "devices_loads.json").read_text())
    assert history == read_jsonl(truth / "devices_history.jsonl")


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One run with every default option (seed 42, chaos on)."""
    base = tmp_path_factory.mktemp("default")
    assert run_cli(base) == 0
    return base / "landing", base / "truth"


# --- truth == replay -------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed, overrides",
    [
        (1, {}),
        (7, {"files_per_topic": 3, "delete_rate": 0.15, "reinsert_rate": 0.5}),
        (2024, {"duplicate_rate": 0.3, "out_of_order_rate": 0.3, "malformed_rate": 0.2}),
        (99, {"wrapped_rate": 1.0, "add_column_at": 0.0, "days": 2}),
    ],
)
def test_replay_of_landing_equals_truth(tmp_path: Path, seed: int, overrides: dict) -> None:
    landing, truth = run_sim(tmp_path, seed=seed, **overrides)
    assert_replay_matches_truth(landing, truth)


def test_default_run_replay_equals_truth(default_run: tuple[Path, Path]) -> None:
    assert_replay_matches_truth(*default_run)


def test_clean_stream_has_no_chaos(tmp_path: Path) -> None:
    landing, truth = run_sim(tmp_path, seed=5, chaos=False)
    assert_replay_matches_truth(landing, truth)
    for topic in CDC:
        stats = replay.cdc_delivery_stats(landing, topic)
        assert stats["duplicates"] == stats["out_of_order"] == 0
        assert all(line != "" for _, line in replay.iter_lines(landing, topic))
    _, visit_stats = replay.replay_visits(landing, datetime.now(UTC))
    assert visit_stats["rows"] == visit_stats["valid_rows"] == visit_stats["lines"]
    assert visit_stats["duplicate_rows"] == 0


# --- determinism -----------------------------------------------------------------------


def test_same_seed_gives_byte_identical_trees(tmp_path: Path) -> None:
    run_sim(tmp_path / "a", seed=11)
    run_sim(tmp_path / "b", seed=11)
    run_sim(tmp_path / "c", seed=12)
    a, b, c = (tree(tmp_path / name) for name in "abc")
    assert a == b
    assert len(a) > 20
    assert set(a) == set(c)  # same layout...
    different = [name for name in a if a[name] != c[name]]
    assert len(different) > len(a) // 2  # ...different content


# --- encodings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unscaled, b64, text",
    [
        (128, "AIA=", "1.28"),  # 0x00-prefixed: 0x80 alone would be negative
        (127, "fw==", "1.27"),
        (0, "AA==", "0.00"),
        (-1, "/w==", "-0.01"),
        (-128, "gA==", "-1.28"),
        (-129, "/38=", "-1.29"),
        (32768, "AIAA", "327.68"),
        (12340, "MDQ=", "123.40"),
        (-5, "+w==", "-0.05"),
    ],
)
def test_decimal_encoding(unscaled: int, b64: str, text: str) -> None:
    assert encode_decimal(unscaled) == b64
    assert decode_decimal(b64) == unscaled
    assert format_decimal(unscaled, 2) == text
    assert replay.decimal_to_text(b64, 2) == text


def test_decimal_round_trip_matches_java_semantics() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        value = rng.randrange(-(10**12), 10**12)
        raw = base64.b64decode(encode_decimal(value))
        assert int.from_bytes(raw, "big", signed=True) == value
        # Minimal length: dropping the first byte would change the value.
        if len(raw) > 1:
            assert int.from_bytes(raw[1:], "big", signed=True) != value
        assert replay.decimal_to_text(encode_decimal(value), 2) == format_decimal(value, 2)


def test_micro_timestamps() -> None:
    assert format_micros(0) == "1970-01-01 00:00:00.000000"
    assert format_micros(1727740800000000) == "2024-10-01 00:00:00.000000"
    assert format_micros(1727770530123456) == "2024-10-01 08:15:30.123456"
    assert format_micros(-1) == "1969-12-31 23:59:59.999999"
    assert iso_millis(1727770530123) == "2024-10-01T08:15:30.123Z"
    rng = random.Random(4)
    for _ in range(2000):
        micros = rng.randrange(-(10**15), 4 * 10**15)
        assert format_micros(micros) == replay.micros_to_text(micros)


def test_compiled_formatter_equals_json_dumps() -> None:
    fields = [("id", "int"), ("name", "str"), ("amount", "decimal_b64"), ("at", "timestamp_text")]
    fields.append(("price", "decimal_text:2"))
    formatter = compile_formatter(fields)
    names = ['Zoë "quoted" \\ back', "tab\tnew\nline \u2028 \x01", "Łukasz", "", None]
    for i, name in enumerate(names):
        row = {"id": i - 2, "name": name, "amount": -129 * i, "at": 1727770530123456, "price": i}
        expected = {
            "id": i - 2,
            "name": name,
            "amount": encode_decimal(-129 * i),
            "at": "2024-10-01 08:15:30.123456",
            "price": format_decimal(i, 2),
        }
        text = json.dumps(expected, separators=(",", ":"), ensure_ascii=False)
        assert formatter(row) == text
    assert formatter({}) == '{"id":null,"name":null,"amount":null,"at":null,"price":null}'


def test_cdc_values_use_debezium_encodings(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    final = {row["user_id"]: row for row in read_jsonl(truth / "users_final.jsonl")}
    last_after: dict[int, dict[str, Any]] = {}
    for env in distinct_events(landing, USERS):
        if env["op"] != "d":
            last_after[env["after"]["user_id"]] = env["after"]
    checked = 0
    for user_id, row in final.items():
        after = last_after[user_id]
        assert isinstance(after["created_at"], int) and isinstance(after["updated_at"], int)
        assert format_micros(after["updated_at"]) == row["updated_at"]
        assert format_decimal(decode_decimal(after["lifetime_value"])) == row["lifetime_value"]
        checked += 1
    assert checked > 100
    # UTF-8 as it is, not \u escapes (like the JSON converter).
    text = "".join(p.read_text(encoding="utf-8") for p in replay.topic_files(landing, USERS))
    assert re.search(r"[éöøüłŁ]", text) and "\\u00" not in text


def test_wrapped_envelope_carries_connect_schema(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    wrapped = [
        json.loads(line)
        for _, line in replay.iter_lines(landing, USERS)
        if line.startswith('{"schema"')
    ]
    assert len(wrapped) > 50
    record = wrapped[0]
    schema = record["schema"]
    assert schema["name"] == "blog.public.users.Envelope"
    fields = {f["field"]: f for f in schema["fields"]}
    assert set(fields) == {"before", "after", "source", "op", "ts_ms", "transaction"}
    after = {f["field"]: f for f in fields["after"]["fields"]}
    decimal = after["lifetime_value"]
    assert decimal["type"] == "bytes"
    assert decimal["name"] == "org.apache.kafka.connect.data.Decimal"
    assert decimal["parameters"]["scale"] == "2"
    assert decimal["parameters"]["connect.decimal.precision"] == "12"
    assert after["created_at"]["name"] == "io.debezium.time.MicroTimestamp"
    assert after["created_at"]["type"] == "int64"
    assert after["user_id"] == {"type": "int64", "optional": False, "field": "user_id"}
    assert fields["source"]["name"] == "io.debezium.connector.postgresql.Source"
    payload = record["payload"]
    assert set(payload) == {"before", "after", "source", "op", "ts_ms", "transaction"}
    # The schema's after struct names exactly the payload image's fields.
    image = payload["after"] or payload["before"]
    assert list(after) == list(image)


# --- CDC stream semantics --------------------------------------------------------------


def test_snapshot_comes_first(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    snapshot: list[dict[str, Any]] = []
    for topic in CDC:
        first_file = replay.topic_files(landing, topic)[0]
        first = json.loads(first_file.read_text(encoding="utf-8").split("\n", 1)[0])
        first = first.get("payload", first)
        assert first["op"] == "r" and first["before"] is None
        snapshot += [e for e in distinct_events(landing, topic) if e["op"] == "r"]
    assert len(snapshot) == 200 + 100
    assert len({(e["source"]["lsn"], e["source"]["txId"]) for e in snapshot}) == 1
    markers = [e["source"]["snapshot"] for e in snapshot]
    assert markers.count("first") == 1 and markers.count("last") == 1
    assert set(markers) == {"first", "true", "last"}
    assert json.loads(snapshot[0]["source"]["sequence"])[1] == str(snapshot[0]["source"]["lsn"])
    snapshot_lsn = snapshot[0]["source"]["lsn"]
    for topic in CDC:
        for env in distinct_events(landing, topic):
            if env["op"] != "r":
                assert env["source"]["lsn"] > snapshot_lsn
                assert env["source"]["snapshot"] == "false"


def test_transactions_and_positions(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    events = sorted(
        (e for topic in CDC for e in distinct_events(landing, topic) if e["op"] != "r"),
        key=lambda e: e["source"]["lsn"],
    )
    lsns = [e["source"]["lsn"] for e in events]
    assert len(set(lsns)) == len(lsns) and lsns[0] > 2 * 10**7
    tx_ids = [e["source"]["txId"] for e in events]
    assert tx_ids == sorted(tx_ids), "txId grows with the LSN"
    commit_by_tx: dict[int, int] = {}
    keys_in_tx: set[tuple[int, str, int]] = set()
    for env in events:
        source = env["source"]
        assert commit_by_tx.setdefault(source["txId"], source["ts_ms"]) == source["ts_ms"]
        assert env["ts_ms"] >= source["ts_ms"]
        last_commit, lsn = json.loads(source["sequence"])
        assert lsn == str(source["lsn"]) and int(last_commit) < source["lsn"]
        image = env["before"] if env["op"] == "d" else env["after"]
        key = (
            source["txId"],
            source["table"],
            image["user_id" if source["table"] == "users" else "article_id"],
        )
        assert key not in keys_in_tx, "a key changes at most once per transaction"
        keys_in_tx.add(key)
    commits = [commit_by_tx[tx] for tx in sorted(commit_by_tx)]
    assert all(a < b for a, b in pairwise(commits))
    assert len(events) > len(commit_by_tx), "some transactions hold several events"


def test_updates_change_updated_at_and_another_column(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    for topic in CDC:
        previous: dict[int, dict[str, Any]] = {}
        key = replay.CDC_TABLES[topic].key
        updates = 0
        for env in distinct_events(landing, topic):
            if env["op"] == "d":
                assert env["after"] is None
                before = env["before"]
                assert [k for k, v in before.items() if v is not None] == [key]
                previous.pop(before[key])
                continue
            after = env["after"]
            if env["op"] == "u":
                assert env["before"] is None
                old = previous[after[key]]
                assert after["updated_at"] > old["updated_at"]
                changed = {k for k in after if after[k] != old.get(k)} - {"updated_at"}
                assert changed, f"{topic} update of {after[key]} changes only updated_at"
                updates += 1
            else:
                assert after[key] not in previous
            previous[after[key]] = after
        assert updates > 100


def test_article_authors_are_existing_users(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    merged = [(e["source"]["lsn"], 0, e) for e in distinct_events(landing, USERS)]
    merged += [(e["source"]["lsn"], 1, e) for e in distinct_events(landing, ARTICLES)]
    live: set[int] = set()
    for _, table, env in sorted(merged, key=lambda item: item[:2]):
        if table == 0:
            image = env["before"] if env["op"] == "d" else env["after"]
            (live.discard if env["op"] == "d" else live.add)(image["user_id"])
        elif env["op"] != "d":
            assert env["after"]["author_id"] in live


def test_deletes_are_followed_by_tombstones(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    for topic in CDC:
        deletes = 0
        for path in replay.topic_files(landing, topic):
            lines = path.read_text(encoding="utf-8")[:-1].split("\n")
            for i, line in enumerate(lines):
                if line in ("", "null"):
                    assert '"op":"d"' in lines[i - 1], f"tombstone without delete in {path}"
                elif '"op":"d"' in line:
                    deletes += 1
                    assert lines[i + 1] in ("", "null"), f"delete without tombstone in {path}"
        assert deletes > 5
        assert replay.cdc_delivery_stats(landing, topic)["tombstones"] == deletes


def test_some_key_is_deleted_and_reinserted(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    for topic, name in CDC.items():
        key = replay.CDC_TABLES[topic].key
        ops: dict[int, list[str]] = {}
        for env in distinct_events(landing, topic):
            image = env["before"] if env["op"] == "d" else env["after"]
            ops.setdefault(image[key], []).append(env["op"])
        reinserted = [k for k, seq in ops.items() if "d" in seq and "c" in seq[seq.index("d") :]]
        assert reinserted, f"no {name} key deleted and re-inserted"
        history = [
            r for r in read_jsonl(truth / f"{name}_history.jsonl") if r[key] == reinserted[0]
        ]
        gaps = [a for a, b in pairwise(history) if a["valid_to"] < b["valid_from"]]
        assert gaps, "a delete closes a version and the re-insert opens a new one later"


def test_preferred_language_appears_only_after_the_drift_point(
    default_run: tuple[Path, Path],
) -> None:
    landing, truth = default_run
    manifest = json.loads((truth / "manifest.json").read_text())
    [change] = manifest["schema_changes"]
    assert change["table"] == "users" and change["column"] == "preferred_language"
    before = after = 0
    for env in distinct_events(landing, USERS):
        image = env["before"] if env["op"] == "d" else env["after"]
        has_column = "preferred_language" in image
        assert has_column == (env["source"]["lsn"] > change["ddl_lsn"])
        before += not has_column
        after += has_column
    assert before > 100 and after > 50
    languages = [r["preferred_language"] for r in read_jsonl(truth / "users_final.jsonl")]
    assert None in languages and any(languages)


def test_no_drift_when_disabled(tmp_path: Path) -> None:
    landing, truth = run_sim(tmp_path, seed=3, add_column_at=-1)
    assert all("preferred_language" not in line for _, line in replay.iter_lines(landing, USERS))
    rows = read_jsonl(truth / "users_final.jsonl")
    assert rows and all(r["preferred_language"] is None for r in rows)
    assert_replay_matches_truth(landing, truth)


def test_duplicates_and_out_of_order_deliveries_occur(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    manifest = json.loads((truth / "manifest.json").read_text())
    for topic in CDC:
        stats = replay.cdc_delivery_stats(landing, topic)
        assert stats["duplicates"] > 0 and stats["out_of_order"] > 0
        assert stats["duplicates"] == manifest["topics"][topic]["duplicates"]
        assert stats["events"] == manifest["topics"][topic]["events"]
        assert stats["lines"] == manifest["topics"][topic]["lines"]
        assert stats["tombstones"] == manifest["topics"][topic]["tombstones"]
        assert 0 < stats["wrapped"] < stats["lines"] - stats["tombstones"]
    _, visit_stats = replay.replay_visits(landing, datetime.now(UTC))
    assert visit_stats["duplicate_rows"] > 0


def test_late_visits_arrive_in_later_files(default_run: tuple[Path, Path]) -> None:
    landing, _ = default_run
    late = 0
    for path in replay.topic_files(landing, VISITS):
        day = path.name[7:17]
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            event_time = record.get("event_time")
            if isinstance(event_time, str) and event_time[:4] == "2024" and event_time < day:
                late += 1
    assert late > 10


def test_every_invalid_visit_kind_appears(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    stats = json.loads((truth / "visits_stats.json").read_text())
    assert stats["malformed_lines"] > 0
    assert [f["filter_name"] for f in stats["filters"]] == list(replay.VISIT_FILTERS)
    assert all(f["rejected_rows"] > 0 for f in stats["filters"]), stats
    assert stats["rows"] == sum(f["rejected_rows"] for f in stats["filters"]) + stats["valid_rows"]
    # The malformed lines don't parse at all; the invalid rows do.
    unparseable = 0
    for _, line in replay.iter_lines(landing, VISITS):
        try:
            json.loads(line)
        except ValueError:
            unparseable += 1
    assert unparseable == stats["malformed_lines"]


def test_visit_filters_in_contract_order() -> None:
    now = datetime(2024, 10, 5, 12, 0, tzinfo=UTC)
    good = {
        "visit_id": "v1",
        "event_time": "2024-10-05T12:04:00.000Z",  # 4 minutes ahead: not future yet
        "page": "/",
        "device_type": "mobile",
    }
    assert replay.visit_filter(good, now) is None
    cases = {
        "missing_visit_id": [{"visit_id": ""}, {"visit_id": None}, {"visit_id": None, "page": ""}],
        "unparseable_event_time": [{"event_time": "yesterday"}, {"event_time": None}],
        "future_event_time": [{"event_time": "2024-10-05T12:06:00.000Z"}],
        "missing_page": [{"page": ""}, {"page": None, "device_type": "tv"}],
        "unsupported_device": [{"device_type": "tv"}, {"device_type": None}],
    }
    for expected, changes in cases.items():
        for change in changes:
            record = {**good, **change}
            assert replay.visit_filter(record, now) == expected, record
    missing_key = {k: v for k, v in good.items() if k != "page"}
    assert replay.visit_filter(missing_key, now) == "missing_page"


def test_devices_loads_change_over_time(tmp_path: Path) -> None:
    landing, truth = run_sim(tmp_path, seed=8, days=5)
    loads, history = replay.replay_devices(landing)
    assert len(loads) == 5
    keys_by_load = [{(r["type"], r["version"]) for r in rows} for rows in loads.values()]
    assert any(a - b for a, b in pairwise(keys_by_load)), "a removal"
    assert any(b - a for a, b in pairwise(keys_by_load)), "an addition"
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in history:
        by_key.setdefault((row["type"], row["version"]), []).append(row)
    renamed = [v for v in by_key.values() if len({r["full_name"] for r in v}) > 1]
    came_back = [
        versions
        for versions in by_key.values()
        if any(a["valid_to"] < b["valid_from"] for a, b in pairwise(versions))
    ]
    assert renamed and came_back
    assert {"desktop", "mobile", "tablet", "tv"} <= {t for t, _ in by_key}
    assert history == read_jsonl(truth / "devices_history.jsonl")


# --- files and resume ------------------------------------------------------------------


def test_landing_layout(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    assert not (landing / ".tmp").exists()
    for topic in (USERS, ARTICLES, VISITS):
        names = [p.name for p in replay.topic_files(landing, topic)]
        assert len(names) == 6 and all(FILE_NAME.match(n) for n in names)
    devices = sorted(
        p.relative_to(landing).as_posix() for p in (landing / "reference").rglob("*.json")
    )
    assert devices == [f"reference/devices/2024-10-0{d}/devices.json" for d in (1, 2, 3)]
    manifest = json.loads((truth / "manifest.json").read_text())
    assert manifest["seed"] == 42
    for topic in (USERS, ARTICLES, VISITS):
        files = manifest["topics"][topic]["files"]
        assert files == [f"{topic}/{p.name}" for p in replay.topic_files(landing, topic)]


def test_resume_continues_the_run(tmp_path: Path) -> None:
    landing, truth = run_sim(tmp_path, seed=21, days=2)
    first = {topic: replay.topic_files(landing, topic) for topic in CDC}
    first_max_lsn = max(e["source"]["lsn"] for t in CDC for e in distinct_events(landing, t))
    first_visits = replay.topic_files(landing, VISITS)
    before = tree(landing)

    assert run_cli(tmp_path, "--resume", "--days", "2", "--seed", "21") == 0

    after = tree(landing)
    assert all(after[name] == data for name, data in before.items()), "old files unchanged"
    for topic in (*CDC, VISITS):
        names = [p.name for p in replay.topic_files(landing, topic)]
        old = [p.name for p in (first.get(topic) or first_visits)]
        assert names[: len(old)] == old and len(names) > len(old)
        assert all(new > old[-1] for new in names[len(old) :])
    for topic in CDC:
        new_files = replay.topic_files(landing, topic)[len(first[topic]) :]
        for index, env in envelopes(landing, topic):
            if replay.topic_files(landing, topic)[index] in new_files:
                assert env["source"]["lsn"] > first_max_lsn
                assert env["op"] != "r", "no new snapshot on resume"
    manifest = json.loads((truth / "manifest.json").read_text())
    assert [r["run"] for r in manifest["runs"]] == [1, 2]
    assert manifest["runs"][1]["first_day"] == "2024-10-03"
    assert len(replay.replay_devices(landing)[0]) == 4
    assert_replay_matches_truth(landing, truth)


def test_resume_twice_stays_consistent(tmp_path: Path) -> None:
    landing, truth = run_sim(tmp_path, seed=22, days=1, add_column_at=-1)
    assert run_cli(tmp_path, "--resume", "--days", "1") == 0
    assert run_cli(tmp_path, "--resume", "--days", "1", "--add-column-at", "0.5") == 0
    assert_replay_matches_truth(landing, truth)
    manifest = json.loads((truth / "manifest.json").read_text())
    assert len(manifest["runs"]) == 3 and len(manifest["schema_changes"]) == 1


# --- failure paths ---------------------------------------------------------------------


def test_fresh_run_into_non_empty_landing_fails_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_sim(tmp_path, seed=31, days=1)
    before = tree(tmp_path)
    capsys.readouterr()
    assert run_cli(tmp_path, "--seed", "32") == 1
    err = capsys.readouterr().err
    assert "already holds a simulation" in err and "--resume" in err and "--force" in err
    assert tree(tmp_path) == before


def test_stray_topic_file_blocks_a_fresh_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = tmp_path / "landing" / VISITS / "000001-2024-10-01.json"
    stray.parent.mkdir(parents=True)
    stray.write_text('{"visit_id":"x"}\n')
    assert run_cli(tmp_path) == 1
    assert str(stray) in capsys.readouterr().err
    assert not (tmp_path / "truth").exists()
    assert tree(tmp_path / "landing") == {f"{VISITS}/000001-2024-10-01.json": b'{"visit_id":"x"}\n'}


def test_force_wipes_the_previous_run(tmp_path: Path) -> None:
    run_sim(tmp_path / "x", seed=41, days=2)
    assert run_cli(tmp_path / "x", "--force", "--seed", "42", "--days", "1") == 0
    assert run_cli(tmp_path / "y", "--seed", "42", "--days", "1") == 0
    assert tree(tmp_path / "x") == tree(tmp_path / "y")


def test_resume_without_state_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(tmp_path, "--resume") == 1
    assert "no saved simulator state" in capsys.readouterr().err
    assert not (tmp_path / "landing").exists() and not (tmp_path / "truth").exists()


def test_resume_refuses_files_it_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing, _ = run_sim(tmp_path, seed=33, days=1)
    stray = landing / USERS / "000099-2024-10-09.json"
    stray.write_text("null\n")
    before = tree(tmp_path)
    assert run_cli(tmp_path, "--resume") == 1
    assert "not part of the run" in capsys.readouterr().err
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "args, message",
    [
        (["--duplicate-rate", "-0.1"], "--duplicate-rate"),
        (["--late-rate", "1.5"], "--late-rate"),
        (["--malformed-rate", "x"], "not a number"),
        (["--days", "0"], "--days"),
        (["--files-per-topic", "0"], "--files-per-topic"),
        (["--users", "-3"], "--users"),
        (["--add-column-at", "2"], "--add-column-at"),
        (["--start-date", "2024-13-01"], "--start-date"),
        (["--resume", "--force"], "exclude each other"),
    ],
)
def test_bad_options_are_argparse_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(tmp_path, *args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
    assert not tmp_path.joinpath("landing").exists()


def test_cli_prints_summary_and_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--landing-dir", str(tmp_path / "l"), "--truth-dir", str(tmp_path / "t"), "--days", "1"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and "events/s" in out and "blog.visits 500 events" in out
    assert "\r[" in err and "1/2 windows" in err


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in (
        "--seed", "--landing-dir", "--truth-dir", "--users", "--articles", "--days",
        "--changes-per-day", "--visits-per-day", "--start-date", "--duplicate-rate",
        "--out-of-order-rate", "--late-rate", "--malformed-rate", "--wrapped-rate",
        "--add-column-at", "--delete-rate", "--reinsert-rate", "--files-per-topic",
        "--no-chaos", "--resume", "--force", "--quiet",
    ):  # fmt: skip
        assert option in out
    assert "(default: 42)" in out and "(default: 0.05)" in out


def test_future_visits_stay_future_for_any_ingestion_time(default_run: tuple[Path, Path]) -> None:
    landing, truth = default_run
    stats = json.loads((truth / "visits_stats.json").read_text())
    later = datetime.now(UTC) + timedelta(days=3650)
    _, replayed = replay.replay_visits(landing, later)
    assert replayed == stats
