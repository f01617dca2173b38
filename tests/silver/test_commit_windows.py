"""Windows on Bronze commits: what a run reads does not depend on any writer's clock.

The windowed silver models (`silver.users` by cdc_merge, `silver.users_history` by
cdc_history, `silver.visits` by filtered_append) read the rows committed to Bronze
since the last commit they absorbed. Bronze rows are written through the ingestion
job's own transforms (`append_to_bronze`), each call one commit, with the
`_ingested_at` the test gives it:

1. a first commit, built;
2. writer B commits rows ingested at 10:05, built;
3. writer A commits rows it stamped 10:01, older than the last window's end: a
   wall-clock window (`_ingested_at` after 10:05) would never read them; they are read,
   once;
4. a build with nothing new changes no table;
5. two writers append to each topic at the same moment (threads, Delta's optimistic
   concurrency), built: nothing is lost, nothing read twice;
6. a backfill of step 5's execution time gives the same tables;
7. Bronze compacted (OPTIMIZE), then a new commit: read, with every file of the table.

Each step states the rows the tables must hold; the run log's windows are the Bronze
commit versions. The models set `window_prune_column: _ingested_at`: each window's read
skips the Bronze files committed before it (by their `_ingested_at` statistics, bounded
by the smallest value among the window's commits), which each run logs.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import threading
from datetime import UTC, datetime

import pytest

from tests.gold.test_fct_visits import user, visit
from tests.helpers import append_to_bronze, delta_version

MODELS = "users users_history visits"
# The views they read, built once.
VIEWS = "stg_blog__users stg_blog__visits filter_stats_current"
USERS = "blog.public.users"
VISITS = "blog.visits"


def at(hour: int, minute: int) -> datetime:
    return datetime(2024, 10, 7, hour, minute, tzinfo=UTC)


def users(spark) -> list[tuple]:
    rows = spark.sql("select user_id, plan from silver.users").collect()
    return sorted(tuple(r) for r in rows)


def history(spark) -> list[tuple]:
    rows = spark.sql("select user_id, plan, is_current from silver.users_history").collect()
    return sorted(tuple(r) for r in rows)


def visits(spark) -> list[str]:
    return sorted(r[0] for r in spark.sql("select visit_id from silver.visits").collect())


def seen_by_filters(spark) -> int:
    """Rows the visits filters saw, over the runs that stand (each window once)."""
    row = spark.sql(
        "select coalesce(sum(total_rows), 0) from ops.filter_stats_current "
        "where model = 'visits' and filter_position = 1"
    ).first()
    return int(row[0])


# Each windowed model's side table: the one a restore also needs.
SIDES = {
    "silver.users": "silver.users__tombstones",
    "silver.users_history": "silver.users_history__changes",
    "silver.visits": "silver.visits__quarantine",
}


def versions(spark) -> dict[str, int]:
    return {t: delta_version(spark, t) for t in (*SIDES, *SIDES.values())}


def recorded_versions(spark) -> dict[str, tuple]:
    """Per model: the (base, after) versions of its table and side table that its last
    run recorded, and the versions they have now."""
    recorded = {}
    for model, side in SIDES.items():
        row = spark.sql(
            "select base_version, version_after, side_base_version, side_version_after "
            f"from ops.window_runs where model = '{model}' and status = 'succeeded' "
            "order by recorded_at desc limit 1"
        ).first()
        recorded[model] = (tuple(row), (delta_version(spark, model), delta_version(spark, side)))
    return recorded


def files_scanned(spark, table: str, predicate: str) -> int:
    """The files of `table` a query with the window predicate `predicate` scans (the
    scan's `numFiles`, after Delta's data skipping)."""
    frame = spark.sql(
        f"select * from (select *, _metadata.row_commit_version as _bronze_version from {table})"
        f" where {predicate}"
    )
    frame.collect()
    found = []

    def walk(node) -> None:
        if "Scan" in node.nodeName() and node.metrics().contains("numFiles"):
            found.append(int(node.metrics().apply("numFiles").value()))
        children = node.children()
        for index in range(children.size()):
            walk(children.apply(index))

    walk(frame._jdf.queryExecution().executedPlan())
    (count,) = found
    return count


@pytest.fixture(scope="module")
def steps(spark, dbt):
    from tests.helpers import reset_lakehouse

    def build(execution_time: str, views: str = "") -> None:
        variables = json.dumps({"execution_time": execution_time})
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            dbt("run", "--select", *f"{MODELS} {views}".split(), "--vars", variables)
        seen.setdefault("recorded", []).append(recorded_versions(spark))
        reads = re.findall(r"\w+: the window of (\S+) (reads .*)", out.getvalue())
        seen.setdefault("reads", []).append(dict(reads))

    def state() -> dict:
        return {
            "users": users(spark),
            "history": history(spark),
            "visits": visits(spark),
            "seen": seen_by_filters(spark),
        }

    def commit(topic: str, name: str, lines: list[str], stamped: datetime, batch: int):
        append_to_bronze(spark, topic, name, lines, stamped, batch)

    reset_lakehouse(spark)
    seen: dict = {}
    # 1. A first commit.
    commit(USERS, "u-1.json", [user("c", 100, "2024-10-07T09:00:00", 1, plan="free")], at(10, 0), 0)
    commit(VISITS, "v-1.json", [visit("v1", "2024-10-07T09:30:00", 1)], at(10, 0), 0)
    build("2024-10-07T10:00:00", VIEWS)
    seen[1] = state()
    # 2. Writer B, at 10:05.
    commit(USERS, "u-b.json", [user("c", 200, "2024-10-07T10:04:00", 2, plan="pro")], at(10, 5), 1)
    commit(VISITS, "v-b.json", [visit("v2", "2024-10-07T10:04:00", 2)], at(10, 5), 1)
    build("2024-10-07T10:10:00")
    seen[2] = state()
    # 3. Writer A commits after B's rows were built, with an older clock (10:01).
    late_users = [
        user("u", 150, "2024-10-07T10:00:00", 1, plan="team"),
        user("c", 160, "2024-10-07T10:00:30", 3, plan="free"),
    ]
    commit(USERS, "u-a.json", late_users, at(10, 1), 1)
    commit(VISITS, "v-a.json", [visit("v3", "2024-10-07T10:00:00", 3)], at(10, 1), 1)
    build("2024-10-07T10:20:00")
    seen[3] = state()
    seen["windows"] = [
        tuple(r)
        for r in spark.sql(
            "select model, window_start, window_end from ops.window_runs "
            "where status = 'succeeded' and model = 'silver.users' order by recorded_at"
        ).collect()
    ]
    seen["bronze_users_version"] = delta_version(spark, "bronze.blog_public_users")
    # 4. Nothing new.
    before = versions(spark)
    build("2024-10-07T10:30:00")
    seen[4] = (state(), versions(spark) == before)
    # 5. Two writers at once on each topic (v1 again: a copy delivered twice).
    concurrent = [
        (USERS, "u-x.json", [user("u", 300, "2024-10-07T10:35:00", 2, plan="team")], at(10, 40)),
        (USERS, "u-y.json", [user("c", 310, "2024-10-07T10:36:00", 4, plan="pro")], at(10, 31)),
        (VISITS, "v-x.json", [visit("v4", "2024-10-07T10:35:00", 4)], at(10, 40)),
        (
            VISITS,
            "v-y.json",
            [visit("v5", "2024-10-07T10:30:00", 2), visit("v1", "2024-10-07T09:30:00", 1)],
            at(10, 31),
        ),
    ]
    writers = [threading.Thread(target=commit, args=(*args, 2)) for args in concurrent]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    build("2024-10-07T10:45:00")
    seen[5] = state()
    # 6. A backfill of step 5's window: restored to before it, then read again.
    build("2024-10-07T10:45:00")
    seen[6] = state()
    # The files that step 5's read of Bronze users scans, and the table's.
    users_bronze = "bronze.blog_public_users"
    window = "`_bronze_version` > 3 and `_bronze_version` <= 5"
    low = "`_ingested_at` >= cast('2024-10-07 10:31:00' as timestamp)"
    seen["files"] = {
        "window": files_scanned(spark, users_bronze, window),
        "bounded": files_scanned(spark, users_bronze, f"{window} and {low}"),
        "of its commits": spark.sql(
            f"select count(distinct _metadata.file_path) from {users_bronze} "
            "where _metadata.row_commit_version in (4, 5)"
        ).first()[0],
        "of the table": spark.sql(
            f"select count(distinct _metadata.file_path) from {users_bronze}"
        ).first()[0],
    }
    # 7. Bronze users compacted, then one more commit: not only appends since the
    # window's start, so the read takes every file.
    spark.sql(f"optimize {users_bronze}")
    commit(USERS, "u-z.json", [user("u", 400, "2024-10-07T10:46:00", 3, plan="pro")], at(10, 50), 3)
    build("2024-10-07T10:55:00")
    seen[7] = state()
    return seen


def test_the_first_windows_read_their_commits(steps) -> None:
    assert steps[1] == {"users": [(1, "free")], "history": [(1, "free", True)],
                        "visits": ["v1"], "seen": 1}  # fmt: skip
    assert steps[2] == {
        "users": [(1, "free"), (2, "pro")],
        "history": [(1, "free", True), (2, "pro", True)],
        "visits": ["v1", "v2"],
        "seen": 2,
    }


def test_a_commit_with_an_older_ingestion_time_is_read_exactly_once(steps) -> None:
    expected = {
        "users": [(1, "team"), (2, "pro"), (3, "free")],
        "history": [(1, "free", False), (1, "team", True), (2, "pro", True), (3, "free", True)],
        "visits": ["v1", "v2", "v3"],
        "seen": 3,
    }
    assert steps[3] == expected
    # The windows are Bronze commit versions: (start, end], each after the last.
    windows = steps["windows"]
    assert [w[0] for w in windows] == ["silver.users"] * 3
    assert windows[0][1] is None
    assert [w[1] for w in windows[1:]] == [w[2] for w in windows[:-1]]
    assert windows[-1][2] == steps["bronze_users_version"]


def test_a_run_with_nothing_committed_changes_nothing(steps) -> None:
    state, unchanged = steps[4]
    assert state == steps[3]
    assert unchanged
    # Its run log rows: each table and side table still at the version it started from.
    for (base, after, side_base, side_after), _ in steps["recorded"][3].values():
        assert (after, side_after) == (base, side_base)


def test_each_run_records_the_versions_its_tables_have_after_it(steps) -> None:
    """A table the run did not write (the tombstones, with no delete in the window; a
    quarantine with nothing quarantined) is recorded at its base version without its
    history being read again: still the version it has."""
    assert len(steps["recorded"]) == 7
    for recorded in steps["recorded"]:
        for (_, after, _, side_after), now in recorded.values():
            assert (after, side_after) == now


def test_two_writers_at_once_lose_nothing(steps) -> None:
    assert steps[5] == {
        "users": [(1, "team"), (2, "team"), (3, "free"), (4, "pro")],
        "history": [
            (1, "free", False),
            (1, "team", True),
            (2, "pro", False),
            (2, "team", True),
            (3, "free", True),
            (4, "pro", True),
        ],
        # v1 again (a copy delivered twice) is a duplicate: removed, not kept twice.
        "visits": ["v1", "v2", "v3", "v4", "v5"],
        "seen": 6,
    }


def test_a_backfill_of_the_two_writers_window_gives_the_same_tables(steps) -> None:
    assert steps[6] == steps[5]


def test_only_the_tables_a_merge_rewrites_have_deletion_vectors(steps, spark) -> None:
    """Deletion vectors where a MERGE marks rows (the models' tables, tombstones, the
    visits' quarantine), none where rows are only appended (Bronze, the change store,
    the run log and statistics): the feature costs every scan of a table one job."""
    tables = [
        *SIDES,
        *SIDES.values(),
        "bronze.blog_public_users",
        "bronze.blog_visits",
        "ops.window_runs",
        "ops.filter_stats",
    ]
    with_vectors = set()
    for table in tables:
        detail = spark.sql(f"describe detail {table}").first()
        if "deletionVectors" in detail["tableFeatures"]:
            with_vectors.add(table)
    assert with_vectors == {
        "silver.users",
        "silver.users__tombstones",
        "silver.users_history",
        "silver.visits",
        "silver.visits__quarantine",
    }


def read(start: int, end: int, low: str | None, table: str = "bronze.blog_public_users") -> str:
    bound = f"`_ingested_at` >= cast('2024-10-07 {low}:00' as timestamp)" if low else "false"
    return (
        f"reads the files of {table} where `_bronze_version` > {start} and "
        f"`_bronze_version` <= {end} and {bound}"
    )


def test_each_window_reads_only_the_files_of_its_commits(steps) -> None:
    """From the second run on, each window's read is bounded by its commits (the first
    reads everything): the smallest `_ingested_at` among them, however old (step 3's
    10:01), and nothing at all when nothing was committed (step 4)."""

    def reads(start, end, low, visits_low="same"):
        visits_low = low if visits_low == "same" else visits_low
        return {
            "silver.users": read(start, end, low),
            "silver.users_history": read(start, end, low),
            "silver.visits": read(start, end, visits_low, "bronze.blog_visits"),
        }

    assert steps["reads"][:6] == [
        {},
        reads(1, 2, "10:05"),
        reads(2, 3, "10:01"),
        reads(3, 3, None),
        reads(3, 5, "10:31"),
        reads(3, 5, "10:31"),
    ]
    # Step 5's bound: Delta skips the files of the three earlier commits.
    files = steps["files"]
    assert files["window"] == files["of the table"] > files["of its commits"] > 0
    assert files["bounded"] == files["of its commits"]


def test_a_window_after_a_compaction_reads_every_file_and_loses_nothing(steps) -> None:
    every_file = (
        "reads every file of bronze.blog_public_users: a OPTIMIZE at version 6, not an append"
    )
    assert steps["reads"][6] == {
        "silver.users": every_file,
        "silver.users_history": every_file,
        "silver.visits": read(5, 5, None, "bronze.blog_visits"),
    }
    expected = dict(steps[5])
    expected["users"] = [(1, "team"), (2, "team"), (3, "pro"), (4, "pro")]
    expected["history"] = sorted([*steps[5]["history"], (3, "pro", True)])
    expected["history"].remove((3, "free", True))
    expected["history"] = sorted([*expected["history"], (3, "free", False)])
    assert steps[7] == expected


def failures(result) -> dict[str, str]:
    """The models of a failed dbt run that failed, with dbt's message."""
    return {r.node.name: r.message for r in result.result.results if r.status == "error"}


