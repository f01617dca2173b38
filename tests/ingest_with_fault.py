"""Test-only: the ingestion job with a crash point (tests/e2e/test_ingest_crash_recovery.py).

    python -m tests.ingest_with_fault POINT MARKER [python_jobs.ingest arguments...]

POINT is `after_bronze_write` (a micro-batch's Bronze append is committed, its dead
letters and batch log row are not) or `after_batch_log` (its batch log row is committed,
Structured Streaming's checkpoint is not). When a writer reaches the point it creates
MARKER and waits to be killed. The production job has no fault hooks: this wraps its
functions from outside, then runs its own `main`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from python_jobs import bronze, ingest

POINTS = ("after_bronze_write", "after_batch_log")


def _wait_to_be_killed(marker: Path) -> None:
    marker.touch()
    while True:
        time.sleep(60)


def arm(point: str, marker: Path) -> None:
    if point == "after_bronze_write":
        append = ingest._append

        def append_then_stop(rows, path, app_id, version, partitioned):
            append(rows, path, app_id, version, partitioned)
            if path not in (bronze.dead_letter_path(), bronze.batches_path()):
                _wait_to_be_killed(marker)

        ingest._append = append_then_stop
    elif point == "after_batch_log":
        log_batch = ingest.BatchWriter._log_batch

        def log_then_stop(self, *args, **kwargs):
            log_batch(self, *args, **kwargs)
            _wait_to_be_killed(marker)

        ingest.BatchWriter._log_batch = log_then_stop
    else:
        raise SystemExit(f"unknown fault point {point!r} (one of {', '.join(POINTS)})")


if __name__ == "__main__":
    point, marker, *arguments = sys.argv[1:]
    arm(point, Path(marker))
    sys.exit(ingest.main(arguments))
