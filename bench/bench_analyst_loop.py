"""The analyst's loop: one staging model and its tests, built the way an analyst runs it.

    python -m bench.bench_analyst_loop [--model stg_blog__users] [--repeats 3]
                                       [--baseline REV | --no-baseline] [--setup run|ingest]

A small demo lakehouse first (the simulator, seed 42, default chaos: `--users` 100,
`--articles` 30, `--days` 2), made as an operator makes it: `python -m python_jobs.run`
(ingest, snapshot the loads, `dbt build` with an execution time), or with `--setup
ingest` only `python -m python_jobs.ingest --once`. Then, each in a fresh process (JVM
start included), what `make build DBT_ARGS="--select <model>"` runs:

    python -m python_jobs.run_dbt build --select <model>

from this checkout ("ours") and from a copy of the repository at `--baseline` (default:
the last commit before the analyst loop's cuts; `git archive`, so a shallow clone skips
it), on the same lakehouse, taking turns, each with its own dbt target directory. The
first run of each is after the demo's build with other vars (dbt parses in full); the
next `--repeats` reuse the saved parse (partial parsing). Each run prints its wall time,
the CPU seconds of its whole process tree (the JVM included: less sensitive than wall
time to other processes on the machine) and where the time went, read from dbt's log:

    start     process start to dbt's first line: Python imports, the JVM and the
              SparkSession, Bronze tables checked (python_jobs/run_dbt.py)
    parse     dbt reads the project (in full, or partially)
    catalog   dbt's connection and relation cache: the catalog's first use
    hooks     the four on-run-start hooks (dbt_project.yml)
    unit      the model's dbt unit tests (they run before the model)
    model     the view
    tests     the model's data tests
    end       dbt's summary, artifacts, the JVM's exit

Checks (a failure makes the exit status 1): every run succeeds with every node of the
selection passing (the model, its data tests and unit tests, from run_results.json);
afterwards the view exists and has one row per Bronze row. Everything lives in a scratch
LAKEHOUSE_HOME under $LAKEHOUSE_HOME/tmp, deleted afterwards (`--keep` keeps it). A
measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.bench_cdc_merge import machine, scratch_lakehouse
from bench.workload import add_size_arguments, simulate_workload
from python_jobs.spark import REPO_ROOT

# The last commit before the cuts this benchmark measures (issue 19, item 3).
BASELINE = "fedbb91"
# What the demo's run is stamped with (the simulator starts on 2024-10-01).
DEMO_EXECUTION_TIME = "2024-10-03T00:00:00"
PHASES = ("start", "parse", "catalog", "hooks", "unit", "model", "tests", "end")
CATALOG_WAIT_S = 120.0

# --- A process tree's CPU time ------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK")


def _process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far) of every process, from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path("/proc", name, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS)
    return table


class TreeCPU:
    """Samples the CPU seconds of a process and its descendants (the JVM that pyspark
    starts is never waited for, so getrusage does not see it) until stopped."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root, self.interval = root, interval
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        table = _process_table()
        members, frontier = {self.root}, [self.root]
        while frontier:
            parent = frontier.pop()
            for pid, (ppid, _) in table.items():
                if ppid == parent and pid not in members:
                    members.add(pid)
                    frontier.append(pid)
        for pid in members & table.keys():
            self.seen[pid] = max(self.seen.get(pid, 0.0), table[pid][1])

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.seen.values())


# --- One run ------------------------------------------------------------------------


@dataclass
class Run:
    variant: str
    number: int
    wall: float = 0.0
    cpu: float = 0.0
    parse: str = "?"
    phases: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


_LINE = re.compile(r"^(?:\x1b\[[0-9;]*m)*(\d\d:\d\d:\d\d\.\d+) \[[^]]*\] \[[^]]*\]: (.*)$")
_TOOK = re.compile(r"in (\d+(?:\.\d+)?)s\]")


def log_events(log: Path, started: datetime) -> list[tuple[float, str]]:
    """(seconds since the process started, message) of each line of one invocation's
    dbt.log (its clock is UTC, like this process's: python_jobs.spark sets TZ)."""
    events = []
    for line in log.read_text(errors="replace").splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        clock = datetime.strptime(match[1], "%H:%M:%S.%f").time()
        at = datetime.combine(started.date(), clock, tzinfo=UTC)
        if at < started - timedelta(hours=1):  # past midnight
            at += timedelta(days=1)
        events.append(((at - started).total_seconds(), re.sub(r"\x1b\[[0-9;]*m", "", match[2])))
    return events


