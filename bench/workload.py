"""The simulator's workload for the benchmarks: its size options and one call to run it."""

from __future__ import annotations

import argparse
from pathlib import Path

from python_jobs.simulate.cli import build_parser, options_from_args
from python_jobs.simulate.runner import RunSummary, simulate

SIZE_OPTIONS = ("users", "articles", "days", "changes_per_day", "visits_per_day")


def add_size_arguments(parser: argparse.ArgumentParser, **defaults: int) -> None:
    """`--users`, `--articles`, `--days`, `--changes-per-day`, `--visits-per-day`."""
    for name in SIZE_OPTIONS:
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=defaults[name])


def simulate_workload(
    landing: Path, truth: Path, args: argparse.Namespace, *extra: str
) -> RunSummary:
    """The simulator (seed 42, default chaos) at the size in `args`, quietly; `extra`
    are more of its options (e.g. `--sink kafka`)."""
    command = ["--landing-dir", str(landing), "--truth-dir", str(truth), "--seed", "42"]
    for name in SIZE_OPTIONS:
        command += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    return simulate(options_from_args(build_parser().parse_args([*command, *extra, "--quiet"])))
