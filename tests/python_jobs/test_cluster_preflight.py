"""A cluster that is down: one line that says what to start or set, within seconds,
before any JVM starts, and nothing written under the lakehouse home.

Each command runs as a user runs it (a subprocess) against a fresh home, with a port on
loopback that nothing listens on.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from python_jobs.spark import REPO_ROOT


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(home: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("SPARK_MASTER", "DBT_TARGET", "SPARK_THRIFT_HOST", "SPARK_THRIFT_PORT")
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env={**clean, "LAKEHOUSE_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, time.monotonic() - started


def _output_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return (proc.stdout + proc.stderr).splitlines()


def test_ingest_on_a_master_that_does_not_answer_fails_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    master = f"spark://127.0.0.1:{_dead_port()}"
    proc, elapsed = _run(home, "python_jobs.ingest", "--once", SPARK_MASTER=master)
    assert proc.returncode == 1
    lines = _output_lines(proc)
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        f"ingest the Spark master at {master} does not answer: start it with "
        "`make cluster-up`, or unset SPARK_MASTER to run locally"
    )
    assert elapsed < 10, elapsed
    assert not home.exists()


def test_a_master_url_without_a_port_is_refused_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, _ = _run(home, "python_jobs.ingest", "--once", SPARK_MASTER="spark://127.0.0.1")
    assert proc.returncode == 1
    lines = _output_lines(proc)
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "SPARK_MASTER=spark://127.0.0.1 is not a Spark master URL: set it to "
        "spark://host:port, or unset it to run locally"
    )
    assert not home.exists()


def test_dbt_on_a_thrift_server_that_does_not_answer_fails_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    port = _dead_port()
    proc, elapsed = _run(
        home,
        "python_jobs.run_dbt",
        "build",
        DBT_TARGET="cluster",
        SPARK_THRIFT_HOST="127.0.0.1",
        SPARK_THRIFT_PORT=str(port),
    )
    assert proc.returncode == 1
    assert _output_lines(proc) == [
        f"python -m python_jobs.run_dbt: error: the Thrift server at 127.0.0.1:{port} does "
        "not answer: start it with `make cluster-up` or set SPARK_THRIFT_HOST/SPARK_THRIFT_PORT"
    ]
    assert elapsed < 10, elapsed
    assert not home.exists()


def test_a_thrift_server_on_a_held_embedded_catalog_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """Another process (here: this one, holding Derby's lock file as a booted Derby
    does) has the embedded catalog: the server refuses before its JVM starts."""
    home = tmp_path / "home"
    lock = home / "metastore_db" / "dbex.lck"
    lock.parent.mkdir(parents=True)
    with lock.open("w") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        proc, elapsed = _run(home, "python_jobs.tools.thrift_server", LAKEHOUSE_CATALOG="")
    assert proc.returncode == 1
    assert _output_lines(proc) == [
        f"python -m python_jobs.tools.thrift_server: error: the embedded catalog "
        f"{home / 'metastore_db'} is in use by another process (dbt, the Thrift server, docs "
        "or the report): wait for it to finish, or use a shared catalog (make catalog-up, "
        "then set LAKEHOUSE_CATALOG)"
    ]
    assert elapsed < 10, elapsed
    assert sorted(p.name for p in home.iterdir()) == ["metastore_db"]


def test_cluster_up_on_a_port_in_use_fails_in_one_line_and_starts_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc, elapsed = _run(home, "python_jobs.tools.cluster", "up", "--port", str(port))
    assert proc.returncode == 1
    assert _output_lines(proc) == [
        f"python -m python_jobs.tools.cluster: error: port {port} on 127.0.0.1 is already in use: "
        "set CLUSTER_PORT to another port (0 picks a free one)"
    ]
    assert elapsed < 10, elapsed
    assert not home.exists()


def test_cluster_status_and_down_when_nothing_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    status, _ = _run(home, "python_jobs.tools.cluster", "status")
    assert status.returncode == 1
    assert status.stdout == f"not running ({home / 'cluster'}; running: nothing)\n"
    down, _ = _run(home, "python_jobs.tools.cluster", "down")
    assert down.returncode == 0
    assert down.stderr == f"cluster: no cluster running for {home / 'cluster'}\n"
    assert not home.exists()
