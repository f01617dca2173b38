"""Scenarios of the cdc_merge materialization, each with its input and expected rows.

The models live in a small dbt project beside this file (`materializations_project/`). Most
scenarios share one input table and the models over it (`scenario_hard`,
`scenario_soft`), each scenario with its own range of keys (its ids are offset by
1000 x its position); a truncate, a composite key and a schema change have tables of
their own. The rounds run once for the module: round N appends every scenario's N-th
batch (ingested at 0N:00) and runs `dbt run` over the scenario models; each test then
checks its scenario's rows after every round. A last step rebuilds every model with
`--full-refresh` and compares with the incremental result.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import append_with_commit_versions

PROJECT = Path(__file__).parent / "materializations_project"
SCHEMA = "id bigint, op string, lsn bigint, name string"
SHARED_SCHEMAS = [
    "id bigint, op string, lsn bigint, line int, name string",
    "id bigint, op string, lsn bigint, line int, name string, email string",  # round 2 on
]

# scenario -> (input schema, rounds of input rows, columns to read back, expected rows
# after each round). Rows read back are sorted; None is SQL NULL.
SCENARIOS: dict[str, dict[str, Any]] = {
    # Several changes to one key in one batch: the last by sequence wins, without
    # Delta's "multiple source rows matched" error; a tie on lsn goes to the later
    # delivery (line); an exact duplicate is harmless.
    "batch_dedup": {
        "rounds": [
            [
                (1, "c", 10, 1, "a1"),
                (1, "u", 20, 2, "a2"),
                (1, "u", 30, 3, "a3"),
                (2, "u", 50, 5, "b-newer"),
                (2, "c", 40, 4, "b-older"),
                (3, "u", 60, 6, "c-delivered-first"),
                (3, "u", 60, 7, "c-delivered-second"),
                (4, "c", 70, 8, "d"),
                (4, "c", 70, 8, "d"),
            ]
        ],
        "read": "id, lsn, name",
        "expected": [
            [(1, 30, "a3"), (2, 50, "b-newer"), (3, 60, "c-delivered-second"), (4, 70, "d")]
        ],
    },
    # An older change arriving after a newer one is ignored, in the same batch and in a
    # later batch.
    "out_of_order": {
        "rounds": [
            [
                (1, "c", 10, "a"),
                (1, "u", 30, "a-new"),
                (1, "u", 20, "a-old"),
                (2, "c", 10, "b"),
                (2, "u", 20, "b2"),
            ],
            [(2, "u", 15, "b-stale"), (1, "u", 40, "a-newest")],
        ],
        "read": "id, lsn, name",
        "expected": [
            [(1, 30, "a-new"), (2, 20, "b2")],
            [(1, 40, "a-newest"), (2, 20, "b2")],
        ],
    },
    # A delete removes the key; a late, older update does not bring it back; a newer
    # insert does; a delete and an older update in one batch leave it deleted.
    "deletes": {
        "rounds": [
            [(1, "c", 10, "a"), (2, "c", 11, "b"), (3, "c", 12, "c")],
            [(1, "d", 20, None), (2, "d", 21, None), (3, "u", 22, "c2")],
            [
                (1, "u", 15, "a-stale"),
                (2, "c", 30, "b-again"),
                (3, "d", 25, None),
                (3, "u", 24, "c-stale"),
            ],
        ],
        "read": "id, lsn, name",
        "expected": [
            [(1, 10, "a"), (2, 11, "b"), (3, 12, "c")],
            [(3, 22, "c2")],
            [(2, 30, "b-again")],
        ],
    },
    # The same input with delete_mode='soft': deleted keys stay, flagged, holding the
    # delete's row image (the key only, under Debezium's default replica identity).
    "soft_deletes": {
        "input": "deletes",
        "model": "soft",
        "read": "id, lsn, name, _is_deleted",
        "expected": [
            [(1, 10, "a", False), (2, 11, "b", False), (3, 12, "c", False)],
            [(1, 20, None, True), (2, 21, None, True), (3, 22, "c2", False)],
            [(1, 20, None, True), (2, 30, "b-again", False), (3, 25, None, True)],
        ],
    },
    # The first run over a stream that starts with a delete inserts nothing for that
    # key, nor for a key inserted and deleted in the batch; later stale updates of
    # either stay out.
    "starts_with_delete": {
        "rounds": [
            [(1, "d", 5, None), (2, "c", 6, "b"), (2, "d", 7, None), (3, "c", 8, "c")],
            [(1, "u", 4, "a-stale"), (2, "u", 6, "b-stale")],
        ],
        "read": "id, lsn, name",
        "expected": [[(3, 8, "c")], [(3, 8, "c")]],
    },
    # Snapshot reads are inserts/updates by their sequence: a streamed update newer than
    # the snapshot wins; an older snapshot row delivered late is ignored.
    "snapshot_reads": {
        "rounds": [
            [(1, "r", 100, "a-snap"), (2, "r", 100, "b-snap"), (1, "u", 120, "a-upd")],
            [(1, "r", 130, "a-resnap"), (2, "r", 95, "b-old-snap"), (3, "r", 130, "c-snap")],
        ],
        "read": "id, lsn, name",
        "expected": [
            [(1, 120, "a-upd"), (2, 100, "b-snap")],
            [(1, 130, "a-resnap"), (2, 100, "b-snap"), (3, 130, "c-snap")],
        ],
    },
    # A truncate empties the table as of its position: changes before it (earlier
    # batches, the same batch, or late ones) are gone; changes after it stay. A row of
    # an earlier batch at the truncate's own position goes too (round 3), as in a full
    # refresh, which drops the changes not newer than a truncate.
    "truncate": {
        "model": "truncate",
        "rounds": [
            [(1, "c", 10, "a"), (2, "c", 11, "b")],
            [(3, "c", 12, "c"), (None, "t", 20, None), (4, "c", 21, "d")],
            [(1, "u", 15, "a-late"), (2, "d", 11, None), (None, "t", 21, None), (5, "c", 30, "e")],
        ],
        "read": "id, lsn, name",
        "expected": [
            [(1, 10, "a"), (2, 11, "b")],
            [(4, 21, "d")],
            [(5, 30, "e")],
        ],
    },
    # The same input with delete_mode='soft': the truncate deletes what is not newer
    # than it, keys of earlier batches and of its own alike, flagged, each with its last
    # change before the truncate (a late one too: key 1 in round 3; key 2's delete at
    # its row's position wins the tie, as in one batch), as changes applied in sequence
    # order leave them.
    "soft_truncate": {
        "model": "soft_truncate",
        "read": "id, lsn, name, _is_deleted",
        "expected": [
            [(1, 10, "a", False), (2, 11, "b", False)],
            [(1, 10, "a", True), (2, 11, "b", True), (3, 12, "c", True), (4, 21, "d", False)],
            [
                (1, 15, "a-late", True),
                (2, 11, None, True),
                (3, 12, "c", True),
                (4, 21, "d", True),
                (5, 30, "e", False),
            ],
        ],
    },
    # The truncate input again, its `name` output as `customerName`: a column named in
    # mixed case is the table's own on every run (it counted as removed: kept twice
    # in the default mode, dropped under sync_all_columns).
    "mixed_case": {
        "model": "mixed_case",
        "read": "id, lsn, customerName",
        "expected": [
            [(1, 10, "a"), (2, 11, "b")],
            [(4, 21, "d")],
            [(5, 30, "e")],
        ],
    },
    # Key parts match null-safely (no duplicate rows); a key that is entirely null goes
    # to the quarantine (see test_a_null_key_is_quarantined_with_its_reason).
    "null_keys": {
        "model": "null_keys",
        "schema": "tenant string, id bigint, op string, lsn bigint, name string",
        "rounds": [
            [
                ("t1", 1, "c", 10, "a"),
                (None, 1, "c", 11, "n1"),
                ("t1", None, "c", 12, "n2"),
                (None, None, "c", 13, "bad"),
            ],
            [
                (None, 1, "u", 20, "n1-upd"),
                ("t1", None, "d", 21, None),
                (None, None, "u", 22, "bad2"),
            ],
        ],
        "read": "tenant, id, lsn, name",
        "expected": [
            [(None, 1, 11, "n1"), ("t1", None, 12, "n2"), ("t1", 1, 10, "a")],
            [(None, 1, 20, "n1-upd"), ("t1", 1, 10, "a")],
        ],
    },
    # Exact duplicates, in a batch and redelivered later, change nothing.
    "duplicates": {
        "rounds": [
            [(1, "c", 10, "a"), (1, "c", 10, "a"), (2, "c", 11, "b")],
            [(1, "c", 10, "a")],
        ],
        "read": "id, lsn, name",
        "expected": [[(1, 10, "a"), (2, 11, "b")]] * 2,
    },
    # A delete at the same position as the row's change, in a later batch: the delete
    # wins the tie, as it does in one batch (and so in a full refresh).
    "tie_then_delete": {
        "rounds": [[(1, "c", 10, "a")], [(1, "d", 10, None)]],
        "read": "id, lsn, name",
        "expected": [[(1, 10, "a")], []],
    },
    "soft_tie_then_delete": {
        "input": "tie_then_delete",
        "model": "soft",
        "read": "id, lsn, name, _is_deleted",
        "expected": [[(1, 10, "a", False)], [(1, 10, None, True)]],
    },
    # A new source column (round 2): added to the table, null for the rows already there.
    "schema_change": {
        "rounds": [
            [(1, "c", 10, "a"), (2, "c", 11, "b")],
            [(2, "u", 20, "b2", "b@example.com"), (3, "c", 21, "c", "c@example.com")],
        ],
        "read": "id, lsn, name, email",
        "read_before": "id, lsn, name, null as email",  # round 1: no email column yet
        "expected": [
            [(1, 10, "a", None), (2, 11, "b", None)],
            [(1, 10, "a", None), (2, 20, "b2", "b@example.com"), (3, 21, "c", "c@example.com")],
        ],
    },
}
ROUNDS = max(len(s["expected"]) for s in SCENARIOS.values())
SHARED = [name for name, s in SCENARIOS.items() if "model" not in s]
MODELS = ["hard", "soft", "truncate", "soft_truncate", "mixed_case", "null_keys"]
# The project's other models: the backfill story and the cdc_history scenarios.
NOT_MERGE_SCENARIOS = (
    "--exclude",
    "scenario_backfill",
    "path:models/history",
    "path:models/audited",
    "path:models/configured",
    "path:models/evolving",
    "path:models/appended",
)


def ingested_at(round_number: int) -> datetime:
    return datetime(2024, 10, 7, round_number)


def run_project(dbt, lakehouse_home: Path, variables: dict, *args: str, expect_fail=False):
    """`dbt run` of the scenario project (its own target dir: no parse cache clash)."""
    return dbt(
        "run",
        "--project-dir",
        str(PROJECT),
        "--target-path",
        str(lakehouse_home / "dbt" / "cdc_merge_target"),
        "--vars",
        json.dumps(variables),
        *args,
        expect_fail=expect_fail,
    )


def run_scenarios(dbt, lakehouse_home: Path, *args: str, round_number: int = ROUNDS):
    """The scenario models of one round, in four threads."""
    return run_project(
        dbt, lakehouse_home, {"scenario_round": round_number}, "--threads", "4", *args
    )


def append_input(spark, table: str, schema: str, rows: list[tuple], round_number: int) -> None:
    frame = spark.createDataFrame(
        [(*row, ingested_at(round_number)) for row in rows], f"{schema}, _ingested_at timestamp"
    )
    append_with_commit_versions(frame, f"silver.cdc_input_{table}", merge_schema=True)


def shared_rows(name: str, rows: list[tuple]) -> list[tuple]:
    """A shared scenario's rows with its keys offset, as (id, op, lsn, line, name, email)
    (`line` is given by batch_dedup only, `email` by schema_change only)."""
    offset = 1000 * SHARED.index(name)
    shaped = []
    for row in rows:
        key, op, lsn, *rest = row
        if name == "batch_dedup":
            line, value, email = *rest, None
        else:
            line, value, email = None, rest[0], (rest[1] if len(rest) > 1 else None)
        shaped.append((None if key is None else key + offset, op, lsn, line, value, email))
    return shaped


def read_rows(spark, table: str, columns: str, where: str = "true") -> list[tuple]:
    rows = [tuple(r) for r in spark.sql(f"select {columns} from {table} where {where}").collect()]
    return sorted(rows, key=lambda row: tuple((v is not None, v) for v in row))


def read_scenario(spark, name: str, columns: str) -> list[tuple]:
    """A scenario's rows in its model's table, with shared keys back to the scenario's."""
    scenario = SCENARIOS[name]
    model = scenario.get("model", "hard")
    if model not in ("hard", "soft"):
        return read_rows(spark, f"silver.scenario_{model}", columns)
    offset = 1000 * SHARED.index(scenario.get("input", name))
    columns = columns.replace("id,", f"id - {offset} as id,", 1)
    return read_rows(
        spark, f"silver.scenario_{model}", columns, f"id between {offset} and {offset + 999}"
    )


