"""The lakehouse DAG on a real Airflow 3 (`.venv-airflow`, `make airflow`).

The DAG (orchestration/airflow/dags/lakehouse.py) runs with Airflow's own runner,
`airflow dags test`, in a lakehouse home of this module's own, through the same wrapper
an operator uses (python_jobs.tools.airflow_local: AIRFLOW_HOME and its SQLite DB under
that home, no server). A small simulated workload: day 1 landed, the interval ending
2024-10-02T00:00 runs; day 2 landed, the interval ending 01:00 runs; then both past
intervals again, in order (a backfill). After each run the tables are read by path from
this process's session (Airflow's task processes have exited and released the embedded
catalog): silver.users equals the simulator's truth of the days landed, the run log
(`ops.window_runs`) has exactly the windows of each execution time; the backfill of the
first interval leaves silver.users and its tombstones as that interval's run left them
(the other silver tables as the second run left them), the backfill of the second
leaves every silver table as its normal run left it.

The DAG's dbt build is narrowed to `+users` (the Variable lakehouse_run_args, as an
operator would) to keep the suite fast; the snapshot step snapshots the devices loads.
Also: a DAG that fails to import fails with Airflow's own message, and a failing step is
retried alone, then the run fails with the failure callback naming the step.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from python_jobs.tools import airflow_local
from tests.e2e.test_cdc_convergence import USER_COLUMNS, describe_difference, table_rows, truth_rows
from tests.helpers import SHORT_COMMAND_JVM, job_env, run_simulator

pytestmark = pytest.mark.slow

FIRST, SECOND, FAILING = "2024-10-02T00:00:00", "2024-10-02T01:00:00", "2024-10-02T02:00:00"
WORKLOAD = ("--seed", "5", "--users", "12", "--articles", "6", "--changes-per-day", "30")
WORKLOAD += ("--visits-per-day", "20", "--files-per-topic", "1")
# Columns written per dbt invocation: a re-run writes them anew.
PER_INVOCATION = {"invocation_id", "quarantined_at", "recorded_at"}
SILVER_TABLES = {"users", "users__tombstones", "users__quarantine", "devices_history"}
AIRFLOW_TIMEOUT_S = 1800


class Lakehouse:
    """The module's lakehouse home and the environment of its Airflow commands."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env

    def airflow(self, *args: str, env: dict[str, str] | None = None):
        return airflow_local.run_airflow(
            list(args),
            env or self.env,
            capture_output=True,
            text=True,
            timeout=AIRFLOW_TIMEOUT_S,
        )

    def simulate(self, *args: str) -> None:
        truth = self.home / "truth"
        proc = run_simulator(self.home / "landing", truth, *args, home=self.home)
        assert proc.returncode == 0, proc.stderr


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    env = airflow_local.airflow_env(home, job_env(home))
    # Tiny data: a small driver per task, compiling with C1 only (each task is a short
    # command); a retry after a second, not five minutes.
    env.update(
        SHORT_COMMAND_JVM,
        SPARK_DRIVER_MEMORY="1g",
        LAKEHOUSE_DAG_RETRIES="1",
        LAKEHOUSE_DAG_RETRY_DELAY_SECONDS="1",
        AIRFLOW_VAR_LAKEHOUSE_RUN_ARGS="-- --select +users",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def lakehouse(lakehouse_home: Path) -> Iterator[Lakehouse]:
    home = lakehouse_home / "airflow-dag"
    shutil.rmtree(home, ignore_errors=True)
    env = airflow_env(home)
    airflow_local.ensure_database(env)
    yield Lakehouse(home, env)


def assert_dag_imports(lakehouse: Lakehouse) -> None:
    """The dags folder parses: Airflow records no import error (its message otherwise)."""
    parsed = lakehouse.airflow("dags", "reserialize")
    assert parsed.returncode == 0, parsed.stdout[-5000:] + parsed.stderr[-5000:]
    errors = lakehouse.airflow("dags", "list-import-errors", "--output", "json")
    assert errors.returncode == 0, errors.stdout[-5000:] + errors.stderr[-5000:]
    assert json.loads(errors.stdout.strip().splitlines()[-1]) == []


def dag_test(lakehouse: Lakehouse, logical_date: str) -> str:
    """One DAG run with Airflow's runner; fails with Airflow's output if the run fails.
    Returns the run's output; checks that each step ran once, in order, with the
    run's data interval end as its execution time."""
    proc = lakehouse.airflow("dags", "test", airflow_local.DAG_ID, logical_date)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-5000:]
    started = re.findall(r"\[DAG TEST\] starting task_id=(\w+)", proc.stdout)
    assert started == ["ingest", "snapshot", "build"], started
    times = re.findall(r"run: target local, execution time (\S+)", proc.stdout)
    steps = re.findall(r"==> run: step 1/1: (\w+)", proc.stdout)
    assert (times, steps) == ([logical_date] * 3, started), (times, steps)
    return proc.stdout


