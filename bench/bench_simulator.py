"""Simulator throughput: about one million CDC events written to a landing zone.

    python -m bench.bench_simulator [--days 10] [--changes-per-day 90000]

Writes into a scratch directory under $LAKEHOUSE_HOME/tmp (deleted afterwards) and
prints events per second, CDC and total. Not a timed test: a measurement.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from bench.workload import add_size_arguments, simulate_workload
from python_jobs.spark import paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_simulator", description=__doc__)
    add_size_arguments(
        parser,
        users=100_000,
        articles=20_000,
        days=10,
        changes_per_day=90_000,
        visits_per_day=1_000,
    )
    args = parser.parse_args(argv)
    scratch = paths()["tmp"] / "bench-simulator"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        summary = simulate_workload(scratch / "landing", scratch / "truth", args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cdc = sum(n for topic, n in summary.events.items() if topic.startswith("blog.public."))
    print(
        f"simulator: {cdc:,} CDC events + {summary.total_events - cdc:,} visits "
        f"in {summary.seconds:.1f} s = {cdc / summary.seconds:,.0f} CDC events/s, "
        f"{summary.total_events / summary.seconds:,.0f} events/s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
