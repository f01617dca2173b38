"""Fixtures for end-to-end tests: a clean lakehouse and the workload simulator."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT, paths
from tests.helpers import reset_lakehouse


@pytest.fixture()
def clean_lakehouse(spark):
    reset_lakehouse(spark)
    yield paths()


@pytest.fixture()
def simulate() -> Callable[..., Path]:
    """Run the workload simulator (pure Python) into `landing`; returns the truth dir."""

    def run(landing: Path, truth: Path, *args: str) -> Path:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "python_jobs.simulate",
                "--landing-dir",
                str(landing),
                "--truth-dir",
                str(truth),
                "--quiet",
                *args,
            ],
            cwd=REPO_ROOT,
            env=os.environ.copy(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return truth

    return run
