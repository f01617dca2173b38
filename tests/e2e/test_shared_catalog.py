"""The shared catalog: many processes on one lakehouse at once (LAKEHOUSE_CATALOG).

A PostgreSQL catalog started by python_jobs.catalog in a lakehouse home of this module's
own; then, at the same time against that lakehouse: continuous ingestion while landing
files keep arriving, a `dbt build` of staging and silver, `docs generate`, the report,
and a Thrift server session. Every process is a subprocess with a small driver; this
process's own `spark` is a Derby session of the suite's home and only reads Delta
tables by path.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from python_jobs.catalog import free_port, port_open
from python_jobs.spark import REPO_ROOT, parse_catalog_url
from python_jobs.topics import load_topics
from tests.helpers import (
    SHORT_COMMAND_JVM,
    bronze_records,
    ingested_records,
    job_env,
    landing_records,
    run_simulator,
)

pytestmark = pytest.mark.slow

TOPICS = {t.topic: t.table for t in load_topics()}
# What the concurrent build selects: what reads Bronze while it is written.
BUILD_PATHS = ("models/staging", "models/intermediate", "models/silver")
# Generous: on a loaded 2-core machine a driver with dbt takes minutes to start.
START_TIMEOUT_S = 900


def _catalog(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "python_jobs.catalog", *args],
        cwd=REPO_ROOT,
        env=job_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def shared(lakehouse_home: Path) -> Iterator[tuple[Path, str]]:
    """(lakehouse home, LAKEHOUSE_CATALOG URL) of a catalog running for this module. The
    home is under the suite's own, not pytest's tmp_path: a pytest session starting
    meanwhile resets pytest's root to 0700, and PostgreSQL, running as another user,
    would lose its data directory and shut down."""
    home = lakehouse_home / "shared-catalog"
    try:
        started = _catalog(home, "up")
        assert started.returncode == 0, started.stderr[-3000:]
        yield home, started.stdout.strip()
    finally:
        stopped = _catalog(home, "down")
        assert stopped.returncode == 0, stopped.stderr
        # down again: nothing running is fine
        again = _catalog(home, "down")
        assert again.returncode == 0 and "not running" in again.stderr, again.stderr


def _env(home: Path, url: str, **extra: str) -> dict[str, str]:
    # Five drivers side by side on a 2-core, shared machine.
    return job_env(
        home, LAKEHOUSE_CATALOG=url, SPARK_DRIVER_MEMORY="1g", **SHORT_COMMAND_JVM, **extra
    )


def _start(name: str, args: list[str], env: dict[str, str], logs: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=(logs / f"{name}.log").open("w"),
        stderr=subprocess.STDOUT,
    )


def _deliver(outbox: Path, landing: Path, stop: threading.Event, pause: float) -> None:
    """Move files from the outbox into the landing zone one by one (atomic renames)."""
    pending = sorted(outbox.glob("*/*.json"), key=lambda f: (f.name, f.parent.name))
    for file in pending:
        if stop.is_set():
            return
        (landing / file.parent.name).mkdir(parents=True, exist_ok=True)
        file.rename(landing / file.parent.name / file.name)
        time.sleep(pause)


def _wait_until(predicate, timeout: float, what: str, procs: dict[str, subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited ({proc.returncode}) before {what}")
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _has_rows(spark, table: str) -> bool:
    try:
        return bool(bronze_records(spark, table))
    except AnalysisException:  # created by the other process, not committed yet
        return False


def _model_names() -> set[str]:
    """The relations the build makes: its models but the ephemeral intermediate ones."""
    paths = [path for path in BUILD_PATHS if path != "models/intermediate"]
    return {f.stem for path in paths for f in (REPO_ROOT / path).rglob("*.sql")}


def _stop(proc: subprocess.Popen, timeout: float = 120) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def test_processes_share_one_catalog_at_once(spark, shared, monkeypatch) -> None:
    from pyhive import hive

    home, url = shared
    # The helpers read Bronze by path under LAKEHOUSE_HOME: this lakehouse's.
    monkeypatch.setenv("LAKEHOUSE_HOME", str(home))
    landing, logs = home / "landing", home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    outbox = home / "outbox"
    sim = run_simulator(
        outbox, home / "truth", "--seed", "11", "--days", "2", "--files-per-topic", "2", home=home
    )
    assert sim.returncode == 0, sim.stderr
    shutil.rmtree(outbox / "reference", ignore_errors=True)
    shutil.rmtree(outbox / ".tmp", ignore_errors=True)
    first = sorted(outbox.glob("blog.public.users/*.json"))[0]
    (landing / first.parent.name).mkdir(parents=True, exist_ok=True)
    first.rename(landing / first.parent.name / first.name)

    env = _env(home, url)
    procs: dict[str, subprocess.Popen] = {}
    times: dict[str, list[datetime]] = {}
    stop = threading.Event()
    # Files keep arriving for about three minutes: through the build and the others.
    pause = max(1.5, 180 / max(1, len(list(outbox.glob("*/*.json")))))
    deliverer = threading.Thread(target=_deliver, args=(outbox, landing, stop, pause))
    thrift_port = free_port()

    def now() -> datetime:
        return datetime.now(UTC).replace(tzinfo=None)

    try:
        procs["ingest"] = _start(
            "ingest",
            ["python_jobs.ingest", "--trigger-interval", "1", "--heartbeat-interval", "3"],
            env,
            logs,
        )
        _wait_until(
            lambda: _has_rows(spark, "blog_public_users"),
            START_TIMEOUT_S,
            "the first file to reach Bronze",
            procs,
        )
        deliverer.start()
        times["build"] = [now()]
        procs["build"] = _start(
            "build",
            ["python_jobs.run_dbt", "build", "--select", *[f"path:{p}" for p in BUILD_PATHS]],
            # Its own dbt target directory: docs generate writes the default one.
            _env(home, url, DBT_TARGET_PATH=str(home / "dbt" / "target-build")),
            logs,
        )
        # Past the build's on-run-start hooks (schemas and ops tables created), the
        # others start while it builds the models.
        _wait_until(
            lambda: re.search(r"START sql \w+ model", (logs / "build.log").read_text()),
            START_TIMEOUT_S,
            "dbt build to start its first model",
            {"ingest": procs["ingest"], "build": procs["build"]},
        )
        for name, args in (
            ("docs", ["python_jobs.run_dbt", "docs", "generate", "--threads", "1"]),
            ("report", ["python_jobs.tools.report"]),
            ("thrift", ["python_jobs.tools.thrift_server", "--port", str(thrift_port)]),
        ):
            times[name] = [now()]
            procs[name] = _start(name, args, env, logs)
        _wait_until(
            lambda: port_open(thrift_port),
            START_TIMEOUT_S,
            "the Thrift server to listen",
            {"thrift": procs["thrift"]},
        )
        with hive.connect("127.0.0.1", port=thrift_port, username="test") as connection:
            cursor = connection.cursor()
            cursor.execute("select count(*) from bronze.blog_public_users")
            (users,) = cursor.fetchone()
            times["thrift"].append(now())
            assert users > 0
            cursor.execute("show tables in bronze")
            bronze_tables = {row[1] for row in cursor.fetchall()}
            # Ingestion's own tables, and the devices loads dbt registers in place.
            assert bronze_tables == {*TOPICS.values(), "dead_letter", "reference_devices"}
            cursor.execute("show tables in ops like 'ingestion_batches'")
            assert [row[1] for row in cursor.fetchall()] == ["ingestion_batches"]

            for name in ("build", "docs", "report"):
                code = procs[name].wait(timeout=1800)
                times[name].append(now())
                assert code == 0, f"{name}:\n" + (logs / f"{name}.log").read_text()[-4000:]
            # A session opened before the build finished sees what it created.
            cursor.execute("show tables in silver")
            silver = {row[1] for row in cursor.fetchall()}
            assert _model_names() <= silver, sorted(_model_names() - silver)
        assert procs["ingest"].poll() is None, "ingestion died during the concurrent runs"

        # They really overlapped: every one started before the build ended, and
        # ingestion committed to Bronze while the build ran.
        build_started, build_ended = times["build"]
        for name in ("docs", "report", "thrift"):
            assert build_started < times[name][0] < build_ended, (name, times)
        assert times["thrift"][1] < build_ended, ("the Thrift query ran after the build", times)
        commits = []
        for table in TOPICS.values():
            history = spark.sql(f"describe history delta.`{home / 'bronze' / table}`").collect()
            commits += [h["timestamp"] for h in history if h["operation"] == "WRITE"]
        assert any(build_started <= c <= build_ended for c in commits), (times, sorted(commits))
        assert (home / "report" / "index.html").is_file()
        assert (home / "dbt" / "target" / "catalog.json").is_file()

        deliverer.join(timeout=600)
        expected = {t: sorted(landing_records(landing, t)) for t in TOPICS}
        _wait_until(
            lambda: all(
                len(ingested_records(spark, topic, table)) >= len(expected[topic])
                for topic, table in TOPICS.items()
            ),
            START_TIMEOUT_S,
            "ingestion to catch up with the landing zone",
            {"ingest": procs["ingest"]},
        )
    finally:
        stop.set()
        codes = {name: _stop(proc) for name, proc in procs.items()}
    assert codes["ingest"] == 0, (logs / "ingest.log").read_text()[-3000:]
    # Every landing line exactly once in Bronze or the dead letters, nothing else.
    for topic, table in TOPICS.items():
        assert ingested_records(spark, topic, table) == expected[topic], topic


def test_catalog_that_cannot_be_used_fails_in_one_line(shared) -> None:
    home, url = shared
    catalog = parse_catalog_url(url)
    # up again: the running catalog, the same URL, no new schema.
    again = _catalog(home, "up")
    assert again.returncode == 0 and again.stdout.strip() == url, again.stderr
    closed = free_port()
    cases = {
        url.replace(f"/{catalog.database}", "/no_such_db"): (
            'database "no_such_db" does not exist: fix DBNAME in LAKEHOUSE_CATALOG'
        ),
        url.replace(f":{catalog.password}@", ":wrong@"): (
            'password authentication failed for user "lakehouse": fix USER:PASSWORD'
        ),
        url.replace(f":{catalog.port}/", f":{closed}/"): (
            "Connection refused: start it with `make catalog-up`, or fix LAKEHOUSE_CATALOG"
        ),
        "mysql://x@127.0.0.1:1/db": "LAKEHOUSE_CATALOG must be empty, 'derby' or postgresql://",
    }
    for bad, expected in cases.items():
        fresh = home.parent / "fresh"
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "python_jobs.run_dbt", "build"],
            cwd=REPO_ROOT,
            env=_env(fresh, bad),
            capture_output=True,
            text=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert len(lines) == 1 and expected in lines[0], proc.stderr[-3000:]
        assert catalog.password not in lines[0]
        assert elapsed < 30, f"{elapsed:.1f}s: {lines}"
        assert not (fresh / "warehouse").exists()
