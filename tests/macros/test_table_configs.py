"""dbt's table configs on the windowed materializations, and a full refresh that keeps
the table's history.

Two models of the scenario project (tests/macros/materializations_project/models/
configured) read one input: `configured_merge` (cdc_merge, `liquid_clustered_by`,
`tblproperties`, `location_root`) and `configured_history` (cdc_history,
`partition_by`). The tables must carry those settings; a `--full-refresh` replaces them
in one commit (`create or replace`), so the versions before it stay readable, and the
refreshed rows equal the incremental ones.
"""

from __future__ import annotations

import shutil
from datetime import datetime

from tests.helpers import append_with_commit_versions
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


def version(spark, table: str) -> int:
    return spark.sql(f"describe history {table} limit 1").first()["version"]


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
    before = {table: version(spark, table) for table in (MERGE, HISTORY)}

    build(dbt, lakehouse_home, "2024-10-07T09:00:00", "--full-refresh")
    assert read_rows(spark, MERGE, "id, name") == current
    assert read_rows(spark, HISTORY, "id, name, is_current") == versions
    assert read_rows(spark, f"{MERGE}__tombstones", "id") == [(2,)]
    for table, old in before.items():
        assert version(spark, table) > old  # replaced in place: the log goes on
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
    }
    for config, message in cases.items():
        call = "_window_options(model, " + config + ", 'cdc_merge', [])"
        error = compile_error(dbt, "select '{{ " + call + " }}'")
        assert "cdc_merge (model " in error and message in error, config
