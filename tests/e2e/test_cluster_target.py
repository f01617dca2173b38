"""The `cluster` target on a real Spark standalone cluster on loopback.

`python -m python_jobs.tools.cluster up` (what `make cluster-up` runs) starts a master, two
1-core workers and a Thrift server running on them, in the test's own lakehouse home,
with the shared catalog (`python -m python_jobs.catalog up`, PostgreSQL). The simulated
workload is ingested on the cluster (SPARK_MASTER=spark://...), `dbt build` runs with
DBT_TARGET=cluster through the Thrift server, and silver and gold equal the simulator's
truth (the helpers of test_cdc_convergence, which checks the same tables built on the
local target); the devices snapshot step (`python_jobs.snapshot_loads`) takes each load
through the Thrift server and equals the simulator's devices history. The master's
status API shows both applications got executors on the two workers, and the Thrift
server's REST API shows that executors on the workers, not the driver, ran the tasks.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyhive import hive

from python_jobs.spark import REPO_ROOT
from python_jobs.tools import cluster
from tests.e2e.test_cdc_convergence import assert_matches_truth, assert_visits_match_truth
from tests.e2e.test_devices_history import history, truth_history
from tests.helpers import SHORT_COMMAND_JVM, job_env

# Silver and gold over users, articles and visits: the models and their tests (the
# whole project builds in the demo test; on the 1-core executor it takes ~10 minutes).
# The aggregate is in: a test of fct_visits reconciles it with the aggregate.
# The status APIs answer slowly while a loaded 2-core machine runs the build beside them.
STATUS_TIMEOUT_S = 60.0
SELECT = ("--select", "+fct_visits", "+agg_article_daily_visits", "+users", "+articles")


class _Rows:
    def __init__(self, rows: list[tuple]) -> None:
        self._rows = rows

    def collect(self) -> list[tuple]:
        return self._rows


class _Table:
    def __init__(self, dtypes: list[tuple[str, str]]) -> None:
        self.dtypes = dtypes


class ThriftSession:
    """The two calls the truth helpers make on a SparkSession (`table(...).dtypes`,
    `sql(...).collect()`), answered by the Thrift server over HiveServer2."""

    def __init__(self, host: str, port: int) -> None:
        self._connection = hive.connect(host, port=port, username="dbt")

    def sql(self, query: str) -> _Rows:
        cursor = self._connection.cursor()
        cursor.execute(query)
        return _Rows([tuple(row) for row in cursor.fetchall()])

    def table(self, relation: str) -> _Table:
        dtypes = []
        for name, data_type, *_ in self.sql(f"describe {relation}").collect():
            if not name or name.startswith("#"):
                break
            dtypes.append((name, data_type))
        return _Table(dtypes)

    def close(self) -> None:
        self._connection.close()


def _run(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _ok(proc: subprocess.CompletedProcess, what: str) -> str:
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture()
def cluster_home(lakehouse_home: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A lakehouse home with the shared catalog (PostgreSQL) and the cluster up; both
    stopped after, also when the test fails. Yields the home and the environment to run
    jobs in. The home is under the suite's own (not pytest's tmp_path: a pytest session
    starting meanwhile resets its root to 0700, and PostgreSQL, running as another
    user, would lose its data directory)."""
    home = lakehouse_home / "cluster-home"
    env = job_env(home, **SHORT_COMMAND_JVM)
    try:
        started = time.monotonic()
        url = _ok(_run(env, "python_jobs.catalog", "up", timeout=600), "catalog up")
        env["LAKEHOUSE_CATALOG"] = url.strip().splitlines()[-1]
        print(f"\ncatalog up: {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        ports = ("--port", "0", "--ui-port", "0", "--thrift-port", "0", "--thrift-ui-port", "0")
        _ok(_run(env, "python_jobs.tools.cluster", "up", *ports, timeout=600), "cluster up")
        print(f"cluster up: {time.monotonic() - started:.1f} s")
        yield home, env
    finally:
        down = _run(env, "python_jobs.tools.cluster", "down", timeout=300)
        _run(env, "python_jobs.catalog", "down", timeout=120)
        assert down.returncode == 0, down.stderr


def _read_env(home: Path) -> dict[str, str]:
    lines = (home / "cluster" / "cluster.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def _executors_by_worker(master: dict) -> dict[str, set[str]]:
    """Per ALIVE worker: the applications that have or had an executor on it (from the
    master's status API, then each worker's own)."""
    placed = {}
    for worker in master["workers"]:
        if worker["state"] != "ALIVE":
            continue
        state = cluster.get_json(f"{worker['webuiaddress']}/json/", timeout=STATUS_TIMEOUT_S)
        executors = state["executors"] + state["finishedexecutors"]
        placed[worker["id"]] = {executor["appid"] for executor in executors}
    return placed


@pytest.mark.slow
def test_dbt_build_on_the_cluster_equals_the_truth(cluster_home, simulate, monkeypatch) -> None:
    home, env = cluster_home
    addresses = _read_env(home)
    landing = home / "landing"
    truth = simulate(landing, home / "truth", "--seed", "5", "--days", "1")

    # Ingestion on the cluster: its executor writes the Bronze Delta tables.
    started = time.monotonic()
    _ok(
        _run({**env, "SPARK_MASTER": addresses["SPARK_MASTER"]}, "python_jobs.ingest", "--once"),
        "ingestion on the cluster",
    )
    print(f"ingest on the cluster: {time.monotonic() - started:.1f} s")

    master = cluster.get_json(f"{addresses['CLUSTER_UI_URL']}/json/", timeout=STATUS_TIMEOUT_S)
    assert master["url"] == addresses["SPARK_MASTER"]
    assert master["aliveworkers"] == 2
    apps = {app["name"]: app for app in master["activeapps"] + master["completedapps"]}
    assert apps["lakehouse-thrift-server"]["state"] == "RUNNING"
    assert apps["lakehouse"]["state"] == "FINISHED"  # the ingestion job
    thrift_app, ingest_app = apps["lakehouse-thrift-server"]["id"], apps["lakehouse"]["id"]
    # One core each: the Thrift server's executor on one worker, ingestion's on the other.
    placed = sorted(_executors_by_worker(master).values(), key=sorted)
    assert placed == sorted([{thrift_app}, {ingest_app}], key=sorted), placed

    # dbt through the Thrift server on the cluster.
    dbt_env = {
        **env,
        "DBT_TARGET": "cluster",
        "SPARK_THRIFT_HOST": addresses["SPARK_THRIFT_HOST"],
        "SPARK_THRIFT_PORT": addresses["SPARK_THRIFT_PORT"],
    }
    started = time.monotonic()
    _ok(_run(dbt_env, "python_jobs.run_dbt", "build", *SELECT, timeout=1800), "dbt build")
    print(f"dbt build, cluster target: {time.monotonic() - started:.1f} s")

    # The snapshot step on the cluster target: each devices load in order, the snapshot
    # read and its last load recorded through the Thrift server; then nothing new.
    loads = sorted(d.name for d in (landing / "reference" / "devices").iterdir())
    taken = _ok(_run(dbt_env, "python_jobs.snapshot_loads", timeout=1800), "snapshot_loads")
    assert re.findall(r"snapshotting the load of (\S+)", taken) == loads
    again = _ok(_run(dbt_env, "python_jobs.snapshot_loads"), "snapshot_loads again")
    assert f"devices_history: no load after {loads[-1]} to snapshot" in again.splitlines()

    session = ThriftSession(addresses["SPARK_THRIFT_HOST"], int(addresses["SPARK_THRIFT_PORT"]))
    try:
        assert_matches_truth(session, truth, "cluster target")
        assert_visits_match_truth(session, truth, "cluster target")
        assert history(session) == truth_history(truth)
    finally:
        session.close()

    # The Thrift server's tasks ran on its executor on a worker, none on the driver.
    api = f"{addresses['THRIFT_UI_URL']}/api/v1/applications"
    assert [app["id"] for app in cluster.get_json(api, timeout=STATUS_TIMEOUT_S)] == [thrift_app]
    executors = {
        e["id"]: e
        for e in cluster.get_json(f"{api}/{thrift_app}/executors", timeout=STATUS_TIMEOUT_S)
    }
    assert executors["driver"]["totalTasks"] == 0
    on_workers = {i: e for i, e in executors.items() if i != "driver"}
    assert on_workers and all(e["totalTasks"] > 0 for e in on_workers.values()), executors
    assert all(e["hostPort"].startswith("127.0.0.1:") for e in on_workers.values())

    # cluster-down stops every process it started, executors included.
    _ok(_run(env, "python_jobs.tools.cluster", "down", timeout=300), "cluster down")
    status = _run(env, "python_jobs.tools.cluster", "status")
    assert status.returncode == 1, status.stdout
    with monkeypatch.context() as patched:
        patched.setenv("LAKEHOUSE_HOME", str(home))
        assert cluster.executor_pids() == []
        assert cluster.running() == {}
