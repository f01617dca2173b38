"""`make demo` on a separate LAKEHOUSE_HOME: the story, its summary, and nothing
written elsewhere.

The demo runs as a user would run it (`make demo LAKEHOUSE_HOME=...`, on a smaller
workload: DEMO_ARGS), with HOME pointed at an empty directory so that any write to the
user's home shows up. Afterwards: nothing printed that is not the user's business (JVM
notices, the warnings of expected events), every step ran in order, the summary has its rows per
layer, rejected rows per filter, versions in history and lag; the backfill gave the same
rows; HOME is still empty, /tmp has no new entries, and the repository's `git status`
(ignored files included) is what it was.
"""

from __future__ import annotations

import os
import re
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
            # A developer's own launcher options (their temp directory) are not the demo's.
            "SPARK_LAUNCHER_OPTS",
        )
    }
    env["HOME"] = str(user_home)
    tmp_before = set(os.listdir("/tmp"))
    status_before = _git_status()

    # A guard against a hang, not a goal: on a loaded CI machine the demo took over
    # 900 s (about 480 s on an idle one).
    proc = subprocess.run(
        [
            "make",
            "demo",
            f"LAKEHOUSE_HOME={home}",
            "DEMO_ARGS=--days 1 --more-days 1 --users 60 --articles 30",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # Nothing between the steps that is not the user's business: the JVM's start-up
    # notice, Spark's scheduler-pool warnings, Hive's refused first try of a replace,
    # the release of a MERGE's source copy (python_jobs/spark.py, log4j2.properties).
    noise = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if re.search(
            r"WARNING: Using incubator modules|FairSchedulableBuilder|HiveAlterHandler|"
            r"was locally checkpointed",
            line,
        )
    ]
    assert noise == [], noise[:10]
    steps = re.findall(r"==> \[(\d)/7\] (\w+)", proc.stdout)
    assert [int(n) for n, _ in steps] == list(range(1, 8))
    assert [word for _, word in steps] == [
        "simulate", "run", "simulate", "run", "backfill", "lineage", "summary",
    ]  # fmt: skip
    # Each run is the production run command's three steps, in order.
    runs = re.findall(r"==> run: step (\d)/3: (\w+)", proc.stdout)
    assert runs == [("1", "ingest"), ("2", "snapshot"), ("3", "build")] * 2
    summary = proc.stdout[proc.stdout.index("==> [7/7] summary") :]
    for relation in ("blog_public_users", "blog_public_articles", "blog_visits"):
        assert re.search(rf"bronze +{relation} +[1-9]", summary), relation
    for relation in ("silver   visits ", "gold     fct_visits ", "gold     agg_article_daily_"):
        assert relation in summary
    for name in ("missing_visit_id", "unparseable_event_time", "future_event_time"):
        assert re.search(rf"^ +{name} +\d+ +\d+$", summary, re.M), name
    # The backfilled window counts once: the filters' rows are the quarantine's, and
    # the duplicates what Bronze holds beyond the kept and quarantined rows.
    filters = re.findall(r"^ +(\w+) +(\d+) +\d+$", summary, re.M)
    rejected = {name: int(n) for name, n in filters if not name.startswith("duplicate_")}
    check = re.search(
        r"each window once: rejected (\d+) = quarantine (\d+); duplicates (\d+) = "
        r"Bronze (\d+) - silver (\d+) - quarantine (\d+)\)",
        summary,
    )
    total, quarantined, duplicates, bronze_rows, silver_rows, _ = map(int, check.groups())
    assert total == quarantined == sum(rejected.values()) and len(rejected) == 5
    assert int(dict(filters)["duplicate_visit_id"]) == duplicates
    assert duplicates == bronze_rows - silver_rows - quarantined >= 0
    assert re.search(rf"^ +silver +visits__quarantine +{quarantined}$", summary, re.M)
    assert re.search(rf"^ +silver +visits +{silver_rows}$", summary, re.M)
    assert re.search(rf"^ +bronze +blog_visits +{bronze_rows}$", summary, re.M)
    for relation in ("silver.users_history", "silver.articles_history", "silver.devices_history"):
        assert re.search(rf"^ +{re.escape(relation)} +[1-9]\d* +[1-9]\d* +\d+$", summary, re.M)
    for topic in ("blog.public.users", "blog.public.articles"):  # lag: now - commit time
        assert re.search(rf"^ +{re.escape(topic)} +[1-9]\d* +[\d.]+ [sh] ", summary, re.M), topic
    assert re.search(r"^ +blog\.visits +[1-9]\d* +- +-$", summary, re.M)  # no commit time
    before, after = re.search(
        r"backfill: silver.visits (\d+) rows before, (\d+) after", summary
    ).groups()
    assert before == after and int(before) > 0
    docs = home / "dbt" / "target" / "index.html"
    assert f"lineage docs: {docs}" in summary and docs.exists()
    report = re.search(r"report: +(\S+)", summary).group(1)
    assert Path(report).is_file() and Path(report).is_relative_to(home)
    assert (home / "metastore_db").is_dir()

    assert sorted(str(p.relative_to(user_home)) for p in user_home.rglob("*")) == []
    # The suite's other worker (make test runs two) may make its own temporary homes.
    new_in_tmp = set(os.listdir("/tmp")) - tmp_before
    assert {name for name in new_in_tmp if not name.startswith("lakehouse-test-")} == set()
    assert _git_status() == status_before

    # The report the demo wrote renders in a real browser, every chart with data.
    from tests.browser import render_report

    view = render_report(Path(report).parent, screenshot=home / "screenshots" / "demo_report.png")
    for name in ("ingestion_lag", "ingestion_throughput", "filter_rejections", "row_counts"):
        assert not view.charts[name].empty and view.charts[name].points > 0, name
    assert view.screenshot["colours"] > 50
