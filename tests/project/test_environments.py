"""Schema names per target, from a parse of each (no Spark session).

The production targets keep the contract's names; dev and ci prefix every layer the
project writes, and the `ops` sources (the tables macros write) follow the same rule as
the models; Bronze stays shared. tests/e2e/test_environments.py builds with prefixes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT


def _parse(work: Path, target: str, prefix: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "USER": "alice"}
    env.pop("LAKEHOUSE_SCHEMA_PREFIX", None)
    if prefix is not None:
        env["LAKEHOUSE_SCHEMA_PREFIX"] = prefix
    return subprocess.run(
        [sys.executable, "-m", "python_jobs.run_dbt", "parse", "--no-partial-parse"]
        + ["--target", target, "--target-path", str(work / "target")]
        + ["--log-path", str(work / "logs")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _schemas(work: Path) -> dict[str, set[str]]:
    """Schemas by kind: models of each layer folder, the snapshot, and each source."""
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    found: dict[str, set[str]] = {}
    for node in manifest["nodes"].values():
        if node["resource_type"] == "model":
            layer = node["original_file_path"].split("/")[1]
            found.setdefault(f"model:{layer}", set()).add(node["schema"])
        elif node["resource_type"] == "snapshot":
            found.setdefault("snapshot", set()).add(node["schema"])
    for source in manifest["sources"].values():
        found.setdefault(f"source:{source['source_name']}", set()).add(source["schema"])
    return found


def _expected(prefix: str) -> dict[str, set[str]]:
    return {
        "model:staging": {f"{prefix}silver"},
        "model:intermediate": {f"{prefix}silver"},
        "model:silver": {f"{prefix}silver"},
        "model:marts": {f"{prefix}gold"},
        "model:ops": {f"{prefix}ops"},
        "snapshot": {f"{prefix}silver"},
        "source:ops": {f"{prefix}ops"},
        "source:blog": {"bronze"},
        "source:dead_letters": {"bronze"},
        "source:ingestion": {"ops"},
        "source:reference": {"bronze"},
    }


@pytest.mark.parametrize(
    ("target", "prefix", "expected"),
    [
        ("local", "ignored_here", ""),
        ("cluster", None, ""),
        ("dev", None, "dbt_alice_"),
        ("dev", "dbt_bob", "dbt_bob_"),
        ("ci", "ci_pr_12", "ci_pr_12_"),
    ],
)
def test_each_target_names_every_schema_by_one_rule(
    tmp_path: Path, target: str, prefix: str | None, expected: str
) -> None:
    proc = _parse(tmp_path, target, prefix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _schemas(tmp_path) == _expected(expected)


def test_a_prefix_that_is_no_schema_name_fails_with_the_setting_named(tmp_path: Path) -> None:
    proc = _parse(tmp_path, "ci", "pr-12!")
    assert proc.returncode != 0
    assert "set LAKEHOUSE_SCHEMA_PREFIX to a name of letters" in proc.stdout + proc.stderr
