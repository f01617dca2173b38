"""`make demo`: the whole pipeline on this machine, end to end, with a summary.

1. simulate a few days of the blog platform into the landing zone (skipped when a
   finished simulation is already there, so a second run changes nothing);
2. ingest the landing zone into Bronze (available now);
3. snapshot each devices full load in order (`python_jobs.snapshot_loads`), then
   `dbt build` (models, snapshots, tests) and `dbt docs generate`;
4. print rows per layer and where the docs are.

Runs in one process: one JVM start for the whole demo.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from python_jobs import ingest, run_dbt, snapshot_loads
from python_jobs.spark import get_spark, paths

SIMULATION = ["--seed", "42", "--days", "3", "--users", "300", "--articles", "120"]


def _step(number: int, text: str) -> None:
    print(f"\n==> [{number}/4] {text}", flush=True)


def has_landing_files(landing: Path) -> bool:
    return any(landing.glob("*/*.json"))


def simulate(landing: Path, truth: Path) -> None:
    from python_jobs.simulate.cli import main as simulate_main

    code = simulate_main(["--landing-dir", str(landing), "--truth-dir", str(truth), *SIMULATION])
    if code:
        raise SystemExit(f"the simulator failed with exit code {code}")


def dbt(args: list[str]) -> None:
    result = run_dbt.invoke(args)
    if not result.success:
        raise SystemExit(f"dbt {' '.join(args)} failed (see the log above)")


def summary(spark) -> list[tuple[str, str, int]]:
    rows = []
    for schema in ("bronze", "silver", "gold", "ops"):
        for table in sorted(spark.catalog.listTables(schema), key=lambda t: t.name):
            count = spark.table(f"{schema}.{table.name}").count()
            rows.append((schema, table.name, count))
    return rows


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m python_jobs.demo", description=__doc__.split("\n")[0]
    ).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="    %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    started = time.monotonic()
    p = paths()
    landing, truth = p["landing"], p["home"] / "truth"

    _step(1, f"simulate the blog platform into {landing}")
    if (truth / "manifest.json").exists():
        print("    the landing zone already holds the simulated workload: keeping it")
    elif has_landing_files(landing):
        print("    the landing zone holds files the simulator did not write: using them as is")
    else:
        simulate(landing, truth)

    _step(2, "ingest the landing zone into Bronze")
    spark = get_spark()
    ingest.run(ingest.IngestOptions(landing=landing))

    _step(3, "snapshot each devices load, dbt build, then dbt docs generate")
    if snapshot_loads.main([]):
        raise SystemExit("snapshotting the devices loads failed (see the log above)")
    dbt(["build"])
    dbt(["docs", "generate"])

    _step(4, "summary")
    print(f"    {'layer':8} {'relation':32} {'rows':>10}")
    for schema, name, count in summary(spark):
        print(f"    {schema:8} {name:32} {count:>10}")
    docs = Path(os.environ["DBT_TARGET_PATH"]) / "index.html"
    print(f"\n    lineage docs: {docs}")
    print(f"    lakehouse:    {p['home']}")
    print(f"    done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
