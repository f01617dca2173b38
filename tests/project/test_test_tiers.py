"""The test tiers: `make test-fast` runs the tests marked `fast` (tests/conftest.py
marks every test of the files tests/tiers.py lists), `make test` runs everything.
No Spark: pytest only collects, in a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from python_jobs.spark import REPO_ROOT
from tests.tiers import FAST_TEST_FILES, SLOWEST_FILES


def test_every_listed_file_exists_once() -> None:
    for listed in (FAST_TEST_FILES, SLOWEST_FILES):
        assert [p for p in listed if not Path(REPO_ROOT, p).is_file()] == []
        assert len(set(listed)) == len(listed)


def test_every_test_of_the_fast_files_is_fast_and_none_is_slow() -> None:
    # Only these files' tests are marked fast, so collecting them is enough: none may
    # be deselected by `slow or not fast`.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-m", "slow or not fast", *FAST_TEST_FILES],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert [line for line in proc.stdout.splitlines() if "::" in line] == []
    assert proc.returncode == 5, proc.stdout + proc.stderr  # pytest: no test collected
    deselected = re.search(r"\((\d+) deselected\)", proc.stdout)
    assert deselected and int(deselected[1]) > 0, proc.stdout
