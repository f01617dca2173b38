"""bench.statement_profile's report: statement groups, the worker time they cover, and
the per-file totals, on records written as the plugin writes them."""

from __future__ import annotations

import json
from pathlib import Path

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
        _statement("merge into silver.users as t using s", 3.0, 4.0, "tests/a.py::t1"),
    ],
    "gw1": [
        {"kind": "invoke", "text": "build", "start": 0.0, "seconds": 3.0, "test": "tests/b.py::t"},
        # The same time on another worker is that worker's own: covered again.
        _statement("insert into ops.window_runs values ('m', 3)", 1.0, 0.5, "tests/b.py::t"),
    ],
}


def test_the_summary_sums_groups_covers_per_worker_and_totals_each_file(tmp_path) -> None:
    for worker, records in RECORDS.items():
        _write(tmp_path, worker, records)
    summary = profile.summarize(profile.read_records(tmp_path), words=3)
    assert summary["shapes"] == [
        {"shape": "merge into silver.users", "count": 1, "seconds": 4.0, "covered": 4.0},
        {"shape": "insert into ops.window_runs", "count": 3, "seconds": 2.5, "covered": 2.0},
    ]
    assert summary["files"] == [
        {"file": "tests/a.py", "invoke": 10.0, "statements": 3, "seconds": 6.0},
        {"file": "tests/b.py", "invoke": 3.0, "statements": 1, "seconds": 0.5},
    ]
    totals = {k: summary[k] for k in ("invokes", "invoke_seconds", "statements")}
    assert totals == {"invokes": 2, "invoke_seconds": 13.0, "statements": 4}
    assert (summary["statement_seconds"], summary["covered"]) == (6.5, 6.0)


def test_the_report_prints_the_groups_and_an_empty_directory_fails(tmp_path, capsys) -> None:
    assert profile.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"statement_profile: no records in {tmp_path}\n"
    for worker, records in RECORDS.items():
        _write(tmp_path, worker, records)
    assert profile.main([str(tmp_path), "--words", "3", "--top", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "2 dbt commands, 13 s; 4 statements, 6 s summed, 6 s of worker time covered"
    )
    assert lines[2].split() == ["4.0", "61.5%", "1", "4.00", "4.0", "merge", "into",
                                "silver.users"]  # fmt: skip
    assert len(lines) == 3 + 1 + 1 + 2  # header, one group, blank, header, two files
    assert lines[-2].split() == ["10.0", "6.0", "3", "tests/a.py"]
