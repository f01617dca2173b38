"""The production run command (`python -m python_jobs.run`) and the one-line refusals.

- A run whose build fails (the visits' rejected-share test is an error) exits non-zero
  and names the step; what the steps before it did stays (Bronze, the model).
- A run whose ingestion cannot start safely (the checkpoint is gone but Bronze holds
  the records) stops at the ingest step: nothing appended, no later step started.
- A second process on the embedded catalog is refused at once with one line, before a
  JVM starts, and writes nothing (this pytest process holds the catalog).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from python_jobs import run
from python_jobs.spark import REPO_ROOT
from tests.gold.test_fct_visits import visit
from tests.helpers import bronze_records

VISITS = [
    visit("v1", "2024-10-06T09:00:00", 7),
    visit("v2", "2024-10-06T09:05:00", None),
    visit("v3", "2024-10-06T09:10:00", 7, device_type="watch"),
    visit("v4", "2024-10-06T09:15:00", 8, device_type="watch"),
    visit("v5", "2024-10-06T09:20:00", 9, device_type="console"),
]
AT = "2024-10-07T00:00:00"


def _land(landing: Path, topic: str, name: str, lines: list[str]) -> None:
    directory = landing / topic
    directory.mkdir(parents=True, exist_ok=True)
    scratch = landing / f".{name}.tmp"
    scratch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    scratch.rename(directory / name)


def test_execution_time_is_checked_before_anything_runs() -> None:
    assert run.parse_execution_time("2024-10-07T02:00:00+02:00") == AT
    with pytest.raises(SystemExit):
        run.parse_args(["--execution-time", "yesterday"])
    with pytest.raises(SystemExit):
        run.parse_args(["--select", "visits"])  # dbt's arguments go after --
    with pytest.raises(SystemExit):
        run.parse_args(["--step", "publish"])
    with pytest.raises(SystemExit):
        run.parse_args(["--step", "build", "--skip-ingest"])
    args, dbt_args = run.parse_args(["--step", "snapshot", "--", "--select", "+users"])
    assert (args.step, dbt_args) == ("snapshot", ["--select", "+users"])


def test_the_snapshot_step_keeps_the_dbt_arguments_but_the_build_selection() -> None:
    """dbt adds up repeated selections: the build's `--select` must not reach the
    snapshot step's `build --select +devices_history` (it would build those models
    there, at the default execution time)."""
    args = ["--select", "+users", "users_history", "--threads", "4", "--exclude=visits"]
    args += ["-s", "x", "--full-refresh", "--selector", "nightly", "-m", "y", "--target", "dev"]
    assert run.without_selection(args) == ["--threads", "4", "--full-refresh", "--target", "dev"]
    assert run.without_selection([]) == []


@pytest.mark.slow
def test_a_failing_step_stops_the_run_and_is_named(spark, clean_lakehouse, capsys) -> None:
    landing = clean_lakehouse["landing"]
    _land(landing, "blog.visits", "visits-0001.json", VISITS)

    # 3 of 5 visits have an unsupported device: share 0.6 > max_share 0.5, an error.
    code = run.main(["--execution-time", AT, "--", "--select", "+visits"])
    out, err = capsys.readouterr()
    assert code == 1
    assert [line for line in out.splitlines() if line.startswith("==> run:")] == [
        "==> run: step 1/3: ingest",
        "==> run: step 2/3: snapshot",
        "==> run: step 3/3: build",
    ]
    assert err.strip().splitlines()[-1] == (
        f"run: step 'build' failed: dbt build failed (see dbt's output above; execution time {AT})"
    )
    assert [r[1] for r in bronze_records(spark, "blog_visits")] == [1, 2, 3, 4, 5]
    kept = sorted(r.visit_id for r in spark.table("silver.visits").collect())
    assert kept == ["v1", "v2"]

    # The checkpoints are lost while Bronze holds the records: ingesting again would
    # append them twice, so the run stops at its first step and nothing is appended.
    shutil.rmtree(clean_lakehouse["checkpoints"])
    _land(landing, "blog.visits", "visits-0002.json", [visit("v6", "2024-10-06T10:00:00", 7)])
    code = run.main(["--execution-time", "2024-10-08T00:00:00", "--", "--select", "+visits"])
    out, err = capsys.readouterr()
    assert code == 1
    assert [line for line in out.splitlines() if line.startswith("==> run:")] == [
        "==> run: step 1/3: ingest"
    ]
    last = err.strip().splitlines()[-1]
    assert last.startswith("run: step 'ingest' failed: ") and "checkpoint" in last, last
    assert [r[1] for r in bronze_records(spark, "blog_visits")] == [1, 2, 3, 4, 5]


def _listing(home: Path) -> list[tuple[str, int]]:
    """What the refused commands could write: the home but for scratch space and the
    Kafka broker another test may be running from it."""
    return sorted(
        (str(p.relative_to(home)), p.stat().st_mtime_ns)
        for p in home.rglob("*")
        if p.exists() and p.relative_to(home).parts[0] not in ("tmp", "kafka")
    )


@pytest.mark.parametrize(
    "command",
    [
        ["python_jobs.run_dbt", "build"],
        ["python_jobs.run", "--skip-ingest"],
        ["python_jobs.tools.report"],
    ],
    ids=["run_dbt", "run", "report"],
)
def test_a_second_process_on_the_embedded_catalog_is_refused_at_once(
    spark, lakehouse_home: Path, command: list[str]
) -> None:
    assert spark.catalog.currentDatabase()  # this process has the catalog booted
    before = _listing(lakehouse_home)
    proc = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=REPO_ROOT,
        env={**os.environ, "LAKEHOUSE_CATALOG": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    # One line and nothing else: no JVM started (it would print its own notices).
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and not proc.stdout.strip(), proc.stdout + proc.stderr
    assert "is in use by another process" in lines[0] and "make catalog-up" in lines[0]
    assert _listing(lakehouse_home) == before
