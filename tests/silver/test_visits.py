"""silver.visits: the contract's five filters, quarantine, statistics and deduplication.

Visit records are written to Bronze through the ingestion job's own transforms
(classify, decorate), with a chosen ingestion time, then `dbt run` builds silver.visits
with an execution time per round:

1. one batch with a row for each filter (and NULL and whitespace variants, a row failing
   several filters, the 5-minute boundary of `future_event_time`), a duplicate and a
   line that is not JSON (a dead letter that the filters never see);
2. a later batch with a copy of a visit from batch 1, a duplicate within the batch and a
   visit three days late;
3. nothing new: every statistic is written, with zeros;
4. round 2's execution time again: a backfill, which gives round 2's result again;
5. and 6. (`dedup_lookback`: one day back from a batch's earliest visit) a copy
   re-stamped three days after its original is not compared and is appended again; one
   re-stamped 11 hours after is removed;
7. two copies of a visit in one window from two writers of the topic, the one committed
   second with a clock an hour behind: the copy committed first wins;
8. and 9. a run that dies after its writes and statistics, before its end is recorded,
   then the next round: each visit, quarantined row and window counted once.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.helpers import append_to_bronze

ROUND_1 = datetime(2024, 10, 7, 10, 0, tzinfo=UTC)
ROUND_2 = datetime(2024, 10, 8, 10, 0, tzinfo=UTC)
FILTERS = [
    "missing_visit_id",
    "unparseable_event_time",
    "future_event_time",
    "missing_page",
    "unsupported_device",
]


def visit(visit_id="v1", **changes) -> str:
    """A visit record as the front end sends it; `changes` override fields, and a
    field set to `...` is left out."""
    record = {
        "visit_id": visit_id,
        "event_time": "2024-10-07T09:00:00.000Z",
        "user_id": 7,
        "article_id": 100,
        "page": "/articles/100",
        "device_type": "mobile",
        "device_version": "17",
        "referrer": "https://t.co/",
    }
    record.update(changes)
    return json.dumps({k: v for k, v in record.items() if v is not ...})


BATCH_1 = [  # line 1 first
    visit(),  # 1 kept
    visit(device_version="18"),  # 2 duplicate of line 1: the first ingested copy wins
    visit(""),  # 3 missing_visit_id (empty)
    visit(..., device_type="tv"),  # 4 missing_visit_id (absent), also unsupported_device
    visit("   "),  # 5 missing_visit_id (blank)
    visit("v6", event_time="yesterday"),  # 6 unparseable_event_time (then future: NULL)
    visit("v7", event_time=...),  # 7 unparseable_event_time (absent)
    visit("v8", event_time="2024-10-07T10:05:01Z"),  # 8 future: 5 min 1 s after ingestion
    visit("v9", event_time="2024-10-07T10:05:00Z"),  # 9 kept: exactly 5 minutes
    visit("v10", page=""),  # 10 missing_page
    visit("v11", page=...),  # 11 missing_page (absent)
    visit("v12", device_type="tv"),  # 12 unsupported_device
    visit("v13", device_type=None),  # 13 unsupported_device (NULL)
    visit("v14", event_time="yesterday", page="", device_type="console"),  # 14 four filters
    visit("v15", user_id=None, referrer=None, device_type="tablet"),  # 15 kept, anonymous
    '{"visit_id": "v16", "event_time": "2024-10-07T09:00:00Z"',  # 16 not JSON: dead letter
]
BATCH_2 = [
    visit(device_version="19"),  # 1 copy of v1 from batch 1: removed
    visit("v3", device_type="desktop"),  # 2 kept
    visit("v3", device_type="desktop"),  # 3 exact duplicate of line 2
    visit("v4", event_time="2024-10-05T08:00:00Z"),  # 4 kept, three days late
    visit("v5", event_time="2099-01-01T00:00:00Z"),  # 5 future_event_time
]

# (filter, rejected_rows: first failing filter, failed_rows: every failing, total_rows)
STATS_1 = [
    ("missing_visit_id", 3, 3, 15),
    ("unparseable_event_time", 3, 3, 15),
    ("future_event_time", 1, 4, 15),
    ("missing_page", 2, 3, 15),
    ("unsupported_device", 2, 4, 15),
    ("duplicate_visit_id", 1, 1, 4),
]
STATS_2 = [
    (name, 1 if name == "future_event_time" else 0, 1 if name == "future_event_time" else 0, 5)
    for name in FILTERS
] + [("duplicate_visit_id", 2, 2, 4)]
STATS_EMPTY = [(name, 0, 0, 0) for name in FILTERS] + [("duplicate_visit_id", 0, 0, 0)]

# (visit_id, event_time, user_id, device_type, device_version, file, line)
VISITS_1 = [
    ("v1", "2024-10-07 09:00:00", 7, "mobile", "17", "visits-1.json", 1),
    ("v9", "2024-10-07 10:05:00", 7, "mobile", "17", "visits-1.json", 9),
    ("v15", "2024-10-07 09:00:00", None, "tablet", "17", "visits-1.json", 15),
]
VISITS_2 = VISITS_1 + [
    ("v3", "2024-10-07 09:00:00", 7, "desktop", "17", "visits-2.json", 2),
    ("v4", "2024-10-05 08:00:00", 7, "mobile", "17", "visits-2.json", 4),
]
# (reason, every failing filter, line) of the quarantined rows
QUARANTINE_1 = [
    ("missing_visit_id", ["missing_visit_id"], "visits-1.json", 3),
    ("missing_visit_id", ["missing_visit_id", "unsupported_device"], "visits-1.json", 4),
    ("missing_visit_id", ["missing_visit_id"], "visits-1.json", 5),
    ("unparseable_event_time", ["unparseable_event_time", "future_event_time"], "visits-1.json", 6),
    ("unparseable_event_time", ["unparseable_event_time", "future_event_time"], "visits-1.json", 7),
    ("future_event_time", ["future_event_time"], "visits-1.json", 8),
    ("missing_page", ["missing_page"], "visits-1.json", 10),
    ("missing_page", ["missing_page"], "visits-1.json", 11),
    ("unsupported_device", ["unsupported_device"], "visits-1.json", 12),
    ("unsupported_device", ["unsupported_device"], "visits-1.json", 13),
    (
        "unparseable_event_time",
        ["unparseable_event_time", "future_event_time", "missing_page", "unsupported_device"],
        "visits-1.json",
        14,
    ),
]
QUARANTINE_2 = QUARANTINE_1 + [("future_event_time", ["future_event_time"], "visits-2.json", 5)]


def ingest_lines(spark, file_name: str, lines: list[str], ingested_at: datetime, batch: int):
    append_to_bronze(spark, "blog.visits", file_name, lines, ingested_at, batch)


def build(dbt, execution_time: str, select: str = "visits") -> None:
    dbt("run", "--select", select, "--vars", json.dumps({"execution_time": execution_time}))


def visits(spark) -> list[tuple]:
    rows = spark.sql(
        "select visit_id, date_format(event_time, 'yyyy-MM-dd HH:mm:ss'), user_id, "
        "device_type, device_version, _source_file, _line_number from silver.visits "
        "order by _source_file, _line_number"
    ).collect()
    return [tuple(row) for row in rows]


def quarantine(spark) -> list[tuple]:
    rows = spark.sql(
        "select reason, failed_filters, get_json_object(record, '$._source_file'), "
        "cast(get_json_object(record, '$._line_number') as int) "
        "from silver.visits__quarantine order by 3, 4"
    ).collect()
    return [(r[0], list(r[1]), r[2], r[3]) for r in rows]


def stats_by_run(spark) -> list[list[tuple]]:
    """ops.filter_stats of silver.visits, one list per invocation, in run order."""
    rows = spark.sql(
        "select invocation_id, filter_name, rejected_rows, failed_rows, total_rows "
        "from ops.filter_stats where model = 'visits' "
        "order by _metadata.row_commit_version, run_started_at, filter_position"
    ).collect()
    runs: dict[str, list[tuple]] = {}
    for row in rows:
        runs.setdefault(row[0], []).append(tuple(row[1:]))
    return list(runs.values())


@pytest.fixture(scope="module")
def rounds(spark, dbt):
    """Builds the four rounds; returns what each round left behind."""
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    seen = {}
    ingest_lines(spark, "visits-1.json", BATCH_1, ROUND_1, 0)
    build(dbt, "2024-10-07T10:30:00", "+visits")
    seen[1] = (visits(spark), quarantine(spark), stats_by_run(spark))
    ingest_lines(spark, "visits-2.json", BATCH_2, ROUND_2, 1)
    build(dbt, "2024-10-08T10:30:00")
    seen[2] = (visits(spark), quarantine(spark), stats_by_run(spark))
    build(dbt, "2024-10-09T10:30:00")
    seen[3] = (visits(spark), quarantine(spark), stats_by_run(spark))
    build(dbt, "2024-10-08T10:30:00")  # the backfill of round 2
    seen[4] = (visits(spark), quarantine(spark), stats_by_run(spark))
    return seen


def test_each_filter_rejects_its_rows_and_the_first_copy_wins(rounds) -> None:
    got_visits, got_quarantine, got_stats = rounds[1]
    assert got_visits == VISITS_1
    assert got_quarantine == QUARANTINE_1
    assert got_stats == [STATS_1]


def test_copies_from_an_earlier_batch_are_removed_and_late_visits_kept(rounds) -> None:
    got_visits, got_quarantine, got_stats = rounds[2]
    assert got_visits == VISITS_2
    assert got_quarantine == QUARANTINE_2
    assert got_stats == [STATS_1, STATS_2]


def test_a_run_with_nothing_new_writes_zero_counts(rounds) -> None:
    got_visits, got_quarantine, got_stats = rounds[3]
    assert (got_visits, got_quarantine) == (VISITS_2, QUARANTINE_2)
    assert got_stats == [STATS_1, STATS_2, STATS_EMPTY]


def test_a_backfill_of_a_window_gives_the_same_rows_again(rounds) -> None:
    got_visits, got_quarantine, got_stats = rounds[4]
    assert (got_visits, got_quarantine) == (VISITS_2, QUARANTINE_2)
    assert got_stats == [STATS_1, STATS_2, STATS_EMPTY, STATS_2]


def test_after_the_backfill_each_window_counts_once_and_the_totals_add_up(
    spark, dbt, rounds
) -> None:
    from python_jobs.tools.demo import rejected_by_filter, visits_totals

    dbt("run", "--select", "filter_stats_current")
    # ops.filter_stats keeps every run: round 2's window is there twice, so its sums
    # count the late copy's future_event_time and two duplicates twice.
    raw = spark.sql(
        "select sum(if(kind = 'filter', rejected_rows, 0)), "
        "sum(if(kind = 'deduplicate', rejected_rows, 0)) from ops.filter_stats "
        "where model = 'visits'"
    ).first()
    assert tuple(raw) == (11 + 1 + 0 + 1, 1 + 2 + 0 + 2)
    # What stands: round 1 and the backfill of round 2; round 2 was re-run, and round 3
    # (nothing new) ran after round 2's window, which the backfill merged again.
    standing = spark.sql(
        "select distinct invocation_id from ops.filter_stats_current where model = 'visits'"
    ).collect()
    runs = [row[0] for row in spark.sql(
        "select invocation_id from ops.filter_stats where model = 'visits' "
        "group by invocation_id order by min(_metadata.row_commit_version)"
    ).collect()]  # fmt: skip
    assert sorted(row[0] for row in standing) == sorted([runs[0], runs[3]])
    # Per filter over the standing runs: STATS_1 + STATS_2 (rejected first, failing).
    assert rejected_by_filter(spark) == [
        ("missing_visit_id", 3, 3),
        ("unparseable_event_time", 3, 3),
        ("future_event_time", 1 + 1, 4 + 1),
        ("missing_page", 2, 3),
        ("unsupported_device", 2, 4),
        ("duplicate_visit_id", 1 + 2, 1 + 2),
    ]
    # Bronze: 15 + 5 rows (line 16 of batch 1 is a dead letter); kept: VISITS_2;
    # quarantined: QUARANTINE_2; duplicates: line 2 of batch 1, lines 1 and 3 of batch 2.
    assert (len(BATCH_1) - 1 + len(BATCH_2), len(VISITS_2), len(QUARANTINE_2)) == (20, 5, 12)
    totals = visits_totals(spark)
    assert totals == {"bronze": 20, "silver": 5, "quarantine": 12, "rejected": 12, "duplicates": 3}
    assert totals["rejected"] == totals["quarantine"]
    assert totals["duplicates"] == totals["bronze"] - totals["silver"] - totals["quarantine"]
    # The view's own tests: one standing run per window.
    dbt("test", "--select", "filter_stats_current")


def test_each_build_records_row_counts_and_null_ratios(spark, rounds) -> None:
    rows = spark.sql(
        "select invocation_id, column_name, row_count, null_rows, null_ratio "
        "from ops.dq_metrics where model = 'visits' order by run_started_at, column_name"
    ).collect()
    runs: dict[str, list[tuple]] = {}
    for row in rows:
        runs.setdefault(row[0], []).append(tuple(row[1:]))

    def profile(count: int) -> list[tuple]:  # dq_columns; one anonymous visit (v15)
        nulls = {"user_id": 1}
        return [
            (name, count, nulls.get(name, 0), nulls.get(name, 0) / count)
            for name in sorted(["visit_id", "event_time", "user_id", "article_id", "device_type"])
        ]

    assert list(runs.values()) == [profile(3), profile(5), profile(5), profile(5)]


def test_the_model_tests_pass_on_the_result(dbt, rounds) -> None:
    # unique/not_null/accepted_values, and the statistics tests of visits.yml
    dbt("test", "--select", "visits")


@pytest.fixture(scope="module")
def bounded_rounds(spark, dbt, rounds):
    """Two more rounds after the others (their live reads done): the deduplication
    looks back one day from the batch's earliest visit (`dedup_lookback`)."""
    seen = {}
    ingest_lines(spark, "visits-5.json", BATCH_5, datetime(2024, 10, 10, 10, 0, tzinfo=UTC), 2)
    build(dbt, "2024-10-10T10:30:00")
    seen[5] = visits(spark)
    ingest_lines(spark, "visits-6.json", BATCH_6, datetime(2024, 10, 11, 10, 0, tzinfo=UTC), 3)
    build(dbt, "2024-10-11T10:30:00")
    seen[6] = visits(spark)
    return seen


