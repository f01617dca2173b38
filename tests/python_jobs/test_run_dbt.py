"""How python_jobs.run_dbt hands dbt the execution time: pure Python, no Spark."""

from __future__ import annotations

import pytest

from python_jobs.run_dbt import split_execution_time


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # Alone: no --vars is left, so dbt's parse carries over between execution times.
        (
            ["build", "--vars", '{execution_time: "2024-10-07T00:00:00"}', "--select", "x"],
            (["build", "--select", "x"], "2024-10-07T00:00:00"),
        ),
        # With other vars: they stay, with their YAML types; an unquoted timestamp is
        # YAML's datetime, which the macro reads as its text, as `| string` would.
        (
            ["run", "--vars={execution_time: 2024-10-07T01:00:00, round: 2, day: 2024-10-01}"],
            (["run", "--vars", "{day: 2024-10-01, round: 2}\n"], "2024-10-07 01:00:00"),
        ),
        # Empty: the run's own start, as an absent var.
        (["build", "--vars", "{execution_time: }"], (["build"], "")),
        # No execution time, or vars that are not a mapping or not YAML: untouched.
        (["build", "--vars", "{a: 1}"], (["build", "--vars", "{a: 1}"], None)),
        (["build", "--vars", "[1, 2]"], (["build", "--vars", "[1, 2]"], None)),
        (["build", "--vars", "{a: [}"], (["build", "--vars", "{a: [}"], None)),
        (["build", "--select", "x"], (["build", "--select", "x"], None)),
    ],
)
def test_the_execution_time_leaves_the_vars(args, expected) -> None:
    assert split_execution_time(args) == expected
