"""The production run: what an operator schedules (cron, Airflow), one command.

1. ingest: everything available now in the landing zone (or Kafka) into Bronze;
2. snapshot: every full load of the devices catalog newer than the snapshot, in order
   (:mod:`python_jobs.snapshot_loads`);
3. build: `dbt build` of the whole project with an execution time (default: now).

Steps run in one process, on one SparkSession. The first step that fails stops the run:
the exit code is non-zero and the last line names the step. Re-running the same
execution time is a backfill of its window (docs/operations.md, "Backfills").
`--step NAME` runs one step alone: a scheduler's task per step (the Airflow DAG,
orchestration/airflow/dags/lakehouse.py), so a failure names its task and a retry
re-runs only that step.

    python -m python_jobs.run                                   # now, local target
    python -m python_jobs.run --execution-time 2024-10-07T00:00:00
    python -m python_jobs.run --target cluster --source kafka --bootstrap-servers H:P
    python -m python_jobs.run -- --select silver                # extra dbt arguments
    python -m python_jobs.run --step build --execution-time 2024-10-07T01:00:00
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime

STEPS = ("ingest", "snapshot", "build")
# A production build runs the models and their data tests, not the dbt unit tests: those
# test the SQL on fixtures, whatever the data, and run in CI (`make test-fast`).
PRODUCTION = ("--exclude-resource-type", "unit_test")
# dbt's node selection: the build's (`-- --select x`), not the snapshot step's, whose
# own `--select +devices_history` it would widen (dbt adds up repeated selections).
SELECTION_FLAGS = ("--select", "-s", "--exclude", "--selector", "--models", "--model", "-m")


class StepFailed(RuntimeError):
    """A step of the run failed; the message says which and why."""


def now() -> str:
    """The current time as an execution time (UTC, ISO-8601, whole seconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_execution_time(value: str) -> str:
    """An ISO-8601 timestamp (naive = UTC), normalized; argparse's type for the option."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO-8601 timestamp: {value!r} (e.g. 2024-10-07T00:00:00)"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S")


def without_selection(dbt_args: list[str]) -> list[str]:
    """`dbt_args` less its node selection (a flag and its values, up to the next flag)."""
    kept: list[str] = []
    skipping = False
    for arg in dbt_args:
        if arg in SELECTION_FLAGS or arg.split("=", 1)[0] in SELECTION_FLAGS:
            skipping = "=" not in arg
            continue
        if skipping and not arg.startswith("-"):
            continue
        skipping = False
        kept.append(arg)
    return kept


def ingest_step(options) -> None:
    from python_jobs import ingest

    try:
        ingest.run(options)
    except ingest.IngestError as error:
        raise StepFailed(str(error)) from None


def snapshot_step(target: str, dbt_args: list[str]) -> None:
    from python_jobs import snapshot_loads

    if snapshot_loads.main(["--target", target, *dbt_args]):
        raise StepFailed("a devices load could not be snapshotted (see dbt's output above)")


def build_step(target: str, execution_time: str, dbt_args: list[str]) -> None:
    from python_jobs import run_dbt

    variables = json.dumps({"execution_time": execution_time})
    result = run_dbt.invoke(
        ["build", "--target", target, "--vars", variables, *PRODUCTION, *dbt_args]
    )
    if not result.success:
        raise StepFailed(
            f"dbt build failed (see dbt's output above; execution time {execution_time})"
        )


def run_steps(steps: list[tuple[str, Callable[[], None]]]) -> int:
    """Run the steps in order; the first failure stops the run with its step named."""
    from python_jobs.preflight import PreflightError

    for number, (name, step) in enumerate(steps, start=1):
        print(f"==> run: step {number}/{len(steps)}: {name}", flush=True)
        try:
            step()
        except (StepFailed, PreflightError) as error:
            print(f"run: step '{name}' failed: {error}", file=sys.stderr, flush=True)
            return 1
        except Exception as error:  # an unexpected failure: its traceback, then the step
            traceback.print_exc()
            print(f"run: step '{name}' failed: {type(error).__name__}: {error}", file=sys.stderr)
            return 1
    print("run: done", flush=True)
    return 0


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.run",
        description="The production run: ingest what is available, snapshot every new "
        "full load in order, then dbt build with an execution time. Exits non-zero with "
        "the failing step named. Arguments after `--` go to dbt.",
    )
    parser.add_argument(
        "--execution-time",
        type=parse_execution_time,
        default=None,
        help="the run's execution time, ISO-8601 UTC (default: now); an execution time "
        "that already ran is a backfill of its window",
    )
    parser.add_argument(
        "--target",
        default=os.environ.get("DBT_TARGET", "local"),
        help="the dbt target (default: $DBT_TARGET, else local)",
    )
    parser.add_argument(
        "--source", choices=("files", "kafka"), default="files", help="ingestion source"
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="kafka source: the brokers (default: $KAFKA_BOOTSTRAP_SERVERS)",
    )
    steps = parser.add_mutually_exclusive_group()
    steps.add_argument(
        "--skip-ingest", action="store_true", help="build what Bronze holds, ingest nothing"
    )
    steps.add_argument(
        "--step",
        choices=STEPS,
        default=None,
        help="run this step alone (a scheduler's task per step; default: every step)",
    )
    args, dbt_args = parser.parse_known_args(argv)
    if dbt_args and dbt_args[0] == "--":
        dbt_args = dbt_args[1:]
    elif dbt_args:
        parser.error(f"unknown arguments {dbt_args}: put dbt's arguments after `--`")
    if args.source == "kafka" and not args.bootstrap_servers:
        parser.error("--source kafka needs --bootstrap-servers (or $KAFKA_BOOTSTRAP_SERVERS)")
    return args, dbt_args


def main(argv: list[str] | None = None) -> int:
    args, dbt_args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="    %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from python_jobs import ingest, run_dbt

    at = args.execution_time or now()
    options = ingest.IngestOptions(source=args.source, bootstrap_servers=args.bootstrap_servers)
    from python_jobs.preflight import PreflightError, check_thrift

    try:
        if args.target in run_dbt.SESSION_TARGETS:
            if args.step != "ingest":
                run_dbt.start_dbt_import()
            # dbt needs the catalog-bound session: ingestion shares it (one JVM).
            from python_jobs.spark import get_spark

            get_spark()
        else:
            check_thrift(
                os.environ.get("SPARK_THRIFT_HOST", "localhost"),
                int(os.environ.get("SPARK_THRIFT_PORT", "10000")),
            )
    except PreflightError as error:
        print(f"run: {error}", file=sys.stderr)
        return 1
    every: dict[str, Callable[[], None]] = {
        "ingest": lambda: ingest_step(options),
        "snapshot": lambda: snapshot_step(args.target, without_selection(dbt_args)),
        "build": lambda: build_step(args.target, at, dbt_args),
    }
    if args.step:
        names = [args.step]
    else:
        names = [name for name in STEPS if not (args.skip_ingest and name == "ingest")]
    steps = [(name, every[name]) for name in names]
    print(f"run: target {args.target}, execution time {at}", flush=True)
    return run_steps(steps)


if __name__ == "__main__":
    sys.exit(main())