BATCH_5 = [
    visit("v20", event_time="2024-10-10T09:00:00Z"),  # 1 kept
    # 2 v15 re-stamped three days after its original: beyond the day looked back from
    # this batch's earliest visit (10-10 09:00), so not compared, and appended again
    visit(
        "v15", user_id=None, referrer=None, device_type="tablet", event_time="2024-10-10T09:30:00Z"
    ),
]
BATCH_6 = [
    # v20 re-stamped 11 hours later: its original is within the day looked back
    visit("v20", event_time="2024-10-10T20:00:00Z", device_version="18"),
]
VISITS_5 = VISITS_2 + [
    ("v20", "2024-10-10 09:00:00", 7, "mobile", "17", "visits-5.json", 1),
    ("v15", "2024-10-10 09:30:00", None, "tablet", "17", "visits-5.json", 2),
]


def test_the_deduplication_looks_back_a_bounded_time(bounded_rounds) -> None:
    assert bounded_rounds[5] == VISITS_5
    assert bounded_rounds[6] == VISITS_5


@pytest.fixture(scope="module")
def skewed_round(spark, dbt, bounded_rounds):
    """Round 7: one window holding a copy of v30 from each of two writers of the topic;
    the second commit's writer has a clock an hour behind (and batch numbers of its own)."""
    ingest_lines(spark, "visits-7a.json", [BATCH_7[0]], datetime(2024, 10, 12, 10, tzinfo=UTC), 4)
    ingest_lines(spark, "visits-7b.json", [BATCH_7[1]], datetime(2024, 10, 12, 9, tzinfo=UTC), 0)
    build(dbt, "2024-10-12T10:30:00")
    return visits(spark)


