"""The `cluster` target: dbt over thrift against a real Spark Thrift Server on loopback.

The server (python_jobs.thrift_server) owns the catalog of its own lakehouse home, the
ingestion job writes that home's Bronze by path, and `dbt build --target cluster`
(DBT_TARGET=cluster) runs the project through the server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyhive import hive

from python_jobs import ingest
from python_jobs.spark import REPO_ROOT
from tests.helpers import landing_records


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the thrift server exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(1)
    raise AssertionError(f"the thrift server did not listen on {port} within {timeout}s")


@pytest.mark.slow
def test_dbt_build_runs_through_a_spark_thrift_server(
    spark, tmp_path: Path, simulate, monkeypatch
) -> None:
    home = tmp_path / "cluster-home"
    landing = home / "landing"
    simulate(landing, home / "truth", "--seed", "5", "--days", "1")
    # Bronze of that home, written by path like the ingestion job does next to a cluster.
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    ingest.run(ingest.IngestOptions(landing=landing))

    port = _free_port()
    env = {**os.environ, "LAKEHOUSE_HOME": str(home)}
    log = (tmp_path / "thrift.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "python_jobs.thrift_server", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_port(port, server, timeout=180)
        dbt_env = {
            **env,
            "DBT_TARGET": "cluster",
            "SPARK_THRIFT_HOST": "127.0.0.1",
            "SPARK_THRIFT_PORT": str(port),
            "DBT_TARGET_PATH": str(home / "dbt" / "target"),
            "DBT_LOG_PATH": str(home / "dbt" / "logs"),
        }
        build = subprocess.run(
            # The staging models and both materializations of users (the whole project
            # builds in the other e2e tests; through thrift it took 2.5 minutes).
            [
                sys.executable,
                "-m",
                "python_jobs.run_dbt",
                "build",
                "--select",
                "+users",
                "+users_history",
            ],
            cwd=REPO_ROOT,
            env=dbt_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert build.returncode == 0, build.stdout[-4000:]
        results = json.loads((home / "dbt" / "target" / "run_results.json").read_text())
        statuses = {r["unique_id"]: r["status"] for r in results["results"]}
        assert "model.lakehouse.stg_blog__users" in statuses
        assert set(statuses.values()) <= {"success", "pass"}, statuses

        with hive.connect("127.0.0.1", port=port, username="dbt") as conn:
            cursor = conn.cursor()
            cursor.execute("select count(*) from silver.stg_blog__users")
            (count,) = cursor.fetchone()
            cursor.execute("show schemas")
            schemas = {row[0] for row in cursor.fetchall()}
        assert count == len(landing_records(landing, "blog.public.users"))
        assert schemas == {"default", "bronze", "silver", "gold", "ops"}
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
