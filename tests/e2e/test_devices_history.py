"""silver.devices_history: a dbt snapshot of the devices full loads, on Spark/Delta.

Each load is snapshotted in order (`python -m python_jobs.snapshot_loads`); a device
renamed gets a new version, a device missing from a load is closed at that load's day
(hard-delete invalidation), and one that comes back is reopened; a load that changes
nothing is taken once. Stated loads with exact rows, then the simulator's loads against
its ground truth.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from python_jobs import snapshot_loads

COLUMNS = (
    "type, version, full_name, date_format(dbt_valid_from, 'yyyy-MM-dd') as valid_from, "
    "date_format(dbt_valid_to, 'yyyy-MM-dd') as valid_to"
)


def write_load(landing: Path, day: str, devices: list[tuple[str, str, str]]) -> None:
    directory = landing / "reference" / "devices" / day
    directory.mkdir(parents=True)
    lines = [json.dumps({"type": t, "full_name": n, "version": v}) for t, v, n in devices]
    (directory / "devices.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def history(session) -> list[tuple]:
    """silver.devices_history's versions, sorted; `session` is a SparkSession or anything
    with its `sql(...).collect()` (the cluster test's Thrift session)."""
    rows = session.sql(f"select {COLUMNS} from silver.devices_history").collect()
    return sorted((tuple(row) for row in rows), key=lambda r: tuple(str(v) for v in r))


def truth_history(truth: Path) -> list[tuple]:
    """The simulator's devices history (its ground truth), as `history` gives it."""
    lines = (truth / "devices_history.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted(
        (
            (r["type"], r["version"], r["full_name"], r["valid_from"], r["valid_to"])
            for r in map(json.loads, lines)
        ),
        key=lambda r: tuple(str(v) for v in r),
    )


def test_renames_removals_and_returns_become_versions(spark, clean_lakehouse, capsys) -> None:
    landing = clean_lakehouse["landing"]
    pc, phone, tv = ("desktop", "windows-10"), ("mobile", "ios-17"), ("tv", "tizen-8")
    write_load(landing, "2024-10-07", [(*pc, "Windows 10 PC"), (*phone, "iPhone"), (*tv, "TV")])
    # The phone is renamed; the TV is missing from the load.
    write_load(landing, "2024-10-08", [(*pc, "Windows 10 PC"), (*phone, "Apple iPhone, iOS 17")])
    assert snapshot_loads.main([]) == 0
    two_loads = [
        ("desktop", "windows-10", "Windows 10 PC", "2024-10-07", None),
        ("mobile", "ios-17", "Apple iPhone, iOS 17", "2024-10-08", None),
        ("mobile", "ios-17", "iPhone", "2024-10-07", "2024-10-08"),
        ("tv", "tizen-8", "TV", "2024-10-07", "2024-10-08"),
    ]
    assert history(spark) == two_loads
    log = Path(os.environ["DBT_LOG_PATH"]) / "dbt.log"
    logged = log.stat().st_size

    # The TV comes back: a new version opens at that load's day.
    write_load(
        landing,
        "2024-10-09",
        [(*pc, "Windows 10 PC"), (*phone, "Apple iPhone, iOS 17"), (*tv, "TV")],
    )
    assert snapshot_loads.main([]) == 0
    three_loads = sorted(
        [*two_loads, ("tv", "tizen-8", "TV", "2024-10-09", None)],
        key=lambda r: tuple(str(v) for v in r),
    )
    assert history(spark) == three_loads

    # Nothing new: nothing to do; a snapshot without a load named changes nothing.
    assert snapshot_loads.main([]) == 0
    from python_jobs.run_dbt import invoke

    result = invoke(
        ["snapshot", "--select", "devices_history", "--vars", '{snapshot_time: "2024-10-09"}']
    )
    assert result.success, result.exception
    assert history(spark) == three_loads

    # A load with no rows would close every device: refused, nothing changes.
    result = invoke(
        ["snapshot", "--select", "devices_history", "--vars", '{devices_load_date: "2024-10-10"}']
    )
    assert not result.success
    message = " ".join(str(r.message) for r in result.result.results)
    assert "the devices load 2024-10-10 has no rows" in message
    assert history(spark) == three_loads

    # A load lands after the snapshot step, before a build (or a build runs without
    # the step): the build's snapshot does not take it (it would close the desktop at
    # the build's time, and the step would then skip the loads before it); the next
    # step takes it at its day.
    write_load(landing, "2024-10-10", [(*phone, "Apple iPhone, iOS 17"), (*tv, "TV")])
    result = invoke(["snapshot", "--select", "devices_history"])
    assert result.success, result.exception
    assert history(spark) == three_loads
    assert snapshot_loads.main([]) == 0
    assert history(spark) == [
        ("desktop", "windows-10", "Windows 10 PC", "2024-10-07", "2024-10-10"),
        ("mobile", "ios-17", "Apple iPhone, iOS 17", "2024-10-08", None),
        ("mobile", "ios-17", "iPhone", "2024-10-07", "2024-10-08"),
        ("tv", "tizen-8", "TV", "2024-10-07", "2024-10-08"),
        ("tv", "tizen-8", "TV", "2024-10-09", None),
    ]
    # Each load's day reaches dbt outside its vars (python_jobs.run_dbt): from one load
    # to the next, dbt re-parses the snapshot's file, never the whole project.
    with log.open(encoding="utf-8", errors="replace") as text:
        text.seek(logged)
        since = text.read()
    assert "updated file: lakehouse://snapshots/devices_history.sql" in since
    assert "Unable to do partial parsing" not in since

    # A load equal to the one before changes no row; it is taken once, not again by
    # every run after it (the last load taken is recorded on the snapshot).
    four_loads = history(spark)
    write_load(landing, "2024-10-11", [(*phone, "Apple iPhone, iOS 17"), (*tv, "TV")])
    capsys.readouterr()
    assert snapshot_loads.main([]) == 0
    assert "snapshotting the load of 2024-10-11" in capsys.readouterr().out
    assert history(spark) == four_loads
    assert snapshot_loads.main([]) == 0
    assert capsys.readouterr().out == "devices_history: no load after 2024-10-11 to snapshot\n"
    assert history(spark) == four_loads


def test_the_simulators_loads_give_its_devices_history(spark, clean_lakehouse, simulate) -> None:
    landing = clean_lakehouse["landing"]
    truth = simulate(landing, clean_lakehouse["home"] / "truth", "--seed", "11", "--days", "4")
    assert snapshot_loads.main([]) == 0
    want = truth_history(truth)
    closed = [row for row in want if row[4] is not None]
    assert closed and len({row[:2] for row in want}) < len(want)  # changes happened
    assert history(spark) == want
