"""Where the in-process tests' Spark statements go: a pytest plugin that times them, and
a report of what it recorded.

    make test PYTEST_ARGS="-p bench.statement_profile"
    python -m bench.statement_profile [DIR] [--words 4] [--top 30]

(Or any `python -m pytest` command from the repository's root with `-p
bench.statement_profile`; a bare `pytest` command imports `-p` plugins before it puts
the repository on the import path, and does not find `bench`.)

The plugin observes: in every pytest worker it times each dbt command run in that
process (`python_jobs.run_dbt.invoke`) and each statement dbt-spark's session
connection executes, and writes one JSON line per command or statement, with the test
that ran it, to `DIR/<worker>.jsonl` (DIR: $STATEMENT_PROFILE_DIR, else
`.lakehouse/statement-profile` in the repository; each run first deletes the records
of the run before). It changes nothing but this: each worker imports dbt when it
starts, not at its first dbt command. Statements of the processes the tests start
(jobs, the demo, Airflow's steps) and the tests' own Spark reads are not recorded.

The report groups the statements by their first `--words` words (quoted strings and
numbers masked) and prints, per group, the statements' summed time (threads of one
dbt command overlap, so this sums past the wall time), its share, and the worker
time the group covered (the union of its statements' intervals per worker, which
overlapping threads count once); then, per test file, the time in dbt commands and
in statements. A `select` shows only the time to plan it: dbt-spark's session runs it
lazily, when dbt fetches its rows, after `execute` returns. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from python_jobs.spark import REPO_ROOT

ENV = "STATEMENT_PROFILE_DIR"


def profile_dir() -> Path:
    return Path(os.environ.get(ENV) or REPO_ROOT / ".lakehouse" / "statement-profile")


class _Recorder:
    """The JSON lines of one worker, with the test that is running."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.test: str | None = None
        self._lock = threading.Lock()
        self._file = None

    def write(self, record: dict) -> None:
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a")
            self._file.write(json.dumps({**record, "test": self.test}) + "\n")
            self._file.flush()


_recorder: _Recorder | None = None


def pytest_configure(config) -> None:
    """In each worker (or a run without workers): wrap dbt's entry point and the
    session connection's `execute`, each timing and recording, then calling through.
    The records of the run before are deleted first (by pytest-xdist's controller,
    which runs no test, before its workers start)."""
    global _recorder
    worker = hasattr(config, "workerinput")
    distributed = getattr(config.option, "numprocesses", None) or getattr(config.option, "tx", None)
    if not worker:
        for path in profile_dir().glob("*.jsonl"):
            path.unlink()
        if distributed:
            return
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _recorder = recorder = _Recorder(profile_dir() / f"{name}.jsonl")

    from dbt.adapters.spark.session import SessionConnectionWrapper

    from python_jobs import run_dbt

    invoke = run_dbt.invoke
    execute = SessionConnectionWrapper.execute

    def timed_invoke(args, *rest, **options):
        start, clock = time.time(), time.perf_counter()
        try:
            return invoke(args, *rest, **options)
        finally:
            seconds = time.perf_counter() - clock
            text = " ".join(map(str, args))[:300]
            recorder.write({"kind": "invoke", "text": text, "start": start, "seconds": seconds})

    def timed_execute(self, sql, bindings=None):
        start, clock = time.time(), time.perf_counter()
        try:
            return execute(self, sql, bindings)
        finally:
            seconds = time.perf_counter() - clock
            recorder.write(
                {
                    "kind": "statement",
                    "text": statement_text(sql),
                    "start": start,
                    "seconds": seconds,
                    "thread": threading.get_ident(),
                }
            )

    run_dbt.invoke = timed_invoke
    SessionConnectionWrapper.execute = timed_execute


def pytest_runtest_logstart(nodeid: str, location) -> None:
    if _recorder is not None:
        _recorder.test = nodeid


def statement_text(sql: str) -> str:
    """The statement on one line, without dbt's leading `/* {...} */` comment."""
    text = " ".join(sql.split())
    if text.startswith("/*") and "*/" in text:
        text = text[text.index("*/") + 2 :].strip()
    return text[:300]


