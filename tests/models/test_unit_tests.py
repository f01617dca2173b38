"""The models' dbt unit tests (`unit_tests:` in each model's YAML), all of them in one
`dbt test --select test_type:unit` on the suite's session: every unit test the YAML
declares runs, and passes. Their inputs are fixture rows (an input that is a model is a
SQL fixture), so they need nothing built beyond an empty lakehouse: the fast tier runs
them (tests/tiers.py). And the check can fail: a broken expectation, on a copy of the
project, fails naming its unit test and the value that differs.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from python_jobs.spark import REPO_ROOT
from tests.helpers import copy_tracked_files

_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def declared_unit_tests(project: Path) -> set[str]:
    """The names of the unit tests the project's model YAML files declare."""
    names: set[str] = set()
    for path in sorted((project / "models").rglob("*.yml")):
        document = yaml.safe_load(path.read_text()) or {}
        names |= {test["name"] for test in document.get("unit_tests") or []}
    return names


def run_unit_tests(*args: str, select: str = "test_type:unit") -> dict[str, tuple[str, str]]:
    """`dbt test --select <select> <args>` in-process: each unit test that ran, by name,
    with its status (`pass`, `fail`, `error`) and dbt's message (the differing rows,
    without terminal colours)."""
    from python_jobs.run_dbt import invoke

    result = invoke(["test", "--select", select, *args])
    if result.result is None:  # dbt stopped before running anything (e.g. a parse error)
        raise AssertionError(f"dbt test --select {select} did not run: {result.exception}")
    return {
        node.node.name: (str(node.status), _COLOUR.sub("", str(node.message or "")))
        for node in result.result.results
        if node.node.resource_type == "unit_test"
    }


def test_every_unit_test_of_the_models_passes(spark) -> None:
    outcomes = run_unit_tests()
    failing = {name: message for name, (status, message) in outcomes.items() if status != "pass"}
    assert failing == {}, "\n\n".join(f"{name}: {message}" for name, message in failing.items())
    assert sorted(outcomes) == sorted(declared_unit_tests(REPO_ROOT))


def test_a_broken_expectation_fails_naming_its_unit_test(spark, tmp_path: Path) -> None:
    project = tmp_path / "project"
    copy_tracked_files(project)
    properties = project / "models" / "staging" / "blog" / "stg_blog__users.yml"
    text = properties.read_text()
    assert text.count("lifetime_value: 123.45,") == 1
    properties.write_text(text.replace("lifetime_value: 123.45,", "lifetime_value: 123.46,"))

    outcomes = run_unit_tests(
        "--project-dir",
        str(project),
        "--target-path",
        str(tmp_path / "target"),
        select="stg_blog__users,test_type:unit",
    )
    statuses = {name: status for name, (status, _) in outcomes.items()}
    assert statuses == {
        "stg_blog__users_decodes_debezium_encodings": "fail",
        "stg_blog__users_truncate_drift_and_metadata": "pass",
    }
    message = outcomes["stg_blog__users_decodes_debezium_encodings"][1]
    assert "actual differs from expected" in message
    assert "123.45" in message and "123.46" in message