def test_a_bronze_table_made_again_is_refused_until_a_full_refresh(steps, spark, dbt) -> None:
    """Bronze users dropped with its files and written again from scratch (what a
    re-ingestion does): its commit versions begin again, so the recorded windows (up to
    version 7) would read none of its rows, or, once it passes version 7, only the
    newest. Each run records its input's Delta table id; a run on another table is
    refused, writing nothing, until a full refresh rebuilds the model from it. (Runs
    recorded before the id was, null, fall back on the version: before the window's
    start it is refused too, before a backfill's restore.) Runs last in the module: it
    replaces Bronze users."""
    from python_jobs.topics import load_topics

    def run(*args: str, expect_fail: bool = False, at: str = "2024-10-07T11:00:00"):
        variables = json.dumps({"execution_time": at})
        return dbt("run", "--select", *args, "--vars", variables, expect_fail=expect_fail)

    def table_id() -> str:
        return spark.sql("describe detail bronze.blog_public_users").first()["id"]

    def log_rows() -> int:
        return spark.sql("select count(*) from ops.window_runs").first()[0]

    old_id = table_id()
    topic = next(t for t in load_topics() if t.topic == USERS)
    shutil.rmtree(topic.bronze_path)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
    again = [
        [user("c", 100, "2024-10-07T09:00:00", 1, plan="free")],
        [user("c", 200, "2024-10-07T10:04:00", 2, plan="pro")],
    ]
    for batch, lines in enumerate(again):
        append_to_bronze(spark, USERS, f"again-{batch}.json", lines, at(11, batch), batch)
    new_id = table_id()
    assert new_id != old_id
    assert delta_version(spark, "bronze.blog_public_users") == 2
    # users's log as a log from before the id was recorded.
    spark.sql("update ops.window_runs set input_id = null where model = 'silver.users'")
    unchanged = (versions(spark), log_rows())

    refused = (
        "its input bronze.blog_public_users is not the table its windows were recorded on "
        "({}): it was dropped and made again, or replaced, so its commit versions do not "
        "continue those windows"
    )
    full_refresh = "Rebuild the model from it once: dbt build --select {} --full-refresh"
    # A backfill of step 7's time: silver.users would be restored to the version before
    # that window first; refused before that.
    message = failures(run("users", "users_history", expect_fail=True, at="2024-10-07T10:55:00"))
    by_id = f"its Delta table id was {old_id} when the run of 2024-10-07 10:00:00.000000"
    assert refused.format(f"{by_id} read it, and is {new_id} now") in message["users_history"]
    assert full_refresh.format("users_history") in message["users_history"]
    by_version = "the table is at version 2, before the window start 5"
    assert refused.format(by_version) in message["users"]
    assert full_refresh.format("users") in message["users"]
    assert (versions(spark), log_rows()) == unchanged

    # Past the recorded windows' end (version 7): the versions alone would read version 8.
    # Five commits that only set a property (cheaper than appends), then an append.
    for n in range(5):
        spark.sql(f"alter table bronze.blog_public_users set tblproperties ('test.n' = '{n}')")
    lines = [user("c", 300, "2024-10-07T11:00:00", 3, plan="team")]
    append_to_bronze(spark, USERS, "again-2.json", lines, at(11, 2), 2)
    assert delta_version(spark, "bronze.blog_public_users") == 8
    message = failures(run("users_history", expect_fail=True))
    assert refused.format(f"{by_id} read it, and is {new_id} now") in message["users_history"]
    assert (versions(spark), log_rows()) == unchanged

    run("users", "--full-refresh")
    assert users(spark) == [(1, "free"), (2, "pro"), (3, "team")]
    # The windows go on from the new table's versions, recording its id.
    later = [user("u", 300, "2024-10-07T11:30:00", 1, plan="team")]
    append_to_bronze(spark, USERS, "again-3.json", later, at(11, 30), 3)
    run("users", at="2024-10-07T12:00:00")
    assert users(spark) == [(1, "team"), (2, "pro"), (3, "team")]
    recorded = spark.sql(
        "select run_kind, window_start, window_end, input_id from ops.window_runs "
        "where status = 'succeeded' and model = 'silver.users' "
        "and execution_time >= '2024-10-07 11:00:00' order by recorded_at"
    ).collect()
    assert [tuple(r) for r in recorded] == [
        ("create", None, 8, new_id),
        ("incremental", 8, 9, new_id),
    ]


