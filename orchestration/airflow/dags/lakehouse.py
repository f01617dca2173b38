"""The lakehouse pipeline on Airflow 3: every hour, ingest -> snapshot -> build.

One task per step of the production run command (`python -m python_jobs.run --step
NAME`), each the project's own command run with the project's `.venv` interpreter, so a
failure names its step and a retry re-runs only that step:

1. ingest: what is available now in the landing zone (or Kafka) into Bronze;
2. snapshot: every devices full load newer than the snapshot, in order;
3. build: `dbt build` with `execution_time` = the run's data interval end.

An execution time that already ran is a backfill of its window (the tables are restored
to their state before it, then its window is merged again), so a retry is safe and a
backfill of past intervals, in order, leaves the tables as the normal runs left them.
The embedded catalog admits one process at a time: one run at a time, one task at a
time. docs/operations.md, "Scheduling with Airflow", says how to deploy and configure it.

Settings (Airflow Variables, else the worker's environment, else the default):

| Variable                | environment             | default                          |
|-------------------------|-------------------------|----------------------------------|
| `lakehouse_project_dir` | `LAKEHOUSE_PROJECT_DIR` | the repository holding this file |
| `lakehouse_home`        | `LAKEHOUSE_HOME`        | `<project>/.lakehouse`           |
| `lakehouse_run_args`    | `LAKEHOUSE_RUN_ARGS`    | none                             |

`lakehouse_run_args` are more arguments of the run command, for every step, e.g.
`--target cluster -- --select +silver` (dbt's, after `--`).

Retries are read when the file is parsed: `LAKEHOUSE_DAG_RETRIES` (default 2) and
`LAKEHOUSE_DAG_RETRY_DELAY_SECONDS` (default 300).
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, CronTriggerTimetable

log = logging.getLogger("lakehouse.dag")

DAG_ID = "lakehouse"
STEPS = ("ingest", "snapshot", "build")
# orchestration/airflow/dags/lakehouse.py -> the repository.
REPOSITORY = Path(__file__).resolve().parents[3]


def _setting(variable: str, environment: str, default: str) -> str:
    """A template for the Airflow Variable `variable`, else the worker's `environment`
    variable (read where the file is parsed), else `default`."""
    fallback = os.environ.get(environment) or default
    return f"{{{{ var.value.get({variable!r}, {fallback!r}) }}}}"


PROJECT = _setting("lakehouse_project_dir", "LAKEHOUSE_PROJECT_DIR", str(REPOSITORY))
# Empty: the project's own default, <project>/.lakehouse.
HOME = _setting("lakehouse_home", "LAKEHOUSE_HOME", "")
RUN_ARGS = _setting("lakehouse_run_args", "LAKEHOUSE_RUN_ARGS", "")
# The data interval's end, ISO-8601 with its offset (the run command normalizes to UTC).
EXECUTION_TIME = "{{ data_interval_end.isoformat() }}"


def step_command(step: str) -> str:
    """The bash command of one step: the run command with the project's interpreter."""
    python = f"{PROJECT}/.venv/bin/python"
    return (
        f'test -x "{python}" || {{ echo "lakehouse: no interpreter at {python}:'
        ' run make setup in the project, or set the Variable lakehouse_project_dir" >&2;'
        " exit 1; }\n"
        f'exec "{python}" -m python_jobs.run --step {step}'
        f' --execution-time "{EXECUTION_TIME}" {RUN_ARGS}'
    )


def _describe(context: dict[str, Any]) -> str:
    ti = context["ti"]
    interval_end = context.get("data_interval_end")
    at = interval_end.isoformat() if interval_end else "unknown"
    tries = f"try {ti.try_number} of {ti.max_tries + 1}"
    return f"step '{ti.task_id}' (run {ti.run_id}, execution time {at}, {tries})"


def report_failure(context: dict[str, Any]) -> None:
    """The failure callback: one line that names the failed step, then what to do."""
    error = context.get("exception")
    log.error(
        "lakehouse: %s failed: %s. Its log above has the command's output; the run "
        "command's last line says why. Fix it, then clear the task: re-running an "
        "execution time is a backfill of its window, safe to repeat.",
        _describe(context),
        error,
    )


def report_retry(context: dict[str, Any]) -> None:
    """The retry callback: the step failed and will be tried again, alone."""
    log.warning(
        "lakehouse: %s failed, retrying it: %s", _describe(context), context.get("exception")
    )


with DAG(
    dag_id=DAG_ID,
    description="Hourly lakehouse run: ingest, snapshot new full loads, dbt build",
    doc_md=__doc__,
    # At the top of every hour, for the hour that ended then: data interval
    # [T - 1 h, T], execution time T.
    schedule=CronTriggerTimetable("0 * * * *", timezone="UTC", interval=timedelta(hours=1)),
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    # Windows are Bronze commits: one run after an outage reads everything since the
    # last one; past intervals are re-run on purpose (a backfill), not caught up.
    catchup=False,
    # The embedded catalog admits one process at a time.
    max_active_runs=1,
    max_active_tasks=1,
    default_args={
        "owner": "lakehouse",
        "retries": int(os.environ.get("LAKEHOUSE_DAG_RETRIES", "2")),
        "retry_delay": timedelta(
            seconds=float(os.environ.get("LAKEHOUSE_DAG_RETRY_DELAY_SECONDS", "300"))
        ),
        "on_failure_callback": report_failure,
        "on_retry_callback": report_retry,
    },
    tags=["lakehouse"],
) as dag:
    tasks = [
        BashOperator(
            task_id=step,
            bash_command=step_command(step),
            cwd=PROJECT,
            env={"LAKEHOUSE_HOME": HOME},
            append_env=True,
            # Exit 99 is a failure like any other (BashOperator skips on 99 by default).
            skip_on_exit_code=None,
        )
        for step in STEPS
    ]
    tasks[0] >> tasks[1] >> tasks[2]
