"""Scenarios of the cdc_history materialization (SCD Type 2 from a change stream).

The models are in tests/macros/materializations_project/models/history: `history_all` tracks
every column, `history_tracked` only `name`, `history_truncate` has its own input. A
change's time is its lsn in seconds (`valid_from='timestamp_seconds(lsn)'`), so each
expected version reads (id, name, valid_from lsn, valid_to lsn, is_current). Every
scenario states its input rows per round and the versions expected after each round;
then a re-run, a backfill, a crash between the two writes and a full refresh.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.macros.test_cdc_merge import append_input, read_all, read_rows, run_project

T = True
F = False
# Input rows: (id, op, lsn, name, note) or (..., email) from round 2; `line` (the
# delivery position, the second sequence part) is left null: equal lsns are ties.
SCHEMAS = [
    "id bigint, op string, lsn bigint, line int, name string, note string",
    "id bigint, op string, lsn bigint, line int, name string, note string, email string",
]
VERSION = "unix_seconds(valid_from) as vf, unix_seconds(valid_to) as vt, is_current"

SCENARIOS: dict[str, dict[str, Any]] = {
    # Every change to a tracked column opens a version, even several in one batch.
    "batch_versions": {
        "rounds": [
            [(1, "c", 10, "a"), (1, "u", 20, "b"), (1, "u", 30, "c")],
            [(1, "u", 40, "d")],
            [(1, "u", 50, "e")],
        ],
        "expected": [
            [(1, "a", 10, 20, F), (1, "b", 20, 30, F), (1, "c", 30, None, T)],
            [(1, "a", 10, 20, F), (1, "b", 20, 30, F), (1, "c", 30, 40, F), (1, "d", 40, None, T)],
            [
                (1, "a", 10, 20, F),
                (1, "b", 20, 30, F),
                (1, "c", 30, 40, F),
                (1, "d", 40, 50, F),
                (1, "e", 50, None, T),
            ],
        ],
    },
    # An update that changes no column opens no version.
    "identical_update": {
        "rounds": [[(1, "c", 10, "a", "x"), (1, "u", 20, "a", "x")], [(1, "u", 30, "a", "x")]],
        "read": "id, name, note, " + VERSION,
        "expected": [[(1, "a", "x", 10, None, T)]] * 2,
    },
    # With track_columns=['name'], a change of `note` updates the open version in
    # place. A late change inside such a version splits it exactly: each part shows
    # the values it had (the history is recomputed from every change of the key).
    "untracked_change": {
        "model": "tracked",
        "rounds": [
            [
                (1, "c", 10, "a", "x"),
                (1, "u", 20, "a", "y"),
                (2, "c", 10, "a", "x"),
                (2, "u", 30, "a", "z"),
            ],
            [(1, "u", 30, "b", "y"), (1, "u", 40, "b", "z"), (2, "u", 20, "b", "y")],
        ],
        "read": "id, name, note, " + VERSION,
        "expected": [
            [(1, "a", "y", 10, None, T), (2, "a", "z", 10, None, T)],
            [
                (1, "a", "y", 10, 30, F),
                (1, "b", "z", 30, None, T),
                (2, "a", "x", 10, 20, F),
                (2, "b", "y", 20, 30, F),
                (2, "a", "z", 30, None, T),
            ],
        ],
    },
    # A late change is placed by its sequence: the version before it is closed at its
    # time and it is closed at the next version's time (in the same batch and later).
    "late_change": {
        "rounds": [
            [
                (1, "c", 10, "a"),
                (1, "u", 30, "c"),
                (2, "c", 10, "a"),
                (2, "u", 30, "c"),
                (2, "u", 20, "b"),
            ],
            [(1, "u", 20, "b")],
        ],
        "expected": [
            [
                (1, "a", 10, 30, F),
                (1, "c", 30, None, T),
                (2, "a", 10, 20, F),
                (2, "b", 20, 30, F),
                (2, "c", 30, None, T),
            ],
            [
                (1, "a", 10, 20, F),
                (1, "b", 20, 30, F),
                (1, "c", 30, None, T),
                (2, "a", 10, 20, F),
                (2, "b", 20, 30, F),
                (2, "c", 30, None, T),
            ],
        ],
    },
    # A delete closes the current version; a late, older update lands before the
    # delete and does not reopen the key; a newer insert opens a new version. A delete
    # of a key never seen changes nothing, until its older insert arrives.
    "deletes": {
        "rounds": [
            [(1, "c", 10, "a"), (1, "u", 20, "b"), (2, "c", 10, "x")],
            [(1, "d", 30, None), (3, "d", 12, None)],
            [(1, "u", 25, "stale"), (1, "c", 40, "again"), (1, "d", 30, None), (3, "c", 11, "y")],
        ],
        "expected": [
            [(1, "a", 10, 20, F), (1, "b", 20, None, T), (2, "x", 10, None, T)],
            [(1, "a", 10, 20, F), (1, "b", 20, 30, F), (2, "x", 10, None, T)],
            [
                (1, "a", 10, 20, F),
                (1, "b", 20, 25, F),
                (1, "stale", 25, 30, F),
                (1, "again", 40, None, T),
                (2, "x", 10, None, T),
                (3, "y", 11, 12, F),
            ],
        ],
    },
    # Ties on the whole sequence: a delete wins; between two different changes, the
    # first ingested copy wins (so a later run never rewrites history with it).
    "ties": {
        "rounds": [
            [
                (1, "c", 10, "a"),
                (1, "u", 20, "first"),
                (2, "c", 10, "a"),
                (2, "u", 20, "upd"),
                (2, "d", 20, None),
            ],
            [(1, "u", 20, "second")],
        ],
        "expected": [[(1, "a", 10, 20, F), (1, "first", 20, None, T), (2, "a", 10, 20, F)]] * 2,
    },
    # Exact duplicates, in a batch and redelivered in a later one, change nothing.
    "duplicates": {
        "rounds": [
            [(1, "c", 10, "a"), (1, "c", 10, "a"), (1, "u", 20, "b")],
            [(1, "c", 10, "a"), (1, "u", 20, "b")],
        ],
        "expected": [[(1, "a", 10, 20, F), (1, "b", 20, None, T)]] * 2,
    },
    # A new source column (round 2) is added to the history, null in older versions.
    "schema_change": {
        "rounds": [
            [(1, "c", 10, "a"), (2, "c", 11, "b")],
            [(2, "u", 20, "b", None, "b@example.com"), (3, "c", 21, "c", None, "c@example.com")],
        ],
        "read": "id, name, email, " + VERSION,
        "read_before": "id, name, null as email, " + VERSION,
        "expected": [
            [(1, "a", None, 10, None, T), (2, "b", None, 11, None, T)],
            [
                (1, "a", None, 10, None, T),
                (2, "b", None, 11, 20, F),
                (2, "b", "b@example.com", 20, None, T),
                (3, "c", "c@example.com", 21, None, T),
            ],
        ],
    },
    # A truncate closes every version open before it; a late change from before it is
    # placed and closed by it (the model has its own input).
    "truncate": {
        "model": "truncate",
        "rounds": [
            [(1, "c", 10, "a"), (2, "c", 11, "b")],
            [(None, "t", 20, None), (3, "c", 21, "c")],
            [(1, "u", 15, "a2"), (4, "c", 30, "d")],
        ],
        "expected": [
            [(1, "a", 10, None, T), (2, "b", 11, None, T)],
            [(1, "a", 10, 20, F), (2, "b", 11, 20, F), (3, "c", 21, None, T)],
            [
                (1, "a", 10, 15, F),
                (1, "a2", 15, 20, F),
                (2, "b", 11, 20, F),
                (3, "c", 21, None, T),
                (4, "d", 30, None, T),
            ],
        ],
    },
}
SHARED = [name for name, s in SCENARIOS.items() if s.get("model") != "truncate"]
ROUNDS = max(len(s["expected"]) for s in SCENARIOS.values())
MODELS = ["history_all", "history_tracked", "history_truncate"]
KEYLESS = (None, "c", 60, "keyless")  # round 1: quarantined, never in the history


def sort_key(row: tuple) -> tuple:
    return tuple((value is not None, value) for value in row)  # as read_rows sorts


def execution_time(round_number: int) -> str:
    return f"2024-10-07T{round_number:02d}:00:00"


def build(
    dbt,
    lakehouse_home,
    round_number: int,
    *args: str,
    expect_fail: bool = False,
    select: str = "path:models/history",
    **extra,
):
    variables = {
        "scenario_round": min(round_number, 2),
        "execution_time": execution_time(round_number),
        **extra,
    }
    return run_project(
        dbt,
        lakehouse_home,
        variables,
        "--select",
        select,
        "--threads",
        "3",
        *args,
        expect_fail=expect_fail,
    )


def shaped(name: str, rows: list[tuple], round_number: int) -> list[tuple]:
    """(id, op, lsn, line, name, note[, email]) with the scenario's keys offset."""
    offset = 1000 * SHARED.index(name) if name in SHARED else 0
    out = []
    for key, op, lsn, value, *rest in rows:
        note, email = (rest + [None, None])[:2]
        row = (None if key is None else key + offset, op, lsn, None, value, note)
        out.append(row + ((email,) if round_number >= 2 else ()))
    return out