def read_all(spark, table: str) -> list[tuple]:
    """Every column, in name order (an added column comes last in the incremental table)."""
    columns = ", ".join(f"`{c}`" for c in sorted(spark.table(table).columns))
    rows = spark.sql(f"select {columns} from {table}").collect()
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.fixture(scope="module")
def outcomes(spark, dbt, lakehouse_home):
    """Run every round; returns {scenario: [rows after round 1, 2, ...]} and extras."""
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    states: dict[str, list[list[tuple]]] = {name: [] for name in SCENARIOS}
    for number in range(1, ROUNDS + 1):
        shared = []
        for name, scenario in SCENARIOS.items():
            rounds = scenario.get("rounds", [])
            batch = rounds[number - 1] if number <= len(rounds) else []
            if name in SHARED:
                shared += shared_rows(name, batch)
            elif "rounds" in scenario and (batch or number == 1):
                append_input(spark, name, scenario.get("schema", SCHEMA), batch, number)
        schema = SHARED_SCHEMAS[min(number, 2) - 1]
        if number == 1:
            shared = [row[:-1] for row in shared]
        append_input(spark, "shared", schema, shared, number)
        run_scenarios(dbt, lakehouse_home, *NOT_MERGE_SCENARIOS, round_number=number)
        for name, scenario in SCENARIOS.items():
            if number <= len(scenario["expected"]):
                columns = scenario.get("read_before") if number == 1 else None
                states[name].append(read_scenario(spark, name, columns or scenario["read"]))
    quarantine = read_rows(spark, "silver.scenario_null_keys__quarantine", "reason, record")
    tables = [f"silver.scenario_{model}" for model in MODELS]
    incremental = {table: read_all(spark, table) for table in tables}
    run_scenarios(dbt, lakehouse_home, *NOT_MERGE_SCENARIOS, "--full-refresh")
    rebuilt = {table: read_all(spark, table) for table in tables}
    return {
        "states": states,
        "quarantine": quarantine,
        "incremental": incremental,
        "rebuilt": rebuilt,
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_rows_after_each_round(outcomes, name: str) -> None:
    assert outcomes["states"][name] == SCENARIOS[name]["expected"]


@pytest.mark.parametrize("model", MODELS)
def test_full_refresh_rebuilds_the_incremental_result(outcomes, model: str) -> None:
    table = f"silver.scenario_{model}"
    assert outcomes["rebuilt"][table] == outcomes["incremental"][table]
    assert outcomes["rebuilt"][table]  # a table that is empty proves nothing


def test_a_null_key_is_quarantined_with_its_reason(outcomes) -> None:
    got = [(reason, json.loads(record)) for reason, record in outcomes["quarantine"]]
    for _, record in got:
        del record["_ingested_at"], record["_bronze_version"]
    assert got == [
        ("null_key", {"op": "c", "lsn": 13, "name": "bad"}),
        ("null_key", {"op": "u", "lsn": 22, "name": "bad2"}),
    ]
