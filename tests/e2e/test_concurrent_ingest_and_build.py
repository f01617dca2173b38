"""Ingestion keeps running while `dbt build` holds the catalog (embedded default).

The ingestion job runs in its own process with a catalog-free session and appends to
Bronze by path every second, while this process runs `dbt build` on the catalog-bound
session; landing files keep arriving during the build.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException

from python_jobs import bronze
from python_jobs.spark import REPO_ROOT, paths
from python_jobs.topics import load_topics
from tests.helpers import bronze_records, ingested_records, landing_records

# topic -> Bronze table, from the registry (test_topics.py pins the list).
TOPICS = {t.topic: t.table for t in load_topics()}


def _deliver(outbox: Path, landing: Path, stop: threading.Event, pause: float) -> None:
    """Move files from the outbox into the landing zone one by one (atomic renames)."""
    for topic in TOPICS:
        (landing / topic).mkdir(parents=True, exist_ok=True)
    pending = sorted(outbox.glob("*/*.json"), key=lambda f: (f.name, f.parent.name))
    for file in pending:
        if stop.is_set():
            return
        file.rename(landing / file.parent.name / file.name)
        time.sleep(pause)


def _has_rows(spark, table: str) -> bool:
    """Whether the Bronze table exists (its first commit is complete) and has rows."""
    try:
        return bool(bronze_records(spark, table))
    except AnalysisException:  # created by the other process, not committed yet
        return False


def _wait_until(predicate, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the ingestion job exited ({proc.returncode}) before {what}")
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.slow
def test_ingestion_runs_while_dbt_build_runs(spark, dbt, clean_lakehouse, simulate) -> None:
    home = clean_lakehouse["home"]
    landing = clean_lakehouse["landing"]
    outbox = home / "outbox"
    simulate(outbox, home / "truth", "--seed", "7", "--days", "2", "--files-per-topic", "2")
    shutil.rmtree(outbox / "reference", ignore_errors=True)
    shutil.rmtree(outbox / ".tmp", ignore_errors=True)
    first = sorted(outbox.glob("blog.public.users/*.json"))[0]

    log_file = (home / "ingest-concurrent.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "python_jobs.ingest",
            "--trigger-interval",
            "1",
            "--landing-dir",
            str(landing),
            "--heartbeat-interval",
            "3",
        ],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    stop = threading.Event()
    deliverer = threading.Thread(target=_deliver, args=(outbox, landing, stop, 1.5))
    try:
        # Let the ingestion job come up and ingest a first file (a warm stream), so that
        # its later batches overlap the build instead of its start-up.
        (landing / first.parent.name).mkdir(parents=True, exist_ok=True)
        first.rename(landing / first.parent.name / first.name)
        _wait_until(
            lambda: _has_rows(spark, "blog_public_users"),
            timeout=240,
            what="the first file to reach Bronze",
            proc=proc,
        )
        deliverer.start()
        build_started = datetime.now(UTC).replace(tzinfo=None)
        # Silver (the change streams' and the visits' models, their tests): what reads
        # Bronze while it is written; gold builds on silver in the demo test.
        dbt(
            "build",
            "--select",
            "path:models/staging",
            "path:models/intermediate",
            "path:models/silver",
        )
        build_ended = datetime.now(UTC).replace(tzinfo=None)
        assert proc.poll() is None, "the ingestion job died while dbt was building"

        # Bronze commits landed while dbt held the catalog: the two really overlapped.
        commits = []
        for table in TOPICS.values():
            history = spark.sql(f"describe history delta.`{paths()['bronze'] / table}`").collect()
            commits += [h["timestamp"] for h in history if h["operation"] == "WRITE"]
        assert any(build_started <= c <= build_ended for c in commits), (
            f"no Bronze commit between {build_started} and {build_ended}: {sorted(commits)}"
        )

        deliverer.join(timeout=300)
        expected = {t: sorted(landing_records(landing, t)) for t in TOPICS}
        _wait_until(
            lambda: all(
                len(ingested_records(spark, topic, table)) >= len(expected[topic])
                for topic, table in TOPICS.items()
            ),
            timeout=180,
            what="ingestion to catch up with the landing zone",
            proc=proc,
        )
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        log_file.close()
    assert code == 0, (home / "ingest-concurrent.log").read_text()[-3000:]

    # Every landing line exactly once in Bronze or the dead letters, nothing else.
    for topic, table in TOPICS.items():
        assert ingested_records(spark, topic, table) == expected[topic], topic

    # The idle queries said they were alive: heartbeat rows after the last batches.
    log = spark.read.format("delta").load(bronze.batches_path())
    for topic in TOPICS:
        mine = log.where(f"topic = '{topic}'")
        assert mine.where("not is_heartbeat").count() > 0, topic
        assert mine.where("is_heartbeat and records_read = 0").count() > 0, topic

    # And a build after the stream caught up sees every users change.
    dbt("build", "--select", "stg_blog__users")
    staged = spark.table("silver.stg_blog__users").count()
    assert staged == len(expected["blog.public.users"])