def test_a_run_log_from_an_earlier_version_gets_the_column_and_row_tracking(spark, dbt) -> None:
    """A run log made before `input_id` and row tracking existed (its 16 columns) gets
    both from on-run-start (`create_ops_tables` -> `_window_log_migrate`), once: the
    column null in its rows, which all take the commit version of the change (so they
    keep their order by `recorded_at`), and a row appended after comes after them."""
    log = "ops.window_runs_before_input_id"
    spark.sql("create schema if not exists ops")
    spark.sql(f"drop table if exists {log}")
    spark.sql(
        f"create table {log} (model string not null, materialization string not null, "
        "attempt_id string not null, execution_time timestamp not null, "
        "run_kind string not null, window_start bigint, window_end bigint, "
        "restored_to_version bigint, base_version bigint not null, "
        "side_base_version bigint not null, version_after bigint, "
        "side_version_after bigint, change_rows bigint, quarantined_rows bigint, "
        "status string not null, recorded_at timestamp not null) using delta"
    )
    spark.sql(
        f"insert into {log} values ('silver.users', 'cdc_merge', 'a', "
        "timestamp'2024-10-07 10:00:00', 'create', null, 1, null, 0, 0, 1, 0, 1, 0, "
        "'succeeded', timestamp'2024-10-07 10:00:01')"
    )
    for _ in range(2):
        dbt("run-operation", "_window_log_migrate", "--args", json.dumps({"log": log}))
    columns = spark.table(log).columns
    assert columns[-2:] == ["recorded_at", "input_id"]
    assert [tuple(r) for r in spark.sql(f"select model, input_id from {log}").collect()] == [
        ("silver.users", None)
    ]
    properties = dict(spark.sql(f"show tblproperties {log}").collect())
    assert properties["delta.enableRowTracking"] == "true"
    # Changed once, then nothing: version 0 created, 1 the row, 2 the column, 3-5 row
    # tracking (the protocol, the rows already there, the property).
    history = spark.sql(f"describe history {log}").collect()
    assert [(r.version, r.operation) for r in history][:4] == [
        (5, "SET TBLPROPERTIES"),
        (4, "ROW TRACKING BACKFILL"),
        (3, "UPGRADE PROTOCOL"),
        (2, "ADD COLUMNS"),
    ]
    spark.sql(
        f"insert into {log} values ('silver.users', 'cdc_merge', 'b', "
        "timestamp'2024-10-07 11:00:00', 'incremental', 1, 2, null, 1, 0, 2, 0, 1, 0, "
        "'succeeded', timestamp'2024-10-07 09:00:00', null)"
    )
    ordered = spark.sql(
        f"select attempt_id, _metadata.row_commit_version as v from {log} "
        "order by _metadata.row_commit_version"
    ).collect()
    assert [tuple(r) for r in ordered] == [("a", 4), ("b", 6)]
    spark.sql(f"drop table {log}")
