"""Snapshot every new full load of the devices catalog, oldest first.

A dbt snapshot records the state it sees when it runs; the devices catalog arrives as
daily full loads (`$LAKEHOUSE_HOME/landing/reference/devices/<YYYY-MM-DD>/`), and a
`dbt build` that names no load changes nothing (snapshots/devices_history.sql). This
runs `dbt build --select +devices_history` once per load day after the last one the
snapshot took (its `lakehouse.snapshotted_load`, else the latest day its rows hold), in
order,
with that day as both the load to read (`devices_load_date`) and the snapshot's time
(`snapshot_time`): a device missing from a load is closed at that load's day.
Re-running it, or re-snapshotting a load, changes nothing; the last load day taken is
recorded on the snapshot, so a load that changed nothing is not taken again (nor is a
load delivered again for a day already taken). The snapshot's relation is
the one dbt names for the target (`silver.devices_history`, or a prefixed schema on a
dev or ci target); on the `cluster` target it is read through the Thrift server.

    python -m python_jobs.snapshot_loads [extra dbt arguments, e.g. --target dev]
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

SNAPSHOT = "devices_history"
DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def load_days(directory: Path) -> list[str]:
    """The load days present in the landing zone (a directory with at least one file)."""
    if not directory.is_dir():
        return []
    return sorted(
        d.name
        for d in directory.iterdir()
        if d.is_dir() and DAY.match(d.name) and any(f.is_file() for f in d.iterdir())
    )


def target_arguments(args: list[str]) -> list[str]:
    """`--target X` if `args` name a target, else nothing: dbt re-parses the whole
    project when a command names its target and the one before did not (its parse's
    state includes the target given on the command line), so the snapshot's lookup
    names it exactly when the build does."""
    from python_jobs.run_dbt import named_target

    named = named_target(args)
    return ["--target", named] if named else []


def snapshot_relation(target_args: list[str]) -> tuple[str, str]:
    """(schema, table) of the snapshot on the target of `target_args` (see
    `target_arguments`), as dbt names it (no query runs)."""
    from python_jobs.run_dbt import invoke

    result = invoke(
        ["ls", "--select", SNAPSHOT, "--resource-type", "snapshot", "--output", "json"]
        + ["--output-keys", "schema", "alias", "--log-level", "none", *target_args]
    )
    if not result.success or not result.result:
        raise RuntimeError(f"dbt does not know the snapshot {SNAPSHOT}: {result.exception}")
    node = json.loads(result.result[0])
    return node["schema"], node["alias"]


def _query(target: str, sql: str) -> list[tuple]:
    """Rows of `sql` on `target`: the embedded session, or the cluster's Thrift server."""
    from python_jobs.run_dbt import SESSION_TARGETS

    if target in SESSION_TARGETS:
        from python_jobs.spark import get_spark

        return [tuple(row) for row in get_spark().sql(sql).collect()]
    from pyhive import hive

    host = os.environ.get("SPARK_THRIFT_HOST", "localhost")
    port = int(os.environ.get("SPARK_THRIFT_PORT", "10000"))
    user = os.environ.get("SPARK_THRIFT_USER", "dbt")
    with hive.connect(host, port=port, username=user) as connection:
        cursor = connection.cursor()
        cursor.execute(sql)
        # A statement without a result set (an `alter table`) has no description.
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []


# The last load day snapshotted, a table property of the snapshot set after each load's
# build: a load identical to the one before changes no row, so the rows alone would
# leave every quiet day to be snapshotted again by each run.
LOAD_PROPERTY = "lakehouse.snapshotted_load"


def snapshotted_through(target: str, relation: str) -> str | None:
    """The latest load day the snapshot `relation` (schema.table) has taken on `target`:
    the one recorded after its build, or the latest opening or closing it holds (a
    snapshot made before the record, or a build that died before it)."""
    schema, table = relation.split(".")
    if not _query(target, f"show schemas like '{schema}'"):
        return None
    if not _query(target, f"show tables in {schema} like '{table}'"):
        return None
    rows = _query(
        target,
        "select date_format(greatest(max(dbt_valid_from), coalesce(max(dbt_valid_to), "
        f"max(dbt_valid_from))), 'yyyy-MM-dd') as day from {relation}",
    )
    recorded = dict(_query(target, f"show tblproperties {relation}")).get(LOAD_PROPERTY)
    return max(filter(None, (rows[0][0], recorded)), default=None)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    from python_jobs.run_dbt import invoke, target_of
    from python_jobs.spark import paths

    target = target_of(args)
    relation = ".".join(snapshot_relation(target_arguments(args)))
    last = snapshotted_through(target, relation)
    days = [day for day in load_days(paths()["devices_loads"]) if last is None or day > last]
    if not days:
        print(f"devices_history: no load after {last or 'the start'} to snapshot")
        return 0
    for day in days:
        print(f"devices_history: snapshotting the load of {day}", flush=True)
        variables = {"devices_load_date": day, "snapshot_time": day}
        # `build +devices_history`: the staging view and its tests, then the snapshot.
        result = invoke(
            [
                "build",
                "--select",
                "+devices_history",
                "--vars",
                json.dumps(variables),
                # The unit tests of the staging view run in CI, not per load.
                "--exclude-resource-type",
                "unit_test",
                *args,
            ]
        )
        if not result.success:
            print(f"devices_history: the snapshot of {day} failed", file=sys.stderr)
            return 1
        # Then the load is recorded as taken (a run that dies before this snapshots it
        # again, which changes nothing).
        _query(target, f"alter table {relation} set tblproperties ('{LOAD_PROPERTY}' = '{day}')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