def ingest_round(spark, round_number: int) -> None:
    shared, truncate = [], []
    for name, scenario in SCENARIOS.items():
        rounds = scenario["rounds"]
        batch = rounds[round_number - 1] if round_number <= len(rounds) else []
        if name in SHARED:
            shared += shaped(name, batch, round_number)
        else:
            truncate += [(key, op, lsn, value) for key, op, lsn, value in batch]
    if round_number == 1:
        shared.append(shaped("batch_versions", [KEYLESS], 1)[0])
    schema = SCHEMAS[min(round_number, 2) - 1]
    append_input(spark, "history", schema, shared, round_number)
    append_input(
        spark,
        "history_truncate",
        "id bigint, op string, lsn bigint, name string",
        truncate,
        round_number,
    )


def read_scenario(spark, name: str, columns: str) -> list[tuple]:
    scenario = SCENARIOS[name]
    model = f"silver.history_{scenario.get('model', 'all')}"
    if name not in SHARED:
        return read_rows(spark, model, columns)
    offset = 1000 * SHARED.index(name)
    columns = columns.replace("id,", f"id - {offset} as id,", 1)
    return read_rows(spark, model, columns, f"id between {offset} and {offset + 999}")


def read_states(spark, round_number: int) -> dict[str, list[tuple]]:
    states = {}
    for name, scenario in SCENARIOS.items():
        if round_number <= len(scenario["expected"]):
            columns = scenario.get("read_before") if round_number == 1 else None
            columns = columns or scenario.get("read", "id, name, " + VERSION)
            states[name] = read_scenario(spark, name, columns)
    return states