def phases_of(events: list[tuple[float, str]], wall: float) -> tuple[dict[str, float], str]:
    """Where the run's time went (see the module's docstring), and how dbt parsed."""

    def first(pattern: str) -> float | None:
        return next((t for t, m in events if re.search(pattern, m)), None)

    started, parsed = first(r"^Running with dbt="), first(r"^Found \d+ models")
    connected, finished = first(r"^Concurrency: "), first(r"^Finished running (?!node)")
    hooks = [(t, float(_TOOK.search(m)[1])) for t, m in events if " OK hook: " in m]
    model_start = first(r"START sql \w+ model ")
    model_end = first(r"OK created sql \w+ model ")
    if None in (started, parsed, connected, finished, model_start, model_end) or not hooks:
        return {}, "?"
    hooks_start = hooks[0][0] - hooks[0][1]
    hooks_end = hooks[-1][0]
    parse = "full" if first(r"Unable to do partial parsing|Starting full parse") else "partial"
    phases = {
        "start": started,
        "parse": parsed - started,
        "catalog": hooks_start - parsed,
        "hooks": hooks_end - hooks_start,
        "unit": model_start - hooks_end,
        "model": model_end - model_start,
        "tests": finished - model_end,
        "end": wall - finished,
    }
    return phases, parse


def wait_for_catalog(home: Path) -> None:
    """Wait until the embedded catalog is free: the baseline's command returns before
    its JVM has let go of it (ours waits for its JVM, `python_jobs.spark.stop_jvm`),
    and the next run would be refused, not slowed down."""
    from python_jobs.preflight import derby_holder

    deadline = time.monotonic() + CATALOG_WAIT_S
    while derby_holder(home / "metastore_db"):
        if time.monotonic() > deadline:
            raise SystemExit(f"the catalog of {home} is still held after {CATALOG_WAIT_S:.0f} s")
        time.sleep(0.2)


def environment(home: Path, target: Path, logs: Path) -> dict[str, str]:
    """The environment of a job on the scratch lakehouse, with its own dbt directories."""
    keep = {"DBT_TARGET", "LAKEHOUSE_CATALOG", "SPARK_MASTER", "LAKEHOUSE_PII_SALT"}
    env = {k: v for k, v in os.environ.items() if k not in keep}
    env.update(LAKEHOUSE_HOME=str(home), DBT_TARGET_PATH=str(target), DBT_LOG_PATH=str(logs))
    return env


def build_once(home: Path, project: Path, variant: str, number: int, model: str) -> Run:
    """`python -m python_jobs.run_dbt build --select <model>` from `project`, fresh."""
    run = Run(variant, number)
    target = home / "dbt" / f"{variant}-target"
    logs = home / "dbt" / f"{variant}-logs-{number}"
    wait_for_catalog(home)
    started = datetime.now(UTC)
    clock = time.monotonic()
    with open(logs.parent / f"{variant}-{number}.out", "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "python_jobs.run_dbt", "build", "--select", model],
            cwd=project,
            env=environment(home, target, logs),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        sampler = TreeCPU(proc.pid)
        code = proc.wait()
        run.wall = time.monotonic() - clock
        run.cpu = sampler.stop()
    if code != 0:
        run.problems.append(f"exit status {code} (see {out.name})")
    log = logs / "dbt.log"
    if log.exists():
        run.phases, run.parse = phases_of(log_events(log, started), run.wall)
    run.problems += check_results(target / "run_results.json", model)
    return run


def check_results(path: Path, model: str) -> list[str]:
    """The selection ran whole and passed: the model, at least one data test and one
    unit test of it, every node `success` or `pass`."""
    if not path.exists():
        return [f"no {path}"]
    results = json.loads(path.read_text())["results"]
    statuses = {r["unique_id"]: r["status"] for r in results}
    problems = [f"{uid}: {status}" for uid, status in statuses.items()
                if status not in ("success", "pass")]  # fmt: skip
    kinds = {uid.split(".")[0] for uid in statuses}
    if f"model.lakehouse.{model}" not in statuses or not {"test", "unit_test"} <= kinds:
        problems.append(f"the selection did not run whole: {sorted(statuses)}")
    return problems


# --- The lakehouse and the baseline ----------------------------------------------------


def make_demo(scratch: Path, home: Path, args: argparse.Namespace) -> None:
    print(f"demo lakehouse: simulating {args.days} days, {args.users} users ...", flush=True)
    simulate_workload(home / "landing", scratch / "truth", args)
    if args.setup == "run":
        command = ["python_jobs.run", "--execution-time", DEMO_EXECUTION_TIME]
    else:
        command = ["python_jobs.ingest", "--once"]
    print(f"demo lakehouse: python -m {' '.join(command)} ...", flush=True)
    clock = time.monotonic()
    env = environment(home, home / "dbt" / "target", home / "dbt" / "logs")
    done = subprocess.run(
        [sys.executable, "-m", *command], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the demo's {command[0]} failed:\n{done.stdout[-3000:]}{done.stderr}")
    print(f"demo lakehouse: ready in {time.monotonic() - clock:.0f} s", flush=True)


def baseline_copy(revision: str, destination: Path) -> str | None:
    """The repository at `revision` in `destination`; None, or why it is skipped."""
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{revision}^{{commit}}"], cwd=REPO_ROOT, capture_output=True
    )
    if known.returncode != 0:
        return f"commit {revision} is not in this clone (a shallow clone?)"
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=REPO_ROOT, capture_output=True
    )
    if archive.returncode != 0:
        return f"git archive {revision} failed: {archive.stderr.decode()[-300:]}"
    destination.mkdir(parents=True)
    tar = destination.with_suffix(".tar")
    tar.write_bytes(archive.stdout)
    with tarfile.open(tar) as handle:
        handle.extractall(destination, filter="data")
    tar.unlink()
    return None


