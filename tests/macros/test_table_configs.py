"""dbt's table configs on the windowed materializations, and a full refresh that keeps
the table's history.

Two models of the scenario project (tests/macros/materializations_project/models/
configured) read one input: `configured_merge` (cdc_merge, `liquid_clustered_by`,
`tblproperties`, `location_root`) and `configured_history` (cdc_history,
`partition_by`). The tables must carry those settings; a `--full-refresh` replaces them
in one commit (`create or replace`), so the versions before it stay readable, and the
refreshed rows equal the incremental ones.

Two more (models/evolving) change their columns between runs through vars:
`on_schema_change` decides what the current state and the history do with an added or
a removed column, and `grants` are applied the way dbt-spark applies them.
"""

from __future__ import annotations

import shutil
from datetime import datetime

from tests.helpers import append_with_commit_versions, delta_version
from tests.macros.test_cdc_merge import SCHEMA, read_rows, run_project
from tests.macros.test_macro_arguments import compile_error

MERGE = "silver.configured_merge"
HISTORY = "silver.configured_history"


def build(dbt, lakehouse_home, execution_time: str, *args: str):
    variables = {"execution_time": execution_time, "configured_root": str(root(lakehouse_home))}
    return run_project(dbt, lakehouse_home, variables, "--select", "path:models/configured", *args)


def root(lakehouse_home):
    return lakehouse_home / "configured"


def ingest(spark, hour: int, changes: list[tuple]) -> None:
    frame = spark.createDataFrame(
        [(*change, datetime(2024, 10, 7, hour, 30)) for change in changes],
        f"{SCHEMA}, _ingested_at timestamp",
    )
    append_with_commit_versions(frame, "silver.cdc_input_configured")


def detail(spark, table: str):
    return spark.sql(f"describe detail {table}").first()


def test_configs_are_honoured_and_a_full_refresh_keeps_the_history(
    spark, dbt, lakehouse_home, clean_lakehouse
) -> None:
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    shutil.rmtree(root(lakehouse_home), ignore_errors=True)
    ingest(spark, 6, [(1, "c", 1, "a"), (2, "c", 2, "b")])
    build(dbt, lakehouse_home, "2024-10-07T07:00:00")

    merge = detail(spark, MERGE)
    assert merge["clusteringColumns"] == ["id"]
    assert merge["partitionColumns"] == []
    assert merge["properties"]["lakehouse.scenario"] == "configured"
    for table in (MERGE, f"{MERGE}__tombstones", f"{MERGE}__quarantine"):
        name = table.split(".")[1]
        assert detail(spark, table)["location"] == f"file:{root(lakehouse_home)}/{name}"
    assert detail(spark, HISTORY)["partitionColumns"] == ["name"]
    assert detail(spark, f"{HISTORY}__changes")["partitionColumns"] == []

    ingest(spark, 7, [(1, "u", 3, "a2"), (2, "d", 4, None)])
    build(dbt, lakehouse_home, "2024-10-07T08:00:00")
    current = [(1, "a2")]
    versions = [(1, "a", False), (1, "a2", True), (2, "b", False)]
    assert read_rows(spark, MERGE, "id, name") == current
    assert read_rows(spark, HISTORY, "id, name, is_current") == versions
    before = {table: delta_version(spark, table) for table in (MERGE, HISTORY)}

    build(dbt, lakehouse_home, "2024-10-07T09:00:00", "--full-refresh")
    assert read_rows(spark, MERGE, "id, name") == current
    assert read_rows(spark, HISTORY, "id, name, is_current") == versions
    assert read_rows(spark, f"{MERGE}__tombstones", "id") == [(2,)]
    for table, old in before.items():
        assert delta_version(spark, table) > old  # replaced in place: the log goes on
    # The versions before the refresh are still there to read (and to restore).
    assert read_rows(spark, f"{MERGE} version as of {before[MERGE]}", "id, name") == current
    assert detail(spark, MERGE)["clusteringColumns"] == ["id"]

    # A backfill of the refresh's execution time gives the same tables again.
    build(dbt, lakehouse_home, "2024-10-07T09:00:00")
    assert read_rows(spark, MERGE, "id, name") == current
    assert read_rows(spark, HISTORY, "id, name, is_current") == versions


