"""The observability report (`make report`), opened in headless Chromium.

A lakehouse with no tables at all gives a page of "no data yet" panels, read back
from the browser (`tests.browser.render_report`); with every table created but empty,
each chart says why it has nothing to draw. Then stated rows go into every table the
report reads, written with the project's own DDL and writers (the ops tables by `dbt
run-operation create_ops_tables`, Bronze and the dead letters through the ingestion
job's classification, the batch log in its schema), and each chart in the browser must
draw exactly the points and series those rows give, with their values.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from python_jobs import bronze
from python_jobs.spark import paths
from python_jobs.tools import report
from python_jobs.topics import load_topics
from tests.browser import render_report, serve_directory
from tests.helpers import append_to_bronze, reset_lakehouse

T0 = datetime(2026, 11, 20, 8, 0, 0)
NOW = datetime(2026, 11, 20, 12, 0, 0)  # the report's "now": freshness and ages
CHARTS = [
    "ingestion_lag",
    "ingestion_throughput",
    "dead_letters",
    "dead_letter_reasons",
    "schema_drift",
    "filter_rejections",
    "duplicates_removed",
    "row_counts",
    "null_ratios",
    "builds",
    "freshness",
]


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def sql_time(value: datetime) -> str:
    return f"timestamp'{value:%Y-%m-%d %H:%M:%S}'"


def _render(spark, home: Path, name: str, screenshot: Path | None = None):
    path = report.write_report(spark, home / name, now=NOW)
    assert path == home / name / "index.html"
    return render_report(path.parent, screenshot)


def _create_tables(spark, dbt) -> None:
    """Every table the report reads, empty, created by the project's own code (the
    view of the standing filter statistics by `dbt run`, as `dbt build` creates it)."""
    bronze.ensure_tables(spark, load_topics())
    spark.sql("create schema if not exists ops")
    dbt("run-operation", "create_ops_tables")
    assert report.filter_charts(spark)[0].empty == (
        "ops.filter_stats_current does not exist yet (dbt build creates it)"
    )
    dbt("run", "--select", "filter_stats_current", "source_columns", "schema_drift")


# --- stated rows ------------------------------------------------------------------------

BATCHES = [
    # topic, batch, heartbeat, read, bronze, dead, tombstones, lag, started, duration
    ("blog.public.users", 0, False, 100, 98, 1, 1, 5.0, at(0), 2.0),
    ("blog.public.users", 1, False, 40, 40, 0, 0, 7.5, at(1), 1.0),
    ("blog.public.users", None, True, 0, 0, 0, 0, None, at(2), 0.0),
    ("blog.visits", 0, False, 30, 28, 2, 0, None, at(0.5), 1.5),
    ("blog.visits", 1, False, 12, 9, 3, 0, None, at(1.5), 0.5),
]

# (started, rejected per filter, duplicates, execution time) per run of visits: runs at
# T0+10 min and T0+70 min, then a backfill of the second one's window at T0+130 min
# (after a change to the filters: other counts), which supersedes it.
FILTER_RUNS = {
    "inv-1": (at(10), [1, 0, 2, 0, 1], 3, at(10)),
    "inv-2": (at(70), [0, 0, 0, 1, 0], 0, at(70)),
    "inv-3": (at(130), [0, 0, 0, 2, 0], 1, at(70)),
}
FILTERS = [
    "missing_visit_id",
    "unparseable_event_time",
    "future_event_time",
    "missing_page",
    "unsupported_device",
]

# invocation -> relation -> [(column, rows, null rows)]
DQ_RUNS = {
    "inv-1": {
        "silver.visits": [("visit_id", 10, 0), ("user_id", 10, 2), ("referrer", 10, 5)],
        "silver.users": [("user_id", 4, 0)],
    },
    "inv-2": {
        "silver.visits": [("visit_id", 12, 0), ("user_id", 12, 3), ("referrer", 12, 6)],
        "gold.fct_visits": [("visit_id", 0, 0), ("user_id", 0, 0)],
    },
}
RUN_STARTED = {"inv-1": at(10), "inv-2": at(70)}


def visit(visit_id: str | None) -> str:
    return json.dumps(
        {
            "visit_id": visit_id,
            "event_time": "2026-11-20T07:59:00Z",
            "user_id": 1,
            "article_id": 2,
            "page": "/a/2",
            "device_type": "mobile",
            "device_version": "17",
            "referrer": None,
        }
    )


def user_created(user_id: int) -> str:
    source = {"ts_ms": 1_700_000_000_000, "lsn": user_id, "txId": 1, "snapshot": "false"}
    source.update({"db": "blog", "schema": "public", "table": "users"})
    after = {"user_id": user_id, "email": f"u{user_id}@x.org", "country": "DE", "plan": "free"}
    return json.dumps({"before": None, "after": after, "source": source, "op": "c"})


def write_dead_letters(spark, topic_name: str, lines: list[str], ingested_at: datetime) -> None:
    """Dead letters of `lines` exactly as the ingestion job classifies and writes them."""
    topic = next(t for t in load_topics() if t.topic == topic_name)
    rows = [(line, topic.topic, None, None, "bad.json", n) for n, line in enumerate(lines, 1)]
    records = bronze.classify(
        spark.createDataFrame(rows, bronze.LINE_SCHEMA), topic, bronze.DEFAULT_MAX_RECORD_BYTES
    )
    dead = bronze.dead_letter_rows(bronze.decorate(records, 9, ingested_at))
    dead.write.format("delta").mode("append").save(bronze.dead_letter_path())


def write_stated_rows(spark) -> None:
    batch_rows = [
        {
            "topic": topic,
            "source": "files",
            "query_id": f"q-{topic}",
            "batch_id": batch,
            "is_heartbeat": heartbeat,
            "records_read": read,
            "bronze_rows": kept,
            "dead_letters": dead,
            "tombstones": tombs,
            "max_source_committed_at": None if lag is None else started - timedelta(seconds=lag),
            "lag_seconds": lag,
            "started_at": started,
            "ingested_at": started + timedelta(seconds=duration),
            "duration_seconds": duration,
        }
        for topic, batch, heartbeat, read, kept, dead, tombs, lag, started, duration in BATCHES
    ]
    spark.createDataFrame(batch_rows, bronze.BATCH_SCHEMA).write.format("delta").mode(
        "append"
    ).save(bronze.batches_path())

    # Bronze: users ingested at 08:00, visits at 09:00; articles stays empty.
    append_to_bronze(
        spark, "blog.public.users", "u.json", [user_created(1)], T0.replace(tzinfo=UTC), 0
    )
    append_to_bronze(
        spark,
        "blog.visits",
        "v.json",
        [visit("v1")],
        (T0 + timedelta(hours=1)).replace(tzinfo=UTC),
        0,
    )
    write_dead_letters(spark, "blog.visits", ["{oops", "[1, 2]"], T0.replace(tzinfo=UTC))

    values = []
    for invocation, (started, rejected, duplicates, execution) in FILTER_RUNS.items():
        named = list(zip(FILTERS, rejected, strict=True)) + [("duplicate_visit_id", duplicates)]
        for position, (name, count) in enumerate(named, 1):
            kind = "deduplicate" if name.startswith("duplicate") else "filter"
            values.append(
                f"('{invocation}', {sql_time(started)}, 'visits', '{name}', {count}, 20, "
                f"{position}, '{kind}', {count}, 'silver.visits', {sql_time(execution)}, null, "
                f"null, {sql_time(started + timedelta(seconds=40))})"
            )
    spark.sql("insert into ops.filter_stats values " + ", ".join(values))

    # Columns seen: a drift still open, one decoded since, one that always was.
    spark.sql(
        "insert into ops.source_columns values "
        f"('blog.public.users', 'referral_code', {sql_time(at(3))}, 4, 2, {sql_time(at(2))}, 6,"
        f" false, {sql_time(at(10))}, null), "
        f"('blog.public.articles', 'word_count', {sql_time(at(1))}, 2, 1, {sql_time(at(0))}, 3,"
        f" true, {sql_time(at(10))}, {sql_time(at(70))}), "
        f"('blog.public.users', 'email', {sql_time(at(0))}, 1, 0, {sql_time(at(0))}, 6,"
        " true, null, null)"
    )

    values = []
    for invocation, relations in DQ_RUNS.items():
        started = RUN_STARTED[invocation]
        for relation, columns in relations.items():
            for column, rows, nulls in columns:
                ratio = "null" if rows == 0 else nulls / rows
                values.append(
                    f"('{invocation}', {sql_time(started)}, '{relation.split('.')[1]}', "
                    f"'{relation}', '{column}', {rows}, {nulls}, {ratio}, "
                    f"{sql_time(started + timedelta(minutes=1))})"
                )
    spark.sql("insert into ops.dq_metrics values " + ", ".join(values))

    def run(model: str, invocation: str, status: str, recorded: datetime) -> str:
        started = RUN_STARTED[invocation]
        return (
            f"('{model}', 'cdc_merge', '{invocation}', {sql_time(started)}, 'incremental', null, "
            f"7, null, 1, 1, 2, 2, 5, 0, '{status}', {sql_time(recorded)}, null)"
        )

    spark.sql(
        "insert into ops.window_runs values "
        + ", ".join(
            [
                run("silver.users", "inv-1", "started", at(10)),
                run("silver.users", "inv-1", "succeeded", at(10.5)),
                run("silver.users", "inv-2", "started", at(70)),
                run("silver.users", "inv-2", "succeeded", at(70.5)),
                run("silver.articles", "inv-2", "started", at(70)),  # never succeeded
            ]
        )
    )


# --- tests -----------------------------------------------------------------------------------


def test_a_lakehouse_without_tables_gives_no_data_yet_panels(spark, lakehouse_home, capsys):
    reset_lakehouse(spark)
    for name in ("bronze", "ops"):  # nothing at all: not even the directories
        paths()[name].rmdir()
    try:
        assert report.main(["--output", str(lakehouse_home / "report-missing")]) == 0
    finally:
        for name in ("bronze", "ops"):
            paths()[name].mkdir(exist_ok=True)
    assert capsys.readouterr().out == (
        f"observability report: {lakehouse_home / 'report-missing' / 'index.html'}\n"
    )
    views = render_report(lakehouse_home / "report-missing").charts
    assert list(views) == CHARTS
    for view in views.values():
        assert view.empty and view.points == -1 and view.drawn == 0, view
        assert "no data yet" in view.text
    assert "ops.ingestion_batches does not exist yet" in views["ingestion_lag"].text
    assert "ops.filter_stats_current does not exist yet" in views["filter_rejections"].text
    assert "ops.dq_metrics does not exist yet" in views["null_ratios"].text
    assert "bronze.dead_letter does not exist yet" in views["dead_letter_reasons"].text
    assert "ops.schema_drift does not exist yet" in views["schema_drift"].text
    assert "do not exist yet" in views["builds"].text
    assert "no Bronze table has rows yet" in views["freshness"].text


def test_empty_tables_then_stated_rows(spark, dbt, lakehouse_home):
    reset_lakehouse(spark)
    _create_tables(spark, dbt)
    # Every table exists and is empty: every chart has nothing to draw, and says why
    # (the page of such charts is the one the test above opens in the browser).
    empty = {chart.chart_id: chart.empty for chart in report.collect(spark, NOW)}
    assert empty == {
        "ingestion_lag": "ops.ingestion_batches has no rows to chart",
        "ingestion_throughput": "ops.ingestion_batches has no rows to chart",
        "dead_letters": "ops.ingestion_batches has no rows to chart",
        "dead_letter_reasons": "bronze.dead_letter has no rows to chart",
        "schema_drift": "no schema drift: the staging models decode every column delivered",
        "filter_rejections": "ops.filter_stats_current has no rows to chart",
        "duplicates_removed": "ops.filter_stats_current has no rows to chart",
        "row_counts": "ops.dq_metrics has no rows to chart",
        "null_ratios": "ops.dq_metrics has no rows to chart",
        "builds": "no successful build recorded yet",
        "freshness": "no Bronze table has rows yet",
    }

    # The stated rows: every chart draws exactly them.
    write_stated_rows(spark)
    shot = lakehouse_home / "screenshots" / "report.png"
    rendered = _render(spark, lakehouse_home, "report", screenshot=shot)
    views = rendered.charts

    # One null-ratio chart per profiled model, in place of the single empty one.
    per_model = [f"null_ratios_{r}" for r in ("gold.fct_visits", "silver.users", "silver.visits")]
    assert list(views) == CHARTS[:8] + per_model + CHARTS[9:]
    got = {c: (v.series, v.points, v.values) for c, v in views.items() if not v.empty}
    assert got == {
        # Series sorted by name, points by time. Only CDC topics have a lag.
        "ingestion_lag": (1, 2, (5.0, 7.5)),
        # records_read / duration_seconds; the heartbeat is not a batch.
        "ingestion_throughput": (2, 4, (50.0, 40.0, 20.0, 24.0)),
        "dead_letters": (2, 4, (1, 0, 2, 3)),
        "dead_letter_reasons": (1, 2, (1, 1)),
        # The two columns that drifted; `email` was always decoded.
        "schema_drift": (2, 2, ()),
        # future_event_time, missing_page, missing_visit_id, unparseable_event_time,
        # unsupported_device: two windows each, the second as backfilled (inv-3; inv-2,
        # superseded, is left out).
        "filter_rejections": (5, 10, (2, 0, 0, 2, 1, 0, 0, 0, 1, 0)),
        "duplicates_removed": (1, 2, (3, 1)),
        # gold.fct_visits, silver.users, silver.visits
        "row_counts": (3, 4, (0, 4, 10, 12)),
        "null_ratios_silver.users": (1, 1, (0.0,)),
        # referrer, user_id, visit_id
        "null_ratios_silver.visits": (3, 6, (0.5, 0.5, 0.2, 0.25, 0.0, 0.0)),
        # gold.fct_visits, silver.users (inv-1 from both logs: one build), silver.visits;
        # silver.articles never succeeded.
        "builds": (3, 5, ()),
        # hours since 08:00 (users) and 09:00 (visits) at 12:00
        "freshness": (1, 2, (4.0, 3.0)),
    }
    # Each chart's legend names its series (timeline: its two marks; bars: the bar and
    # the freshness thresholds).
    legends = {c: v.legend for c, v in views.items() if not v.empty}
    assert legends == {
        **{c: series for c, (series, _, _) in got.items()},
        "builds": 2,
        "schema_drift": 1,
        "dead_letter_reasons": 1,
        "freshness": 3,
    }
    assert views["null_ratios_gold.fct_visits"].empty
    assert "the table was always empty" in views["null_ratios_gold.fct_visits"].text
    assert "blog.visits · malformed_json" in views["dead_letter_reasons"].text
    assert "blog.visits · not_an_object" in views["dead_letter_reasons"].text
    drift = views["schema_drift"].text
    assert (
        "blog.public.articles\tword_count\t2026-11-20 08:01:00\t2\t1\tsince 2026-11-20 09:10:00"
    ) in drift
    assert "blog.public.users\treferral_code\t2026-11-20 08:03:00\t4\t2\tno" in drift
    assert "email" not in drift
    builds = views["builds"].text
    assert "silver.users\t2026-11-20 09:10:30\t2.8 h ago" in builds
    assert "silver.visits\t2026-11-20 09:11:00\t2.8 h ago" in builds
    assert "gold.fct_visits\t2026-11-20 09:11:00\t2.8 h ago" in builds
    assert "silver.articles" not in builds
    freshness = views["freshness"].text
    assert "blog_public_users\t2026-11-20 08:00:00\t4.0 h ago" in freshness
    assert "blog_public_articles\tno rows yet" in freshness
    assert "warn 12 h" in freshness and "error 48 h" in freshness

    # The page is one file: no script, stylesheet, font or image from anywhere.
    page = (lakehouse_home / "report" / "index.html").read_text()
    assert "<script" not in page and "url(" not in page and "@import" not in page
    assert re.findall(r'(?:href|src)="([^"]*)"', page) == ["data:,"]  # the empty favicon
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    # The screenshot shows the charts: a full page of many colours, not a blank one.
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    image = rendered.screenshot
    assert image["width"] == 1400 and image["height"] > 1500, image
    assert image["colours"] > 500, image


def test_bad_output_and_missing_report_fail_clearly(spark, lakehouse_home, capsys):
    occupied = lakehouse_home / "not-a-directory"
    occupied.write_text("x")
    with pytest.raises(NotADirectoryError, match="not-a-directory exists and is not a dir"):
        report.write_report(spark, occupied, now=NOW)
    assert report.main(["--output", str(occupied)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    occupied.unlink()
    with pytest.raises(FileNotFoundError, match="no report at"):
        render_report(lakehouse_home / "no-such-report")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        with serve_directory(lakehouse_home / "no-such-dir"):
            pass
    assert os.path.isdir(lakehouse_home)
