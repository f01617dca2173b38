"""bench.statement_profile: the plugin records each dbt command and statement with its
test, and the report's statement groups, the worker time they cover and the per-file
totals. The plugin is installed over stand-ins for dbt's entry point and dbt-spark's
`execute` (what it wraps, not what it measures: no Spark runs here)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import statement_profile as profile


def test_statement_text_drops_dbts_comment_and_joins_the_lines() -> None:
    sql = '/* {"app": "dbt", "node_id": "model.x"} */\n  insert into ops.t\n  values (1)'
    assert profile.statement_text(sql) == "insert into ops.t values (1)"
    assert profile.statement_text("select\n 1") == "select 1"


def test_a_shape_masks_strings_and_numbers() -> None:
    assert profile.shape("DESCRIBE HISTORY silver.users LIMIT 1", 4) == (
        "describe history silver.users limit"
    )
    assert profile.shape("insert into ops.t values ('a b', 12)", 6) == (
        "insert into ops.t values (?, N)"
    )


def test_covered_counts_overlapping_intervals_once() -> None:
    assert profile.covered([]) == 0
    assert profile.covered([(0, 2), (1, 3), (5, 6), (5.5, 5.8)]) == 4
    assert profile.covered([(4, 5), (0, 10)]) == 10


def _write(directory: Path, worker: str, records: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in records]
    (directory / f"{worker}.jsonl").write_text("\n".join(lines) + "\n")


def _statement(text: str, start: float, seconds: float, test: str) -> dict:
    return {"kind": "statement", "text": text, "start": start, "seconds": seconds,
            "thread": 1, "test": test}  # fmt: skip


RECORDS = {
    "gw0": [
        {"kind": "invoke", "text": "run", "start": 0.0, "seconds": 10.0, "test": "tests/a.py::t1"},
        # Two threads of one command append to the log at once: 2 s summed, 1.5 covered.
        _statement("insert into ops.window_runs values ('m', 1)", 1.0, 1.0, "tests/a.py::t1"),
        _statement("insert into ops.window_runs values ('n', 2)", 1.5, 1.0, "tests/a.py::t1"),
        _statement("merge into silver.users as t using s", 3.0, 4.5, "tests/a.py::t1"),
    ],
    "gw1": [
        {"kind": "invoke", "text": "build", "start": 0.0, "seconds": 3.0, "test": "tests/b.py::t"},
        # The same time on another worker is that worker's own: covered again.
        _statement("insert into ops.window_runs values ('m', 3)", 1.0, 0.75, "tests/b.py::t"),
    ],
}


def test_the_summary_sums_groups_covers_per_worker_and_totals_each_file(tmp_path) -> None:
    for worker, records in RECORDS.items():
        _write(tmp_path, worker, records)
    summary = profile.summarize(profile.read_records(tmp_path), words=3)
    assert summary["shapes"] == [
        {"shape": "merge into silver.users", "count": 1, "seconds": 4.5, "covered": 4.5},
        {"shape": "insert into ops.window_runs", "count": 3, "seconds": 2.75, "covered": 2.25},
    ]
    assert summary["files"] == [
        {"file": "tests/a.py", "invoke": 10.0, "statements": 3, "seconds": 6.5},
        {"file": "tests/b.py", "invoke": 3.0, "statements": 1, "seconds": 0.75},
    ]
    totals = {k: summary[k] for k in ("invokes", "invoke_seconds", "statements")}
    assert totals == {"invokes": 2, "invoke_seconds": 13.0, "statements": 4}
    assert (summary["statement_seconds"], summary["covered"]) == (7.25, 6.75)


def test_the_report_prints_the_groups_and_an_empty_directory_fails(tmp_path, capsys) -> None:
    assert profile.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"statement_profile: no records in {tmp_path}\n"
    for worker, records in RECORDS.items():
        _write(tmp_path, worker, records)
    assert profile.main([str(tmp_path), "--words", "3", "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "2 dbt commands, 13 s; 4 statements, 7 s summed, 7 s of worker time covered"
    )
    assert lines[2].split() == ["4.5", "62.1%", "1", "4.50", "4.5", "merge", "into",
                                "silver.users"]  # fmt: skip
    assert len(lines) == 3 + 4  # totals, header, one group; blank, header, two files
    assert lines[-2].split() == ["10.0", "6.5", "3", "tests/a.py"]


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The plugin configured as in a worker (`gw7`), over stand-ins for what it wraps;
    monkeypatch puts the originals back afterwards."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    from python_jobs import run_dbt

    def execute(self, sql, bindings=None):
        if "broken" in sql:
            raise RuntimeError("the statement failed")
        return f"ran {sql.split()[-1]}"

    monkeypatch.setenv(profile.ENV, str(tmp_path))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.setattr(run_dbt, "invoke", lambda args: f"dbt {args[0]}")
    monkeypatch.setattr(SessionConnectionWrapper, "execute", execute)
    monkeypatch.setattr(profile, "_recorder", None)
    worker = SimpleNamespace(option=SimpleNamespace(numprocesses=None), workerinput={})
    profile.pytest_configure(worker)
    return run_dbt, SessionConnectionWrapper


def test_the_plugin_records_each_command_and_statement_with_its_test(installed, tmp_path):
    run_dbt, wrapper = installed
    profile.pytest_runtest_logstart("tests/x.py::test_one", ("tests/x.py", 1, "test_one"))
    assert run_dbt.invoke(["build", "--select", "users"]) == "dbt build"
    profile.pytest_runtest_logstart("tests/x.py::test_two", ("tests/x.py", 9, "test_two"))
    sql = '/* {"app": "dbt"} */\n  merge into silver.users t\n  using batch'
    assert wrapper.execute(object(), sql) == "ran batch"
    with pytest.raises(RuntimeError, match="the statement failed"):
        wrapper.execute(object(), "select broken")
    records = profile.read_records(tmp_path)
    assert [(r["kind"], r["text"], r["test"], r["worker"]) for r in records] == [
        ("invoke", "build --select users", "tests/x.py::test_one", "gw7"),
        ("statement", "merge into silver.users t using batch", "tests/x.py::test_two", "gw7"),
        ("statement", "select broken", "tests/x.py::test_two", "gw7"),
    ]
    assert all(r["seconds"] >= 0 and r["start"] > 0 for r in records)
    assert "thread" not in records[0] and all(isinstance(r["thread"], int) for r in records[1:])


def test_the_controller_deletes_the_last_runs_records_and_wraps_nothing(tmp_path, monkeypatch):
    from python_jobs import run_dbt

    (tmp_path / "gw0.jsonl").write_text('{"kind": "invoke"}\n')
    (tmp_path / "notes.txt").write_text("kept")
    monkeypatch.setenv(profile.ENV, str(tmp_path))
    monkeypatch.setattr(profile, "_recorder", None)
    original = run_dbt.invoke
    controller = SimpleNamespace(option=SimpleNamespace(numprocesses=2))
    profile.pytest_configure(controller)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert run_dbt.invoke is original and profile._recorder is None