def fail_after_change_store(patch: pytest.MonkeyPatch) -> None:
    """The history's first statement after the change store's append (the merge of
    the difference) fails: the run dies between its two writes. The same statement
    interception as the `fail_statement` fixture, for this module-scoped fixture."""
    import re

    from dbt.adapters.spark.session import SessionConnectionWrapper

    original = SessionConnectionWrapper.execute
    pattern = re.compile(r"\bmerge into\b.*\b_cdc_gone\b", re.IGNORECASE | re.DOTALL)

    def execute(self, sql: str, bindings=None):
        if pattern.search(sql):
            raise RuntimeError("injected fault after the append to the change store")
        return original(self, sql, bindings)

    patch.setattr(SessionConnectionWrapper, "execute", execute)


@pytest.fixture(scope="module")
def outcomes(spark, dbt, lakehouse_home):
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    states: dict[str, list[list[tuple]]] = {name: [] for name in SCENARIOS}
    tables = [f"silver.{model}" for model in MODELS]
    extras: dict[str, Any] = {}
    for number in range(1, ROUNDS + 1):
        ingest_round(spark, number)
        if number == ROUNDS:
            # The last round's first attempt dies between the store and the history.
            before = {table: read_all(spark, table) for table in tables}
            # (Test-only: the statement after the change store's append fails.)
            with pytest.MonkeyPatch.context() as patch:
                fail_after_change_store(patch)
                failed = build(dbt, lakehouse_home, number, expect_fail=True)
            extras["crash"] = (
                " ".join(str(r.message) for r in failed.result.results),
                {table: read_all(spark, table) for table in tables} == before,
            )
        build(dbt, lakehouse_home, number)
        for name, rows in read_states(spark, number).items():
            states[name].append(rows)
        if number == 1:
            extras["quarantine"] = read_rows(
                spark, "silver.history_all__quarantine", "reason, record, execution_time"
            )
    incremental = {table: read_all(spark, table) for table in tables}
    # The last round ran twice (its first attempt crashed): a re-run. A backfill of
    # round 2's execution time changes nothing either.
    build(dbt, lakehouse_home, 2)
    extras["backfill"] = {table: read_all(spark, table) for table in tables}
    build(dbt, lakehouse_home, ROUNDS + 1, "--full-refresh")
    rebuilt = {table: read_all(spark, table) for table in tables}
    extras["after_rerun"] = run_after_rerun(spark, dbt, lakehouse_home)
    return {"states": states, "incremental": incremental, "rebuilt": rebuilt, **extras}


