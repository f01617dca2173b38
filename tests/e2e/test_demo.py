"""`make demo` on a separate LAKEHOUSE_HOME: the summary, and nothing written elsewhere.

The demo runs as a user would run it (`make demo LAKEHOUSE_HOME=...`), with HOME pointed
at an empty directory so that any write to the user's home shows up. Afterwards: HOME is
still empty, /tmp has no new entries, and the repository's `git status` (ignored files
included) is what it was.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--ignored"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.slow
def test_make_demo_writes_only_under_its_home(tmp_path: Path) -> None:
    home = tmp_path / "x"
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "LAKEHOUSE_HOME",
            "TMPDIR",
            "PYTHONPYCACHEPREFIX",
            "DBT_TARGET_PATH",
            "DBT_LOG_PATH",
            "MAKEFLAGS",
            "MAKELEVEL",
        )
    }
    env["HOME"] = str(user_home)
    tmp_before = set(os.listdir("/tmp"))
    status_before = _git_status()

    proc = subprocess.run(
        ["make", "demo", f"LAKEHOUSE_HOME={home}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout[proc.stdout.index("==> [4/4] summary") :]
    for relation in ("blog_public_users", "blog_public_articles", "blog_visits"):
        assert f"bronze   {relation}" in summary
    assert "silver   stg_blog__users" in summary
    assert (home / "dbt" / "target" / "index.html").exists()
    assert (home / "metastore_db").is_dir()

    assert sorted(str(p.relative_to(user_home)) for p in user_home.rglob("*")) == []
    # The suite's other worker (make test runs two) may make its own temporary homes.
    new_in_tmp = set(os.listdir("/tmp")) - tmp_before
    assert {name for name in new_in_tmp if not name.startswith("lakehouse-test-")} == set()
    assert _git_status() == status_before
