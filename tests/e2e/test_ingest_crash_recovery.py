"""Exactly once through crashes: SIGKILL the ingestion process at several points.

The whole ingestion process tree (Python driver and its JVM) is killed with SIGKILL,
at two chosen points - after the Bronze append, and after the batch log append but
before Structured Streaming commits the batch to its checkpoint - and at random times
(start-up, mid-batch, between batches). It is restarted after each kill; the last run
goes to the end. Bronze and the dead letters must then hold every landing record
exactly once, and the batch log one row per batch, none missing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from python_jobs import bronze
from python_jobs.spark import REPO_ROOT
from python_jobs.topics import load_topics
from tests.helpers import SHORT_COMMAND_JVM, ingested_records, landing_records

KILL_SEED = 20261122
RANDOM_KILLS = 1


def _start(home: Path, run: int, fault: str | None) -> tuple[subprocess.Popen, Path]:
    # Each run is a short command (killed or run to the end on tiny files): C1 only.
    env = {**os.environ, **SHORT_COMMAND_JVM}
    marker = home / f"fault-{run}.marker"
    # A crash point comes from a test-only wrapper of the job (tests/ingest_with_fault.py).
    job = ["tests.ingest_with_fault", fault, str(marker)] if fault else ["python_jobs.ingest"]
    log = (home / f"ingest-{run}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", *job, "--once", "--max-files-per-batch", "1"],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the JVM dies with it
    )
    return proc, marker


def _kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    # The JVM is in the same group; make sure nothing of it survives.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise AssertionError("the ingestion process group survived SIGKILL")


def _wait_for(marker: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, f"the ingestion job exited ({proc.returncode}) first"
        assert time.monotonic() < deadline, f"fault point not reached: {marker.name}"
        time.sleep(0.1)


@pytest.mark.slow
def test_sigkill_at_any_point_leaves_every_record_exactly_once(
    spark, clean_lakehouse, simulate
) -> None:
    home, landing = clean_lakehouse["home"], clean_lakehouse["landing"]
    simulate(
        landing,
        home / "truth",
        "--seed",
        "11",
        "--days",
        "2",
        "--files-per-topic",
        "3",
        "--users",
        "40",
        "--articles",
        "20",
        "--malformed-rate",
        "0.05",
    )
    rng = random.Random(KILL_SEED)
    plan: list[tuple[str, float | None]] = [
        ("after_bronze_write", None),
        ("after_batch_log", None),
        *[("random", rng.uniform(4.0, 20.0)) for _ in range(RANDOM_KILLS)],
    ]
    kills = []
    for run, (point, delay) in enumerate(plan):
        proc, marker = _start(home, run, None if point == "random" else point)
        if delay is None:
            _wait_for(marker, proc)
        else:
            time.sleep(delay)
        finished = proc.poll() is not None
        if not finished:
            _kill(proc)
        kills.append((point, delay, finished))
    proc, _ = _start(home, len(plan), None)
    assert proc.wait(timeout=600) == 0, (home / f"ingest-{len(plan)}.log").read_text()[-3000:]
    killed = [k for k in kills if not k[2]]
    assert len(killed) >= 2, f"fewer than two kills landed: {kills}"

    for topic in load_topics():
        expected = sorted(landing_records(landing, topic.topic))
        assert ingested_records(spark, topic.topic, topic.table) == expected, topic.topic

    log = spark.read.format("delta").load(bronze.batches_path()).where("not is_heartbeat")
    rows = log.collect()
    per_batch = Counter((r.topic, r.query_id, r.batch_id) for r in rows)
    assert max(per_batch.values()) == 1, "a batch was logged twice"
    for topic in load_topics():
        files = sorted((landing / topic.topic).glob("*.json"))
        lines = sum(len(f.read_text().splitlines()) for f in files)
        mine = [r for r in rows if r.topic == topic.topic]
        # Every batch logged once and none left out (a query numbers its batches from 0),
        # every line counted once. A batch reads one file, or two when a kill fell
        # between the file source logging its next file and the query logging the
        # batch's offsets (ingest.batch_files): at most as many batches as files.
        for query in {r.query_id for r in mine}:
            ids = sorted(r.batch_id for r in mine if r.query_id == query)
            assert ids == list(range(len(ids))), (topic.topic, ids)
        assert 0 < len(mine) <= len(files), topic.topic
        assert sum(r.records_read for r in mine) == lines, topic.topic
        assert all(r.records_read == r.bronze_rows + r.dead_letters + r.tombstones for r in mine)
