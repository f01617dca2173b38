"""Snapshot every new full load of the devices catalog, oldest first.

A dbt snapshot records the state it sees when it runs; the devices catalog arrives as
daily full loads (`$LAKEHOUSE_HOME/landing/reference/devices/<YYYY-MM-DD>/`), so one
`dbt build` snapshots only the latest load. This runs `dbt build --select
+devices_history` once per load day after the last one the snapshot holds, in order,
with that day as both the load to read (`devices_load_date`) and the snapshot's time
(`snapshot_time`): a device missing from a load is closed at that load's day.
Re-running it, or re-snapshotting a load, changes nothing.

    python -m python_jobs.snapshot_loads [extra dbt arguments]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SNAPSHOT = "silver.devices_history"
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


def snapshotted_through(spark) -> str | None:
    """The latest load day the snapshot has recorded (an opening or a closing)."""
    if not spark.catalog.tableExists(SNAPSHOT):
        return None
    row = spark.sql(
        "select date_format(greatest(max(dbt_valid_from), coalesce(max(dbt_valid_to), "
        f"max(dbt_valid_from))), 'yyyy-MM-dd') as day from {SNAPSHOT}"
    ).first()
    return row.day


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    from python_jobs.run_dbt import invoke
    from python_jobs.spark import get_spark, paths

    spark = get_spark()
    last = snapshotted_through(spark)
    days = [day for day in load_days(paths()["devices_loads"]) if last is None or day > last]
    if not days:
        print(f"devices_history: no load after {last or 'the start'} to snapshot")
        return 0
    for day in days:
        print(f"devices_history: snapshotting the load of {day}", flush=True)
        variables = {"devices_load_date": day, "snapshot_time": day}
        # `build +devices_history`: the staging view and its tests, then the snapshot.
        result = invoke(
            ["build", "--select", "+devices_history", "--vars", json.dumps(variables), *args]
        )
        if not result.success:
            print(f"devices_history: the snapshot of {day} failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