def check_view(home: Path, model: str) -> list[str]:
    """The view exists and has one row per Bronze row (its source)."""
    from python_jobs.spark import get_spark

    wait_for_catalog(home)
    spark = get_spark()
    source = {"stg_blog__users": "blog_public_users", "stg_blog__articles": "blog_public_articles",
              "stg_blog__visits": "blog_visits"}.get(model)  # fmt: skip
    if not spark.catalog.tableExists(f"silver.{model}"):
        return [f"silver.{model} does not exist"]
    rows = spark.table(f"silver.{model}").count()
    if source is None:
        return [] if rows else [f"silver.{model} is empty"]
    expected = spark.table(f"bronze.{source}").count()
    if rows != expected or rows == 0:
        return [f"silver.{model} has {rows} rows, bronze.{source} {expected}"]
    print(f"check: silver.{model} exists, {rows} rows = bronze.{source}: OK")
    return []


# --- Report -------------------------------------------------------------------------


def print_runs(runs: list[Run]) -> None:
    head = "| variant | run | parse | wall s | CPU s | " + " | ".join(PHASES) + " |"
    print(head)
    print("|---|---:|---|---:|---:|" + "---:|" * len(PHASES))
    for run in runs:
        cells = " | ".join(f"{run.phases[p]:.1f}" if p in run.phases else "?" for p in PHASES)
        print(f"| {run.variant} | {run.number} | {run.parse} | {run.wall:.1f} | {run.cpu:.1f} | "
              f"{cells} |")  # fmt: skip


def summary(runs: list[Run], variants: list[str]) -> None:
    def median(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    print()
    for kind, select in (("first run (full parse)", lambda r: r.number == 1),
                         ("later runs (median)", lambda r: r.number > 1)):  # fmt: skip
        parts = []
        for variant in variants:
            chosen = [r for r in runs if r.variant == variant and select(r)]
            parts.append(
                f"{variant} {median([r.wall for r in chosen]):.1f} s wall, "
                f"{median([r.cpu for r in chosen]):.1f} s CPU"
            )
        print(f"{kind}: " + "; ".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_analyst_loop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default="stg_blog__users", help="the model (stg_blog__users)")
    parser.add_argument("--repeats", type=int, default=3, help="runs after the first (3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"baseline commit ({BASELINE})")
    parser.add_argument("--no-baseline", action="store_true", help="time this checkout only")
    parser.add_argument(
        "--setup",
        choices=("run", "ingest"),
        default="run",
        help="the demo lakehouse: the run command (run), or ingestion only (ingest)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch lakehouse")
    add_size_arguments(
        parser, users=100, articles=30, days=2, changes_per_day=300, visits_per_day=500
    )
    args = parser.parse_args(argv)

    scratch = scratch_lakehouse("bench-analyst-loop-")
    home = Path(os.environ["LAKEHOUSE_HOME"])
    (home / "dbt").mkdir(parents=True)
    problems: list[str] = []
    try:
        variants = {"ours": REPO_ROOT}
        if not args.no_baseline:
            skipped = baseline_copy(args.baseline, scratch / "baseline")
            if skipped:
                print(f"baseline skipped: {skipped}")
            else:
                variants[f"baseline {args.baseline}"] = scratch / "baseline"
        make_demo(scratch, home, args)
        print(f"machine: {machine()}")
        runs: list[Run] = []
        names = list(variants)
        for number in range(1, args.repeats + 2):
            order = names if number % 2 else names[::-1]
            for name in order:
                label = name.split()[0]
                run = build_once(home, variants[name], label, number, args.model)
                run.variant = name
                runs.append(run)
                problems += [f"{name} run {number}: {p}" for p in run.problems]
                print(f"{name} run {number}: {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, "
                      f"{run.parse} parse, load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        print(f"machine: {machine()}\n")
        print_runs(runs)
        summary(runs, names)
        problems += check_view(home, args.model)
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