def test_conflicting_or_malformed_table_configs_fail_compilation(dbt) -> None:
    cases = {
        "{'partition_by': ['a'], 'liquid_clustered_by': ['a']}": (
            "partition_by and liquid_clustered_by cannot both be set"
        ),
        "{'tblproperties': ['a']}": "tblproperties must be a mapping of property to value",
        "{'location_root': ''}": "location_root must be a path",
        "{'partition_by': [1]}": "partition_by must hold column names",
        "{'on_schema_change': 'drop'}": (
            "on_schema_change must be one of append_new_columns, ignore, fail, "
            "sync_all_columns, got 'drop'"
        ),
        "{'window_prune_column': ' '}": "window_prune_column must be a column name, got  ",
        # The compiled query reads no source: nothing to bound its windows by.
        "{'window_prune_column': '_ingested_at'}": (
            "window_prune_column needs exactly one source upstream of the model (the table "
            "whose commits are its windows), found 0"
        ),
    }
    for config, message in cases.items():
        call = "_window_options(model, " + config + ", 'cdc_merge', [])"
        error = compile_error(dbt, "select '{{ " + call + " }}'")
        assert "cdc_merge (model " in error and message in error, config


EVOLVING = "silver.evolving_merge"
EVOLVING_HISTORY = "silver.evolving_history"


def evolve(dbt, lakehouse_home, hour: int, columns: str, *select: str, **variables):
    """One run of models/evolving at `hour` o'clock, the input's columns `columns`."""
    variables.update({"execution_time": f"2024-10-07T{hour:02}:00:00", "evolving_columns": columns})
    fail = variables.pop("expect_fail", False)
    selection = select or ("path:models/evolving",)
    result = run_project(dbt, lakehouse_home, variables, "--select", *selection, expect_fail=fail)
    return " ".join(str(node.message) for node in result.result.results)


def ingest_evolving(spark, hour: int, changes: list[tuple]) -> None:
    frame = spark.createDataFrame(
        [(*change, datetime(2024, 10, 7, hour, 30)) for change in changes],
        f"{SCHEMA}, _ingested_at timestamp",
    )
    append_with_commit_versions(frame, "silver.cdc_input_evolving")


def columns_of(spark, table: str) -> list[str]:
    return [c for c in spark.table(table).columns if not c.startswith("_cdc_")]


