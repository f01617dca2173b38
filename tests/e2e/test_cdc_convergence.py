"""silver.users, silver.articles and their histories converge on the simulator's truth.

The simulator writes chaotic CDC streams (duplicates, out-of-order delivery, wrapped
envelopes, tombstones, deletes and re-inserts of deleted keys, a column added mid-stream)
and the truth a correct pipeline must produce from them. These tests ingest the streams,
run the `cdc_merge` and `cdc_history` models and compare their business columns (and
the validity of every version) with the truth exactly: once over the whole stream, and
round by round while the stream keeps arriving. The whole-stream run also builds the
visits and `gold.fct_visits` (every visit attributed to the versions valid at its time),
whose visit columns equal the simulator's valid visits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from python_jobs import ingest
from python_jobs.simulate.replay import read_cdc_events
from python_jobs.simulate.visits import COLUMNS as VISIT_COLUMNS

USER_COLUMNS = (
    "user_id", "email", "full_name", "country", "plan", "lifetime_value", "created_at",
    "updated_at", "preferred_language",
)  # fmt: skip
ARTICLE_COLUMNS = (
    "article_id", "author_id", "title", "category", "status", "published_at", "updated_at",
)  # fmt: skip
VALIDITY = ("valid_from", "valid_to", "is_current")
# (relation, truth file, CDC topic, columns compared; the key first)
TABLES = (
    ("silver.users", "users_final.jsonl", "blog.public.users", USER_COLUMNS),
    ("silver.articles", "articles_final.jsonl", "blog.public.articles", ARTICLE_COLUMNS),
    ("silver.users_history", "users_history.jsonl", "blog.public.users", USER_COLUMNS + VALIDITY),
    (
        "silver.articles_history",
        "articles_history.jsonl",
        "blog.public.articles",
        ARTICLE_COLUMNS + VALIDITY,
    ),
)
CURRENT_STATE = TABLES[:2]
# Many deletes, and half of the inserts bring a deleted key back.
CHURN = ("--delete-rate", "0.15", "--reinsert-rate", "0.5", "--users", "150", "--articles", "80")
# The silver models build side by side (the run log exists before they start).
SILVER = ("+users", "+articles", "+users_history", "+articles_history")
SELECT = ("--select", *SILVER, "--threads", "4")
# The visit columns of silver.visits and gold.fct_visits, against visits_valid.jsonl.
VISITS = (("silver.visits", VISIT_COLUMNS), ("gold.fct_visits", VISIT_COLUMNS))


def _sort_key(row: tuple) -> list[tuple[bool, Any]]:
    return [(value is None, "" if value is None else value) for value in row]


def truth_rows(truth: Path, file_name: str, columns: tuple[str, ...]) -> list[tuple]:
    """The truth file's rows as tuples (a column a row lacks is null)."""
    lines = (truth / file_name).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return sorted((tuple(row.get(c) for c in columns) for row in rows), key=_sort_key)


def table_rows(spark, relation: str, columns: tuple[str, ...]) -> list[tuple]:
    """A table's columns in the truth's text form (timestamps, decimals as text)."""
    types = dict(spark.table(relation).dtypes)
    expressions = []
    for column in columns:
        if types[column] == "timestamp":
            expressions.append(f"date_format({column}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')")
        elif types[column].startswith("decimal"):
            expressions.append(f"cast({column} as string)")
        else:
            expressions.append(column)
    rows = spark.sql(f"select {', '.join(expressions)} from {relation}").collect()
    return sorted((tuple(row) for row in rows), key=_sort_key)


def describe_difference(got: list[tuple], want: list[tuple], columns: tuple[str, ...]) -> str:
    """Per key: rows only in the table, only in the truth, and differing columns."""
    got_by_key: dict[Any, list[tuple]] = {}
    for row in got:
        got_by_key.setdefault(row[0], []).append(row)
    want_by_key: dict[Any, list[tuple]] = {}
    for row in want:
        want_by_key.setdefault(row[0], []).append(row)
    lines = [f"table has {len(got)} rows, truth {len(want)}"]
    for key in sorted(set(got_by_key) | set(want_by_key), key=repr):
        table_rows_ = got_by_key.get(key, [])
        truth_rows_ = want_by_key.get(key, [])
        if table_rows_ == truth_rows_:
            continue
        if not truth_rows_:
            lines.append(f"  {columns[0]}={key}: extra in table (not in truth): {table_rows_}")
        elif not table_rows_:
            lines.append(f"  {columns[0]}={key}: missing from table, truth: {truth_rows_}")
        elif len(table_rows_) != 1 or len(truth_rows_) != 1:
            lines.append(f"  {columns[0]}={key}: table {table_rows_}, truth {truth_rows_}")
        else:
            diffs = [
                f"{name}: table {a!r} truth {b!r}"
                for name, a, b in zip(columns, table_rows_[0], truth_rows_[0], strict=True)
                if a != b
            ]
            lines.append(f"  {columns[0]}={key}: {'; '.join(diffs)}")
    return "\n".join(lines[:41] + (["  ..."] if len(lines) > 41 else []))


