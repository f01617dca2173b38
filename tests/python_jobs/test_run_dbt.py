"""How python_jobs.run_dbt hands dbt the vars that change every run (the execution time,
the devices load a snapshot takes): pure Python, no Spark."""

from __future__ import annotations

import pytest

from python_jobs.run_dbt import split_env_vars

ET = "LAKEHOUSE_EXECUTION_TIME"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # Alone: no --vars is left, so dbt's parse carries over between execution times.
        (
            ["build", "--vars", '{execution_time: "2024-10-07T00:00:00"}', "--select", "x"],
            (["build", "--select", "x"], {ET: "2024-10-07T00:00:00"}),
        ),
        # With other vars: they stay, with their YAML types; an unquoted timestamp is
        # YAML's datetime, which the macro reads as its text, as `| string` would.
        (
            ["run", "--vars={execution_time: 2024-10-07T01:00:00, round: 2, day: 2024-10-01}"],
            (["run", "--vars", "{day: 2024-10-01, round: 2}\n"], {ET: "2024-10-07 01:00:00"}),
        ),
        # Empty: the run's own start, as an absent var.
        (["build", "--vars", "{execution_time: }"], (["build"], {ET: ""})),
        # A snapshot's load (python_jobs.snapshot_loads): both vars, an unquoted day as
        # its text.
        (
            ["build", "--vars", '{"devices_load_date": "2024-10-02", "snapshot_time": 2024-10-02}'],
            (
                ["build"],
                {
                    "LAKEHOUSE_DEVICES_LOAD_DATE": "2024-10-02",
                    "LAKEHOUSE_SNAPSHOT_TIME": "2024-10-02",
                },
            ),
        ),
        # None of those vars, or vars that are not a mapping or not YAML: untouched.
        (["build", "--vars", "{a: 1}"], (["build", "--vars", "{a: 1}"], {})),
        (["build", "--vars", "[1, 2]"], (["build", "--vars", "[1, 2]"], {})),
        (["build", "--vars", "{a: [}"], (["build", "--vars", "{a: [}"], {})),
        (["build", "--select", "x"], (["build", "--select", "x"], {})),
    ],
)
def test_the_vars_of_every_run_leave_the_vars(args, expected) -> None:
    assert split_env_vars(args) == expected