def test_on_schema_change_decides_what_a_new_or_removed_column_does(
    spark, dbt, lakehouse_home, clean_lakehouse, fail_statement, capsys
) -> None:
    for schema in ("silver", "ops"):
        spark.sql(f"create schema if not exists {schema}")
    history_columns = ["valid_from", "valid_to", "is_current"]
    ingest_evolving(spark, 6, [(1, "c", 1, "ann"), (2, "c", 2, "bo")])
    evolve(dbt, lakehouse_home, 7, "base")
    assert columns_of(spark, EVOLVING) == ["id", "name"]

    # fail: the new column fails the run, naming it; nothing is written.
    ingest_evolving(spark, 7, [(1, "u", 3, "anna")])
    before = {table: delta_version(spark, table) for table in (EVOLVING, EVOLVING_HISTORY)}
    messages = evolve(dbt, lakehouse_home, 8, "added", evolving_mode="fail", expect_fail=True)
    assert (
        "the model's columns differ from silver.evolving_merge's (added: name_length; "
        "removed: none) and on_schema_change is 'fail'" in messages
    )
    assert {table: delta_version(spark, table) for table in before} == before

    # ignore: the run merges the window; the tables keep their columns.
    evolve(dbt, lakehouse_home, 8, "added", evolving_mode="ignore")
    assert columns_of(spark, EVOLVING) == ["id", "name"]
    assert read_rows(spark, EVOLVING, "id, name") == [(1, "anna"), (2, "bo")]
    assert columns_of(spark, EVOLVING_HISTORY) == ["id", "name", *history_columns]

    # append_new_columns, the default (the run names no mode, so the models set none;
    # dbt fills its own default, ignore, which must not win): added to the table and
    # the history, null for older rows.
    ingest_evolving(spark, 8, [(2, "u", 4, "bob")])
    # The history's first attempt dies between its two adds (the history table's, its
    # change store's); the next run, of a model reverted to the old columns, adds the
    # column to the store too (it read the store's column that was not there).
    disarm = fail_statement(
        r"alter table \S*evolving_history__changes\s+add columns", "between the adds"
    )
    messages = evolve(dbt, lakehouse_home, 9, "added", "evolving_history", expect_fail=True)
    assert "injected fault between the adds" in messages, messages
    disarm()
    assert columns_of(spark, f"{EVOLVING_HISTORY}__changes") == ["id", "name"]
    capsys.readouterr()
    evolve(dbt, lakehouse_home, 9, "base", "evolving_changes", "evolving_history")
    assert (
        f"cdc_history (model {EVOLVING_HISTORY}): {EVOLVING_HISTORY}__changes realigned with "
        f"{EVOLVING_HISTORY} (a run died between their changes): added name_length; dropped none"
    ) in capsys.readouterr().out
    assert columns_of(spark, f"{EVOLVING_HISTORY}__changes") == ["id", "name", "name_length"]
    assert read_rows(spark, EVOLVING_HISTORY, "id, name, name_length, is_current") == [
        (1, "ann", None, False),
        (1, "anna", None, True),
        (2, "bo", None, False),
        (2, "bob", None, True),
    ]
    evolve(dbt, lakehouse_home, 9, "added")
    assert columns_of(spark, EVOLVING) == ["id", "name", "name_length"]
    expected = [(1, "anna", None), (2, "bob", 3)]
    assert read_rows(spark, EVOLVING, "id, name, name_length") == expected
    assert read_rows(spark, EVOLVING_HISTORY, "id, name, name_length, is_current") == [
        (1, "ann", None, False),
        (1, "anna", None, True),
        (2, "bo", None, False),
        (2, "bob", 3, True),
    ]

    # append_new_columns, a column the model stops selecting: it stays in the tables;
    # a merged update keeps its value there, the history's new version holds null.
    ingest_evolving(spark, 9, [(1, "u", 5, "annie")])
    evolve(dbt, lakehouse_home, 10, "dropped")
    assert columns_of(spark, EVOLVING) == ["id", "name", "name_length"]
    assert read_rows(spark, EVOLVING, "id, name, name_length") == [(1, "anna", 5), (2, "bob", 3)]
    assert columns_of(spark, f"{EVOLVING_HISTORY}__changes") == ["id", "name", "name_length"]
    assert read_rows(spark, EVOLVING_HISTORY, "id, name, name_length, is_current") == [
        (1, None, 5, True),
        (1, "ann", None, False),
        (1, "anna", None, False),
        (2, "bo", None, False),
        (2, "bob", 3, True),
    ]

    # sync_all_columns: the column the model no longer selects is dropped (a run with
    # nothing new in its window). The history's first attempt dies between its drops
    # (the history table's done, the change store's not), before it records its start.
    # The next run, in the default mode, drops the column from the store too, reads the
    # drop in the store's history and recomputes every key.
    disarm = fail_statement(r"alter table \S*evolving_history__changes\b", "between the drops")
    messages = evolve(
        dbt, lakehouse_home, 11, "dropped", evolving_mode="sync_all_columns", expect_fail=True
    )
    assert "injected fault between the drops" in messages, messages
    disarm()
    assert columns_of(spark, EVOLVING_HISTORY) == ["id", *history_columns, "name_length"]
    assert columns_of(spark, f"{EVOLVING_HISTORY}__changes") == ["id", "name", "name_length"]
    assert len(read_rows(spark, EVOLVING_HISTORY, "id, name_length, is_current")) == 5
    capsys.readouterr()
    evolve(dbt, lakehouse_home, 11, "dropped", "evolving_history")
    out = capsys.readouterr().out
    assert (
        f"cdc_history (model {EVOLVING_HISTORY}): {EVOLVING_HISTORY}__changes realigned with "
        f"{EVOLVING_HISTORY} (a run died between their changes): added none; dropped name"
    ) in out
    assert (
        f"cdc_history (model {EVOLVING_HISTORY}): {EVOLVING_HISTORY}__changes lost columns "
        "since the last finished run (name): every key's history is recomputed"
    ) in out
    assert columns_of(spark, EVOLVING) == ["id", "name_length"]
    assert read_rows(spark, EVOLVING, "id, name_length") == [(1, 5), (2, 3)]
    assert columns_of(spark, EVOLVING_HISTORY) == ["id", *history_columns, "name_length"]
    assert columns_of(spark, f"{EVOLVING_HISTORY}__changes") == ["id", "name_length"]
    # Versions that differed only in the dropped column are one now, as a full refresh
    # would build them: every key's history was recomputed.
    assert read_rows(spark, EVOLVING_HISTORY, "id, name_length, is_current") == [
        (1, None, False),
        (1, 5, True),
        (2, None, False),
        (2, 3, True),
    ]

    # grants: applied after the table is written, as dbt-spark applies them; open
    # source Spark has no SHOW GRANTS or GRANT, so the run fails there with Spark's own
    # message.
    ingest_evolving(spark, 10, [(2, "d", 6, None)])
    grants = {"select": ["analyst"]}
    messages = evolve(
        dbt,
        lakehouse_home,
        12,
        "dropped",
        "evolving_merge",
        evolving_grants=grants,
        expect_fail=True,
    )
    # dbt first reads the existing table's grants (to revoke the ones not configured).
    assert "Syntax error at or near 'on': missing 'FUNCTIONS'" in messages, messages
    assert read_rows(spark, EVOLVING, "id, name_length") == [(1, 5)]