def silver_state(spark, home: Path) -> dict[str, list[tuple]]:
    """Every silver Delta table of the home, read by path: its rows, sorted, without the
    columns a dbt invocation stamps."""
    state = {}
    for path in sorted((home / "warehouse" / "silver.db").iterdir()):
        if not (path / "_delta_log").is_dir():
            continue
        frame = spark.read.format("delta").load(str(path))
        frame = frame.select([c for c in frame.columns if c not in PER_INVOCATION])
        state[path.name] = sorted((tuple(row) for row in frame.collect()), key=repr)
    assert set(state) == SILVER_TABLES
    return state


def assert_users_match_truth(spark, home: Path, truth: Path, label: str) -> None:
    spark.read.format("delta").load(str(home / "warehouse" / "silver.db" / "users")) \
        .createOrReplaceTempView("airflow_dag_users")  # fmt: skip
    want = truth_rows(truth, "users_final.jsonl", USER_COLUMNS)
    got = table_rows(spark, "airflow_dag_users", USER_COLUMNS)
    assert want, f"{label}: the truth has no users"
    assert got == want, f"{label}: silver.users differs\n" + describe_difference(
        got, want, USER_COLUMNS
    )


def window_runs(spark, home: Path) -> list[tuple]:
    """silver.users's run log: (execution time, kind, window, status, change rows)."""
    log = spark.read.format("delta").load(str(home / "warehouse" / "ops.db" / "window_runs"))
    rows = log.where("model = 'silver.users'").orderBy("recorded_at").collect()
    return [
        (
            r.execution_time.isoformat(),
            r.run_kind,
            r.window_start,
            r.window_end,
            r.status,
            r.change_rows,
        )
        for r in rows
    ]


def test_hourly_runs_then_a_backfill_of_both_intervals_in_order(spark, lakehouse) -> None:
    home = lakehouse.home
    assert_dag_imports(lakehouse)

    lakehouse.simulate(*WORKLOAD, "--days", "1")
    truth_day_1 = home / "truth-day-1"
    shutil.copytree(home / "truth", truth_day_1)
    dag_test(lakehouse, FIRST)
    assert_users_match_truth(spark, home, truth_day_1, f"after the run of {FIRST}")
    after_first = silver_state(spark, home)
    first = window_runs(spark, home)
    # Bronze's users table: version 0 created it, 1 is day 1, 2 will be day 2.
    assert [r[:5] for r in first] == [
        (FIRST, "create", None, 1, "started"),
        (FIRST, "create", None, 1, "succeeded"),
    ]
    first_changes = first[1][5]
    assert first_changes > 0

    lakehouse.simulate("--resume", "--days", "1")
    dag_test(lakehouse, SECOND)
    assert_users_match_truth(spark, home, home / "truth", f"after the run of {SECOND}")
    after_second = silver_state(spark, home)
    assert after_second["users"] != after_first["users"]
    second = window_runs(spark, home)
    assert second[:2] == first
    assert [r[:5] for r in second[2:]] == [
        (SECOND, "incremental", 1, 2, "started"),
        (SECOND, "incremental", 1, 2, "succeeded"),
    ]
    second_changes = second[3][5]
    assert second_changes > 0

    # The backfill: both past intervals again, in order. Each restores silver.users and
    # its tombstones to their state before that interval's first run and merges the
    # recorded window again; the devices snapshot has no new load to take.
    dag_test(lakehouse, FIRST)
    assert_users_match_truth(spark, home, truth_day_1, f"after the backfill of {FIRST}")
    restored = {name: after_first[name] for name in ("users", "users__tombstones")}
    assert silver_state(spark, home) == {**after_second, **restored}
    assert window_runs(spark, home)[4:] == [
        (FIRST, "rerun", None, 1, "started", None),
        (FIRST, "rerun", None, 1, "succeeded", first_changes),
    ]
    dag_test(lakehouse, SECOND)
    assert_users_match_truth(spark, home, home / "truth", f"after the backfill of {SECOND}")
    assert silver_state(spark, home) == after_second
    assert window_runs(spark, home)[6:] == [
        (SECOND, "rerun", 1, 2, "started", None),
        (SECOND, "rerun", 1, 2, "succeeded", second_changes),
    ]

    # Airflow's own record: one run per interval (a re-run replaces its run), succeeded.
    runs = lakehouse.airflow("dags", "list-runs", airflow_local.DAG_ID, "--output", "json")
    assert runs.returncode == 0, runs.stderr[-3000:]
    recorded = json.loads(runs.stdout.strip().splitlines()[-1])
    assert sorted((r["logical_date"], r["state"]) for r in recorded) == [
        (f"{FIRST}+00:00", "success"),
        (f"{SECOND}+00:00", "success"),
    ]