def assert_matches_truth(spark, truth: Path, label: str) -> None:
    for relation, file_name, _topic, columns in TABLES:
        want = truth_rows(truth, file_name, columns)
        got = table_rows(spark, relation, columns)
        assert want, f"{label}: {file_name} is empty"
        message = f"{label}: {relation} differs from {file_name}\n"
        assert got == want, message + describe_difference(got, want, columns)


def assert_visits_match_truth(session: Any, truth: Path, label: str) -> None:
    for relation, columns in VISITS:
        want = truth_rows(truth, "visits_valid.jsonl", columns)
        got = table_rows(session, relation, columns)
        assert want, f"{label}: visits_valid.jsonl is empty"
        message = f"{label}: {relation} differs from visits_valid.jsonl\n"
        assert got == want, message + describe_difference(got, want, columns)


def churn(landing: Path, topic: str) -> tuple[set[int], set[int]]:
    """Keys with a delete, and keys inserted again after one of their deletes."""
    deleted: set[int] = set()
    reinserted: set[int] = set()
    by_key: dict[int, list] = {}
    for event in read_cdc_events(landing, topic):
        by_key.setdefault(event.key, []).append(event)
    for key, events in by_key.items():
        ops = [e.op for e in sorted(events, key=lambda e: (e.lsn, e.position))]
        if "d" in ops:
            deleted.add(key)
            if "c" in ops[ops.index("d") :]:
                reinserted.add(key)
    return deleted, reinserted


def assert_stream_has_churn(landing: Path, truth: Path) -> None:
    """Deletes and re-inserts happened, and the truth reflects both: no vacuous pass."""
    for _relation, file_name, topic, columns in CURRENT_STATE:
        deleted, reinserted = churn(landing, topic)
        live = {row[0] for row in truth_rows(truth, file_name, columns)}
        assert deleted - live, f"{topic}: no key is deleted in the truth"
        assert reinserted & live, f"{topic}: no deleted key is live again in the truth"
    users = "".join(f.read_text() for f in (landing / "blog.public.users").glob("*.json"))
    assert '"op":"d"' in users


# Two seeds in all: 7 here, 5 in the round-by-round test below (each run is minutes).
@pytest.mark.parametrize("seed", ["7"])
def test_current_state_equals_the_truth_after_a_chaotic_stream(
    spark, dbt, clean_lakehouse, simulate, seed: str
) -> None:
    landing = clean_lakehouse["landing"]
    truth = simulate(
        landing, clean_lakehouse["home"] / "truth", "--seed", seed, "--days", "2", *CHURN
    )
    assert_stream_has_churn(landing, truth)

    ingest.run(ingest.IngestOptions(landing=landing))
    dbt("run", "--select", *SILVER, "+fct_visits", "--threads", "4")

    assert_matches_truth(spark, truth, f"seed {seed}")
    assert_visits_match_truth(spark, truth, f"seed {seed}")


def test_current_state_follows_the_truth_round_by_round(
    spark, dbt, clean_lakehouse, simulate
) -> None:
    landing = clean_lakehouse["landing"]
    truth = clean_lakehouse["home"] / "truth"
    # preferred_language appears in round 2's stream, after round 1 was merged.
    rounds = (
        ("--add-column-at", "-1"),
        ("--resume", "--add-column-at", "0.5"),
        ("--resume",),
    )
    previous: dict[str, list[tuple]] = {}
    for number, extra in enumerate(rounds, start=1):
        simulate(landing, truth, "--seed", "5", "--days", "1", *CHURN, *extra)
        for _relation, file_name, _topic, columns in TABLES:
            current = truth_rows(truth, file_name, columns)
            assert current != previous.get(file_name), f"round {number}: {file_name} unchanged"
            previous[file_name] = current
        ingest.run(ingest.IngestOptions(landing=landing))
        dbt("run", *SELECT, "--vars", f'{{execution_time: "2024-10-07T0{number}:00:00"}}')
        assert_matches_truth(spark, truth, f"round {number}")

    assert_stream_has_churn(landing, truth)
    languages = {row[-1] for row in truth_rows(truth, "users_final.jsonl", USER_COLUMNS)}
    assert languages - {None}, "no user has preferred_language: the drift never happened"