BATCH_7 = [
    visit("v30", event_time="2024-10-12T08:00:00Z"),
    visit("v30", event_time="2024-10-12T08:00:00Z", device_version="18"),
]


def test_the_copy_committed_first_wins_whatever_the_writers_clocks_say(skewed_round) -> None:
    # By _ingested_at, visits-7b's copy (09:00) would have won over visits-7a's (10:00),
    # which Bronze committed first.
    assert skewed_round == VISITS_5 + [
        ("v30", "2024-10-12 08:00:00", 7, "mobile", "17", "visits-7a.json", 1)
    ]


BATCH_8 = [
    visit("v40", event_time="2024-10-13T08:00:00Z"),  # 1 kept
    visit("v41", page=""),  # 2 missing_page
]
BATCH_9 = [
    visit("v42", event_time="2024-10-14T08:00:00Z"),  # 1 kept
    # 2 a copy of v40, whose window the dead attempt read: removed, v40 kept once
    visit("v40", event_time="2024-10-13T08:00:00Z", device_version="18"),
]


def window_stats(total: int, no_page: int, passed: int, duplicates: int) -> list[tuple]:
    """A window's statistics (as STATS_1) when only missing_page and the deduplication
    reject rows: `total` rows, `no_page` without a page, `passed` left for the
    deduplication, of which `duplicates` copies."""
    rejected = {name: no_page if name == "missing_page" else 0 for name in FILTERS}
    return [(name, rejected[name], rejected[name], total) for name in FILTERS] + [
        ("duplicate_visit_id", duplicates, duplicates, passed)
    ]