LATE_KEY = 9000  # a key only the round after the full refresh brings


def run_after_rerun(spark, dbt, lakehouse_home) -> dict[str, list[tuple]]:
    """After the full refresh (one window of rounds 1-3): a window with a new key, the
    re-run of the full refresh's window, then a new run of a changed model that leaves
    the new key out. That run's window starts where the re-run's ended, so it reads the
    new key's window again: the store's rows of it are replaced and the key's history
    must go, as a full refresh of the changed model gives."""
    table = "silver.history_all"
    later = ROUNDS + 2
    rows = [
        (LATE_KEY, "c", 900, None, "late", None, "late@example.com"),
        (LATE_KEY + 1, "c", 901, None, "kept", None, "kept@example.com"),
    ]
    append_input(spark, "history", SCHEMAS[1], rows, later)
    only = {"select": "history_all"}  # the other two models would add time, not cases
    build(dbt, lakehouse_home, later, **only)
    late = f"id >= {LATE_KEY}"
    with_key = read_rows(spark, table, "id, name, valid_to", late)
    build(dbt, lakehouse_home, ROUNDS + 1, **only)  # the re-run of the full refresh's window
    build(dbt, lakehouse_home, later + 1, history_skip_id=LATE_KEY, **only)
    without_key = read_rows(spark, table, "id, name, valid_to", late)
    incremental = read_all(spark, table)
    build(dbt, lakehouse_home, later + 2, "--full-refresh", history_skip_id=LATE_KEY, **only)
    return {
        "with_key": with_key,
        "without_key": without_key,
        "incremental": incremental,
        "rebuilt": read_all(spark, table),
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_versions_after_each_round(outcomes, name: str) -> None:
    # Expected versions are written in time order; the rows read back are sorted.
    expected = [sorted(rows, key=sort_key) for rows in SCENARIOS[name]["expected"]]
    assert outcomes["states"][name] == expected


@pytest.mark.parametrize("model", MODELS)
def test_reruns_backfills_and_full_refresh_give_the_incremental_history(outcomes, model) -> None:
    table = f"silver.{model}"
    assert outcomes["incremental"][table]  # an empty table proves nothing
    assert outcomes["backfill"][table] == outcomes["incremental"][table]
    assert outcomes["rebuilt"][table] == outcomes["incremental"][table]


def test_a_run_after_a_rerun_recomputes_the_keys_whose_changes_it_replaces(outcomes) -> None:
    after = outcomes["after_rerun"]
    assert after["with_key"] == [(LATE_KEY, "late", None), (LATE_KEY + 1, "kept", None)]
    assert after["without_key"] == [(LATE_KEY + 1, "kept", None)]
    assert after["incremental"] == after["rebuilt"]


def test_a_crash_between_the_two_writes_is_repaired_by_the_next_run(outcomes) -> None:
    message, unchanged = outcomes["crash"]
    assert "injected fault after the append to" in message
    assert unchanged  # the history was not written; the next run merged the window


def test_a_keyless_change_is_quarantined_not_versioned(outcomes) -> None:
    ((reason, record, at),) = outcomes["quarantine"]
    record = json.loads(record)
    del record["_ingested_at"], record["_bronze_version"]
    assert (reason, record, str(at)) == (
        "null_key",
        {"op": "c", "lsn": 60, "name": "keyless"},
        "2024-10-07 01:00:00",
    )