def test_a_failing_step_is_retried_alone_then_named_by_the_callback(
    spark, lakehouse, lakehouse_home: Path
) -> None:
    """The run's LAKEHOUSE_HOME is the suite's own, whose embedded catalog this process
    holds: the ingest step is refused in one line (nothing written), retried once,
    refused again; the run fails, its later steps never start."""
    # This process boots its embedded catalog (reading tables by path does not): Derby
    # then holds its lock file until the session ends.
    spark.sql("show databases").collect()
    assert (lakehouse_home / "metastore_db" / "dbex.lck").exists()
    env = {**lakehouse.env, "AIRFLOW_VAR_LAKEHOUSE_HOME": str(lakehouse_home)}
    proc = lakehouse.airflow("dags", "test", airflow_local.DAG_ID, FAILING, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output[-5000:]
    assert proc.stderr.strip().splitlines()[-1] == "DagRun failed", proc.stderr[-3000:]
    started = re.findall(r"\[DAG TEST\] starting task_id=(\w+)", proc.stdout)
    assert started == ["ingest", "ingest"], started
    refusals = re.findall(r"run: the embedded catalog .* is in use by another process", output)
    assert len(refusals) == 2, output[-5000:]
    step = rf"lakehouse: step 'ingest' \(run manual__\S+, execution time {FAILING}\+00:00"
    assert re.search(rf"{step}, try 1 of 2\) failed, retrying it: ", output), output[-5000:]
    assert re.search(rf"{step}, try 2 of 2\) failed: ", output), output[-5000:]
    run_id = re.search(r"DagRun Finished: dag_id=lakehouse, .*?run_id=(\S+),", output).group(1)
    states = lakehouse.airflow("tasks", "states-for-dag-run", "lakehouse", run_id, "-o", "json")
    assert states.returncode == 0, states.stderr[-3000:]
    recorded = json.loads(states.stdout.strip().splitlines()[-1])
    assert sorted((s["task_id"], s["state"]) for s in recorded) == [
        ("build", "upstream_failed"),
        ("ingest", "failed"),
        ("snapshot", "upstream_failed"),
    ]


def test_a_dag_that_fails_to_import_fails_with_airflows_message(lakehouse) -> None:
    """A copy of the DAG with a bad import, in a dags folder and an Airflow home of its
    own: Airflow records the import error with the traceback, and `dags test` fails with
    its own message."""
    broken = lakehouse.home / "broken"
    dags = broken / "dags"
    dags.mkdir(parents=True)
    source = (airflow_local.DAGS_FOLDER / "lakehouse.py").read_text()
    bad = source.replace("import DAG, CronTriggerTimetable", "import DAG, CronTriggerTimetabel")
    assert bad != source
    (dags / "lakehouse.py").write_text(bad)
    env = airflow_env(broken, AIRFLOW__CORE__DAGS_FOLDER=str(dags))
    airflow_local.ensure_database(env)

    lakehouse.airflow("dags", "reserialize", env=env)
    errors = lakehouse.airflow("dags", "list-import-errors", "--output", "json", env=env)
    assert errors.returncode == 1, errors.stdout[-3000:] + errors.stderr[-3000:]
    [error] = json.loads(errors.stdout.strip().splitlines()[-1])
    assert error["filepath"] == "lakehouse.py"
    assert (
        error["error"]
        .strip()
        .splitlines()[-1]
        .startswith("ImportError: cannot import name 'CronTriggerTimetabel' from 'airflow.sdk'")
    ), error["error"]

    proc = lakehouse.airflow("dags", "test", airflow_local.DAG_ID, FIRST, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "airflow.sdk.exceptions.AirflowException: Dag 'lakehouse' could not be found; "
        "either it does not exist or it failed to parse."
    ), proc.stderr[-3000:]
    assert "cannot import name 'CronTriggerTimetabel'" in proc.stdout
