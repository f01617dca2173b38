"""Simulator throughput: about one million CDC events written to a landing zone.

    python -m bench.bench_simulator [--days 10] [--changes-per-day 90000]

Writes into a scratch directory under $LAKEHOUSE_HOME/tmp (deleted afterwards) and
prints events per second, CDC and total. Not a timed test: a measurement.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from python_jobs.simulate.cli import build_parser, options_from_args
from python_jobs.simulate.runner import simulate
from python_jobs.spark import paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_simulator", description=__doc__)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--articles", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--changes-per-day", type=int, default=90_000)
    parser.add_argument("--visits-per-day", type=int, default=1_000)
    args = parser.parse_args(argv)
    scratch = paths()["tmp"] / "bench-simulator"
    shutil.rmtree(scratch, ignore_errors=True)
    sim_args = build_parser().parse_args(
        [
            "--landing-dir", str(scratch / "landing"),
            "--truth-dir", str(scratch / "truth"),
            "--users", str(args.users),
            "--articles", str(args.articles),
            "--days", str(args.days),
            "--changes-per-day", str(args.changes_per_day),
            "--visits-per-day", str(args.visits_per_day),
            "--quiet",
        ]
    )  # fmt: skip
    try:
        summary = simulate(options_from_args(sim_args))
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