def test_a_run_that_dies_before_recording_its_end_is_repaired_by_the_next(
    spark, dbt, skewed_round, fail_statement
) -> None:
    """Round 8 writes the visits, the quarantine and its statistics, then dies before its
    run is recorded as succeeded (a test-only fault). Round 9, a new execution time,
    restores both tables to round 8's base and reads from round 8's window on: round 8's
    rows once, round 9's copy of a round-8 visit removed, and of the two runs'
    statistics only round 9's stand (its window covers round 8's)."""
    ingest_lines(spark, "visits-8.json", BATCH_8, datetime(2024, 10, 13, 10, tzinfo=UTC), 5)
    disarm = fail_statement(
        r"window_runs values \('silver\.visits', .*'succeeded', current_timestamp",
        "before the run's end",
    )
    result = dbt(
        "run",
        "--select",
        "visits",
        "--vars",
        json.dumps({"execution_time": "2024-10-13T10:30:00"}),
        expect_fail=True,
    )
    disarm()
    assert "injected fault before the run's end" in " ".join(
        str(r.message) for r in result.result.results
    )
    v40 = ("v40", "2024-10-13 08:00:00", 7, "mobile", "17", "visits-8.json", 1)
    v41 = ("missing_page", ["missing_page"], "visits-8.json", 2)
    assert (visits(spark), quarantine(spark)) == (skewed_round + [v40], QUARANTINE_2 + [v41])
    assert stats_by_run(spark)[-1] == window_stats(2, 1, 1, 0)

    ingest_lines(spark, "visits-9.json", BATCH_9, datetime(2024, 10, 14, 10, tzinfo=UTC), 6)
    build(dbt, "2024-10-14T10:30:00")
    v42 = ("v42", "2024-10-14 08:00:00", 7, "mobile", "17", "visits-9.json", 1)
    assert visits(spark) == skewed_round + [v40, v42]
    assert quarantine(spark) == QUARANTINE_2 + [v41]
    assert stats_by_run(spark)[-2:] == [window_stats(2, 1, 1, 0), window_stats(4, 1, 3, 1)]
    runs = [row[0] for row in spark.sql(
        "select invocation_id from ops.filter_stats where model = 'visits' "
        "group by invocation_id order by min(_metadata.row_commit_version)"
    ).collect()]  # fmt: skip
    standing = {
        row[0]
        for row in spark.sql(
            "select distinct invocation_id from ops.filter_stats_current where model = 'visits'"
        ).collect()
    }
    assert (runs[-2] in standing, runs[-1] in standing) == (False, True)