def shape(text: str, words: int) -> str:
    """A statement's group: its first `words` words, lower case, quoted strings as `?`
    and digits as `N` (so `describe history t limit 1` and `... limit 5` are one)."""
    text = re.sub(r"'[^']*'", "?", text.strip().lower())
    return " ".join(re.sub(r"\d+", "N", text).split()[:words])


def covered(intervals: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) intervals."""
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def read_records(directory: Path) -> list[dict]:
    """Every record of the directory's `*.jsonl`, each with its `worker` (file stem)."""
    records = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append({**json.loads(line), "worker": path.stem})
    return records


def summarize(records: list[dict], words: int = 4) -> dict:
    """Totals, the statement groups (largest summed time first) and the test files
    (most time in dbt commands first)."""
    statements = [r for r in records if r["kind"] == "statement"]
    invokes = [r for r in records if r["kind"] == "invoke"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for record in statements:
        groups[shape(record["text"], words)].append(record)

    def worker_time(rows: list[dict]) -> float:
        by_worker: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in rows:
            by_worker[r["worker"]].append((r["start"], r["start"] + r["seconds"]))
        return sum(covered(intervals) for intervals in by_worker.values())

    statement_seconds = sum(r["seconds"] for r in statements)
    shapes = [
        {
            "shape": name,
            "count": len(rows),
            "seconds": sum(r["seconds"] for r in rows),
            "covered": worker_time(rows),
        }
        for name, rows in groups.items()
    ]
    shapes.sort(key=lambda s: (-s["seconds"], s["shape"]))
    files: dict[str, dict] = defaultdict(lambda: {"invoke": 0.0, "statements": 0, "seconds": 0.0})
    for r in invokes:
        files[(r["test"] or "?").split("::")[0]]["invoke"] += r["seconds"]
    for r in statements:
        entry = files[(r["test"] or "?").split("::")[0]]
        entry["statements"] += 1
        entry["seconds"] += r["seconds"]
    return {
        "invokes": len(invokes),
        "invoke_seconds": sum(r["seconds"] for r in invokes),
        "statements": len(statements),
        "statement_seconds": statement_seconds,
        "covered": worker_time(statements),
        "shapes": shapes,
        "files": sorted(
            ({"file": name, **entry} for name, entry in files.items()),
            key=lambda f: (-f["invoke"], f["file"]),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.statement_profile",
        description="Report what `-p bench.statement_profile` recorded.",
    )
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=None,
        help=f"the records (default: ${ENV}, else .lakehouse/statement-profile)",
    )
    parser.add_argument("--words", type=int, default=4, help="words that name a group (4)")
    parser.add_argument("--top", type=int, default=30, help="groups printed (30)")
    options = parser.parse_args(argv)
    directory = options.directory or profile_dir()
    records = read_records(directory)
    if not records:
        print(f"statement_profile: no records in {directory}", file=sys.stderr)
        return 1
    s = summarize(records, options.words)
    print(
        f"{s['invokes']} dbt commands, {s['invoke_seconds']:.0f} s; {s['statements']} "
        f"statements, {s['statement_seconds']:.0f} s summed, {s['covered']:.0f} s of "
        "worker time covered"
    )
    print(f"{'summed s':>9} {'share':>6} {'count':>6} {'mean s':>7} {'covered s':>10}  statement")
    for g in s["shapes"][: options.top]:
        share = 100 * g["seconds"] / s["statement_seconds"]
        print(
            f"{g['seconds']:9.1f} {share:5.1f}% {g['count']:6d} "
            f"{g['seconds'] / g['count']:7.2f} {g['covered']:10.1f}  {g['shape']}"
        )
    print(f"\n{'dbt s':>8} {'stmt s':>8} {'count':>6}  test file")
    for f in s["files"]:
        print(f"{f['invoke']:8.1f} {f['seconds']:8.1f} {f['statements']:6d}  {f['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
