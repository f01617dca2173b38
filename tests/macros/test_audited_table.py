"""The audited_table materialization (Audit-Write-Audit-Publish) and enforced contracts.

The scenario model `audited_scores` (materializations_project/models/audited) reads
`silver.awap_input`; it has an enforced contract (id not null, a check `score >= 0`), a
`unique` test on id, a warn-only `not_null` test on name and a declared audit
`score < 1000`. Clean data publishes in one commit; a failing audit or a constraint
violation leaves the published table at the same Delta version, still readable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT
from tests.helpers import delta_version
from tests.macros.test_cdc_merge import PROJECT, run_project

TABLE = "silver.audited_scores"
CLEAN = [(1, "ada", 10), (2, "bob", 20)]
CLEAN_2 = [(1, "ada", 11), (2, "bob", 20), (3, "cy", 30)]


KNOWN_IDS = [(1,), (2,), (3,), (4,)]  # what the relationships test on id allows


def write_input(spark, rows) -> None:
    spark.createDataFrame(rows, "id int, name string, score int").write.format("delta").mode(
        "overwrite"
    ).saveAsTable("silver.awap_input")


def build(dbt, lakehouse_home, expect_fail=False):
    return run_project(
        dbt, lakehouse_home, {}, "--select", "audited_scores", expect_fail=expect_fail
    )


def published(spark) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(TABLE).collect())


def version(spark) -> int:
    return delta_version(spark, TABLE)


def staging_rows(spark) -> list[tuple] | None:
    """The rejected candidate's rows, if one is kept."""
    if not spark.catalog.tableExists(TABLE + "__staging"):
        return None
    return sorted(tuple(r) for r in spark.table(TABLE + "__staging").collect())


def failure(result) -> str:
    return " ".join(str(r.message) for r in result.result.results)


@pytest.fixture(scope="module")
def first_build(spark, dbt, lakehouse_home):
    spark.sql("create schema if not exists silver")
    spark.sql(f"drop table if exists {TABLE}")
    spark.createDataFrame(KNOWN_IDS, "id int").write.format("delta").mode("overwrite").saveAsTable(
        "silver.awap_known_ids"
    )
    write_input(spark, CLEAN)
    build(dbt, lakehouse_home)
    yield
    for name in (TABLE, TABLE + "__staging", "silver.awap_input", "silver.awap_known_ids"):
        spark.sql(f"drop table if exists {name}")


def test_clean_data_publishes_in_one_commit(spark, dbt, lakehouse_home, first_build) -> None:
    assert published(spark) == CLEAN
    properties = dict((r[0], r[1]) for r in spark.sql(f"show tblproperties {TABLE}").collect())
    assert properties["delta.constraints.score_not_negative"] == "score >= 0"
    before = version(spark)
    write_input(spark, CLEAN_2)
    build(dbt, lakehouse_home)
    assert published(spark) == CLEAN_2
    assert version(spark) == before + 1
    last = spark.sql(f"describe history {TABLE} limit 1").collect()[0]
    assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Overwrite")
    assert not spark.catalog.tableExists(TABLE + "__staging")


@pytest.mark.parametrize(
    ("rows", "reason"),
    [
        ([(1, "ada", 10), (1, "eve", 12)], "test unique_audited_scores_id (1 failures)"),
        ([(1, "ada", 5000)], "audit score_below_1000 (1 rows fail: score < 1000)"),
        (
            [(1, "ada", 10), (9, "zed", 1)],
            "test relationships_audited_scores_id__id__source_scenario_awap_known_ids_ "
            "(1 failures)",
        ),
    ],
    ids=["unique-test", "declared-audit", "relationships-test"],
)
def test_a_failing_audit_leaves_the_published_version(
    spark, dbt, lakehouse_home, first_build, rows, reason
) -> None:
    rows_before, before = published(spark), version(spark)
    write_input(spark, rows)
    message = failure(build(dbt, lakehouse_home, expect_fail=True))
    assert "audited_table (model silver.audited_scores): not published, audits failed" in message
    assert reason in message
    assert f"silver.audited_scores is unchanged at version {before}" in message
    assert (published(spark), version(spark)) == (rows_before, before)
    # The candidate stays for inspection.
    assert sorted(tuple(r) for r in spark.table(TABLE + "__staging").collect()) == sorted(rows)


@pytest.mark.parametrize(
    ("rows", "violation"),
    [([(4, "dan", -1)], "score_not_negative"), ([(None, "dan", 1)], "NOT NULL")],
    ids=["check", "not-null"],
)
def test_a_constraint_violation_is_rejected_by_the_storage(
    spark, dbt, lakehouse_home, first_build, rows, violation
) -> None:
    rows_before, before = published(spark), version(spark)
    write_input(spark, rows)
    assert violation in failure(build(dbt, lakehouse_home, expect_fail=True))
    assert (published(spark), version(spark)) == (rows_before, before)
    # The published table enforces the same constraints on any writer.
    values = ", ".join("null" if v is None else repr(v) for v in rows[0])
    with pytest.raises(Exception, match=violation):
        spark.sql(f"insert into {TABLE} values ({values})")
    assert (published(spark), version(spark)) == (rows_before, before)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("scor >= 0", "UNRESOLVED_COLUMN"),
        (
            "score + 1",
            "audited_table (model silver.audited_scores): check constraint "
            "'score_not_negative' (score + 1) is int, not a boolean expression",
        ),
    ],
    ids=["unresolved", "not-boolean"],
)
def test_a_check_that_is_not_a_boolean_of_the_columns_fails_before_any_write(
    spark, dbt, lakehouse_home, first_build, tmp_path, expression, message
) -> None:
    """Delta creates the tables with their checks as properties, which it does not
    analyse: the materialization does, first, as ALTER TABLE ADD CONSTRAINT would."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    settings = project / "dbt_project.yml"
    settings.write_text(
        settings.read_text().replace('["../../../macros"]', json.dumps([str(REPO_ROOT / "macros")]))
    )
    schema = project / "models" / "audited" / "audited_scores.yml"
    schema.write_text(schema.read_text().replace('"score >= 0"', json.dumps(expression)))
    rows_before, before, staging = published(spark), version(spark), staging_rows(spark)
    write_input(spark, CLEAN_2)
    result = dbt(
        "run", "--project-dir", str(project), "--target-path", str(tmp_path / "target"),
        "--select", "audited_scores", expect_fail=True,
    )  # fmt: skip
    assert message in failure(result)
    assert (published(spark), version(spark)) == (rows_before, before)
    # Nothing written: not even the staging table of the candidate was replaced.
    assert staging_rows(spark) == staging


def test_a_warning_does_not_block_publication(spark, dbt, lakehouse_home, first_build) -> None:
    rows = [(1, None, 10), (2, "bob", 20)]
    write_input(spark, rows)
    build(dbt, lakehouse_home)
    assert published(spark) == sorted(rows, key=lambda r: r[0])


# The incremental scenario, built twice: keys found by evaluating the model
# (audited_incremental), and from the inputs and the published table with the scores as
# the driver (audited_driven, incremental_driver).
INCREMENTAL_MODELS = ("audited_incremental", "audited_driven")
SCORES = [(1, "ada", 10, 1), (2, "bob", 20, 1), (3, "cy", 30, 2)]
TEAMS = [(1, "red"), (2, "blue")]


def build_incremental(dbt, lakehouse_home, selection: str, expect_fail=False):
    return run_project(dbt, lakehouse_home, {}, "--select", selection, expect_fail=expect_fail)


def commits_since(spark, table: str, version: int) -> list[tuple]:
    """(operation, merge row counts inserted/updated/deleted) of each commit of the
    incremental table after `version`, oldest first."""
    rows = spark.sql(f"describe history {table}").where(f"version > {version}")
    commits = []
    for row in sorted(rows.collect(), key=lambda r: r["version"]):
        metrics = row["operationMetrics"] or {}
        counts = (
            tuple(
                int(metrics[f"numTarget{name}"])
                for name in ("RowsInserted", "RowsUpdated", "RowsDeleted")
            )
            if row["operation"] == "MERGE"
            else None
        )
        commits.append((row["operation"], counts))
    return commits


def awap_inputs(spark, model: str) -> Iterator[str]:
    """`model`'s inputs created afresh; they and the model's tables dropped after."""
    spark.sql("create schema if not exists silver")
    for name, rows, schema in (
        ("awap_scores_raw", SCORES, "id int, name string, score int, team_id int"),
        ("awap_teams_raw", TEAMS, "team_id int, team_name string"),
        ("awap_known_ids", KNOWN_IDS, "id int"),
    ):
        spark.createDataFrame(rows, schema).write.format("delta").mode("overwrite").saveAsTable(
            f"silver.{name}"
        )
    yield model
    for name in ("awap_scores_raw", "awap_teams_raw", "awap_scores", "awap_teams"):
        spark.sql(f"drop table if exists silver.{name}")
    for name in (model, model + "__staging"):
        spark.sql(f"drop table if exists silver.{name}")


@pytest.fixture(params=INCREMENTAL_MODELS)
def incremental_model(request, spark):
    """The model under test; its inputs created afresh, and dropped after."""
    yield from awap_inputs(spark, request.param)


def test_an_incremental_audited_table_recomputes_only_the_changed_keys(
    spark, dbt, lakehouse_home, incremental_model, capsys
) -> None:
    """First build: a full rebuild that records the input versions. Then a score
    updated, a row deleted, one inserted and a team renamed: only the keys they reach are
    recomputed and merged (key 2 is untouched); nothing changed: no commit; a failing
    audit among the recomputed keys publishes nothing; a RESTORE of an input (a backfill)
    rebuilds in full. Both ways of finding the keys find the same ones."""
    model = incremental_model
    table = f"silver.{model}"
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, f"+{model}")
    assert published_rows(spark, table) == [
        (1, "ada", 10, 1, "red"),
        (2, "bob", 20, 1, "red"),
        (3, "cy", 30, 2, "blue"),
    ]
    assert (
        publication(capsys, model)
        == "a full rebuild: a new table, a full refresh or a changed contract"
    )
    properties = dict((r[0], r[1]) for r in spark.sql(f"show tblproperties {table}").collect())
    for name in ("awap_scores", "awap_teams"):
        table_id = spark.sql(f"describe detail silver.{name}").collect()[0]["id"]
        assert properties[f"lakehouse.input.silver.{name}"] == f"{table_id}@0"
    first = delta_version(spark, table)

    spark.sql("update silver.awap_scores set score = 11 where id = 1")
    spark.sql("delete from silver.awap_scores where id = 3")
    spark.sql("insert into silver.awap_scores values (4, 'dee', 40, 2)")
    spark.sql("update silver.awap_teams set team_name = 'navy' where team_id = 2")
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, model)
    assert published_rows(spark, table) == [
        (1, "ada", 11, 1, "red"),
        (2, "bob", 20, 1, "red"),
        (4, "dee", 40, 2, "navy"),
    ]
    # Keys 1, 3 and 4 recomputed (2 untouched): one merge, then the input versions read.
    assert publication(capsys, model) == "incremental: 3 keys to recompute"
    assert commits_since(spark, table, first) == [("MERGE", (1, 1, 1)), ("SET TBLPROPERTIES", None)]
    merged = delta_version(spark, table)

    # Nothing changed since: no staging, no commit.
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, model)
    assert publication(capsys, model) == "incremental: 0 keys to recompute"
    assert commits_since(spark, table, merged) == []

    # A failing audit among the recomputed keys: nothing is published.
    spark.sql("update silver.awap_scores set score = 5000 where id = 2")
    capsys.readouterr()
    result = build_incremental(dbt, lakehouse_home, model, expect_fail=True)
    assert "audit score_below_1000 (1 rows fail: score < 1000)" in failure(result)
    assert publication(capsys, model) == "incremental: 1 keys to recompute"
    assert commits_since(spark, table, merged) == []
    spark.sql("update silver.awap_scores set score = 20 where id = 2")

    # A backfill restores an input: the change feed cannot describe a RESTORE, so the
    # build rebuilds in full (an overwrite, not a merge).
    spark.sql("restore table silver.awap_teams to version as of 0")
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, model)
    assert published_rows(spark, table) == [
        (1, "ada", 11, 1, "red"),
        (2, "bob", 20, 1, "red"),
        (4, "dee", 40, 2, "blue"),
    ]
    assert commits_since(spark, table, merged) == [("WRITE", None), ("SET TBLPROPERTIES", None)]
    restored = delta_version(spark, "silver.awap_teams")
    assert (
        publication(capsys, model)
        == f"a full rebuild: silver.awap_teams had a RESTORE at version {restored}"
    )

    # Maintenance vacuums an input: with a retention that keeps every file the change
    # feed reads (Delta's 7 days), the next build stays incremental; with 0 hours the
    # VACUUM may have deleted some, and the build rebuilds in full.
    rebuilt = delta_version(spark, table)
    marked = delta_version(spark, "silver.awap_scores")
    spark.sql("update silver.awap_scores set score = 12 where id = 1")
    spark.sql("vacuum silver.awap_scores")
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, model)
    assert publication(capsys, model) == "incremental: 1 keys to recompute"
    assert commits_since(spark, table, rebuilt) == [
        ("MERGE", (0, 1, 0)),
        ("SET TBLPROPERTIES", None),
    ]
    marked = delta_version(spark, "silver.awap_scores")
    spark.sql(
        "alter table silver.awap_scores set tblproperties "
        "('delta.deletedFileRetentionDuration' = 'interval 0 hours')"
    )
    spark.sql("update silver.awap_scores set score = 13 where id = 1")
    spark.sql("vacuum silver.awap_scores")
    vacuumed = delta_version(spark, "silver.awap_scores") - 1
    capsys.readouterr()
    build_incremental(dbt, lakehouse_home, model)
    assert publication(capsys, model) == (
        f"a full rebuild: silver.awap_scores's VACUUM at version {vacuumed} (retention 0.0 h) "
        f"may have deleted files of its changes since version {marked}"
    )
    assert published_rows(spark, table) == [
        (1, "ada", 13, 1, "red"),
        (2, "bob", 20, 1, "red"),
        (4, "dee", 40, 2, "blue"),
    ]


def publication(capsys, model: str) -> str:
    """How the last build published, as its log line says (after the model's label)."""
    label = f"audited_table (model silver.{model}): "
    said = [
        line.split(label, 1)[1].strip()
        for line in capsys.readouterr().out.splitlines()
        if label in line
    ]
    lines = [how for how in said if how.startswith(("incremental:", "a full rebuild:"))]
    assert len(lines) == 1, said
    return lines[0]


def published_rows(spark, table: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.table(table).collect())


LAYOUT = "silver.audited_layout"


@pytest.fixture()
def layout_model(spark, lakehouse_home):
    root = lakehouse_home / "audited-layout"
    shutil.rmtree(root, ignore_errors=True)
    yield from awap_inputs(spark, "audited_layout")
    spark.sql("drop table if exists silver.audited_clustered")
    shutil.rmtree(root, ignore_errors=True)


def merged_partitions(log: str, table: str) -> list[set[str | None]]:
    """The partition values each MERGE into `table` in this dbt log text names in its
    condition (Delta reads only those partitions' files to find the rows it matches);
    None for the partition of null values."""
    found = []
    for statement in re.findall(rf"merge into {table} as t(.*?)when matched", log, re.S):
        pattern = r"and \((?:t\.`team_id` in \((.*)\))?(?: or )?(t\.`team_id` is null)?\)$"
        ((values, null),) = re.findall(pattern, statement, re.M)
        found.append(
            set(re.findall(r"cast\('([^']*)' as int\)", values)) | ({None} if null else set())
        )
    return found


def test_table_configs_apply_and_a_merge_reads_only_its_keys_partitions(
    spark, dbt, lakehouse_home, layout_model, capsys, fail_statement
) -> None:
    """`partition_by` and `location_root` on an incremental audited_table: the table is
    created with them, and an incremental build's merge reads only the partitions of
    the keys it recomputes (as published and as recomputed, so a key that moves to
    another partition is updated, not inserted twice). `liquid_clustered_by` on a
    full-rebuild audited_table (audited_clustered): the table keeps its clustering
    columns after each overwrite, and gets them back after a run that died between its
    overwrite and its `cluster by`."""
    root = lakehouse_home / "audited-layout"

    def build(selection: str = "audited_layout audited_clustered") -> None:
        capsys.readouterr()
        run_project(dbt, lakehouse_home, {"configured_root": str(root)}, "--select", selection)

    build("+audited_layout audited_clustered")
    log = Path(os.environ["DBT_LOG_PATH"]) / "dbt.log"  # set by the first dbt command
    logged = log.stat().st_size
    detail = spark.sql(f"describe detail {LAYOUT}").first()
    assert (detail["partitionColumns"], detail["location"]) == (
        ["team_id"],
        f"file:{root}/audited_layout",
    )
    assert not spark.catalog.tableExists(LAYOUT + "__staging")
    first = delta_version(spark, LAYOUT)

    spark.sql("update silver.awap_scores set score = 11 where id = 1")
    build()
    assert publication(capsys, "audited_layout") == "incremental: 1 keys to recompute"
    assert published_rows(spark, LAYOUT) == [
        (1, "ada", 11, 1, "red"),
        (2, "bob", 20, 1, "red"),
        (3, "cy", 30, 2, "blue"),
    ]

    # Key 2 moves from team 1 to team 2: both partitions are read, the row moves.
    spark.sql("update silver.awap_scores set team_id = 2 where id = 2")
    build()
    assert publication(capsys, "audited_layout") == "incremental: 1 keys to recompute"
    assert published_rows(spark, LAYOUT) == [
        (1, "ada", 11, 1, "red"),
        (2, "bob", 20, 2, "blue"),
        (3, "cy", 30, 2, "blue"),
    ]
    # Key 3 loses its team: its row moves to the partition of null team ids, which the
    # merge names with `is null` (`in (null)` would match nothing). Then it changes
    # there: the merge reads that partition only, and finds the row (not inserted twice).
    for change, score in (("team_id = null", 30), ("score = 31", 31)):
        spark.sql(f"update silver.awap_scores set {change} where id = 3")
        build("audited_layout")
        assert publication(capsys, "audited_layout") == "incremental: 1 keys to recompute"
        assert published_rows(spark, LAYOUT) == [
            (1, "ada", 11, 1, "red"),
            (2, "bob", 20, 2, "blue"),
            (3, "cy", score, None, None),
        ]
    # The first merge read team 1's partition, the second both, the third team 2's and
    # the nulls', the fourth the nulls' only.
    assert merged_partitions(log.read_text()[logged:], LAYOUT) == [
        {"1"},
        {"1", "2"},
        {"2", None},
        {None},
    ]
    publication_commits = [("MERGE", (0, 1, 0)), ("SET TBLPROPERTIES", None)]
    assert commits_since(spark, LAYOUT, first) == publication_commits * 4
    clustered = "silver.audited_clustered"
    assert spark.sql(f"describe detail {clustered}").first()["clusteringColumns"] == ["id"]
    assert published_rows(spark, clustered) == [(1, "ada", 11), (2, "bob", 20), (3, "cy", 30)]
    publications = ["WRITE", "CLUSTER BY"] * 3

    def operations() -> list[str]:
        history = spark.sql(f"describe history {clustered}").orderBy("version").collect()
        return [row["operation"] for row in history]

    assert operations() == ["CREATE OR REPLACE TABLE"] + publications

    # A run that dies between its overwrite and the `cluster by` (a test-only fault)
    # leaves the new rows without clustering columns; the next run, though it replaces
    # nothing, sets them again (the table was created clustered).
    spark.sql("update silver.awap_scores set score = 12 where id = 1")
    disarm = fail_statement(rf"alter table {clustered} cluster by", "before the cluster by")
    result = run_project(
        dbt,
        lakehouse_home,
        {"configured_root": str(root)},
        "--select",
        "audited_clustered",
        expect_fail=True,
    )
    disarm()
    assert "injected fault before the cluster by" in failure(result)
    assert spark.sql(f"describe detail {clustered}").first()["clusteringColumns"] == []
    assert published_rows(spark, clustered) == [(1, "ada", 12), (2, "bob", 20), (3, "cy", 31)]
    build("audited_clustered")
    assert spark.sql(f"describe detail {clustered}").first()["clusteringColumns"] == ["id"]
    assert operations() == ["CREATE OR REPLACE TABLE"] + publications + ["WRITE"] * 2 + [
        "CLUSTER BY"
    ]

    # grants: applied after publication, as dbt-spark applies them; open-source Spark
    # has no SHOW GRANTS or GRANT, so the build fails there with Spark's own message.
    spark.sql("update silver.awap_scores set score = 13 where id = 1")
    result = run_project(
        dbt,
        lakehouse_home,
        {"configured_root": str(root), "audited_grants": {"select": ["analyst"]}},
        "--select",
        "audited_clustered",
        expect_fail=True,
    )
    assert "Syntax error at or near 'on': missing 'FUNCTIONS'" in failure(result)
    assert published_rows(spark, clustered) == [(1, "ada", 13), (2, "bob", 20), (3, "cy", 31)]


POINT_IN_TIME = "silver.audited_point_in_time"


def day(n: float) -> str:
    hours = round((n - int(n)) * 24)
    return f"timestamp'2024-10-{int(n):02d} {hours:02d}:00:00'"


@pytest.fixture()
def point_in_time_model(spark):
    """Visits and the teams' versions, the inputs of audited_point_in_time; dropped after."""
    spark.sql("create schema if not exists silver")
    spark.sql("drop table if exists silver.awap_visits_raw")
    spark.sql("drop table if exists silver.awap_team_versions_raw")
    spark.sql(
        "create table silver.awap_visits_raw using delta as select * from values "
        f"(1, {day(2)}, 1), (2, {day(5)}, 1), (3, {day(2)}, 2), (4, {day(6)}, 2), "
        f"(5, {day(8)}, 2) as v(id, at, team_id)"
    )
    spark.sql(
        "create table silver.awap_team_versions_raw using delta as select * from values "
        f"(1, 'red', {day(1)}, {day(4)}, false), (1, 'crimson', {day(4)}, null, true), "
        f"(2, 'blue', {day(1)}, null, true) "
        "as t(team_id, team_name, valid_from, valid_to, is_current)"
    )
    yield "audited_point_in_time"
    for name in ("awap_visits_raw", "awap_team_versions_raw", "awap_visits", "awap_team_versions"):
        spark.sql(f"drop table if exists silver.{name}")
    for name in (POINT_IN_TIME, POINT_IN_TIME + "__staging"):
        spark.sql(f"drop table if exists {name}")


def test_a_point_in_time_input_recomputes_only_where_a_version_changed(
    spark, dbt, lakehouse_home, point_in_time_model, capsys
) -> None:
    """A history input declared `{column, at, current_flag}`: a version closed by a
    new one recomputes only the visits from the change on; a version whose content
    changes in place, the visits inside it; a version deleted and the one before it
    reopened, the visits the two cover. Each time the table equals a full rebuild."""
    model = point_in_time_model
    versions = "silver.awap_team_versions"

    def build(*args: str) -> str:
        capsys.readouterr()
        selection = model if not args else f"+{model}"
        run_project(dbt, lakehouse_home, {}, "--select", selection)
        return publication(capsys, model)

    def rows() -> list[tuple]:
        return sorted((r.id, r.team_name) for r in spark.table(POINT_IN_TIME).collect())

    build("first")
    assert rows() == [(1, "red"), (2, "crimson"), (3, "blue"), (4, "blue"), (5, "blue")]

    # Team 2 changes on day 5: its version closed then (one commit of a MERGE's
    # images), the new one opened. Visits 4 and 5 are after it; visit 3 is not.
    spark.sql(
        f"merge into {versions} as t using (select * from values "
        f"(2, 'blue', {day(1)}, {day(5)}, false), (2, 'navy', {day(5)}, null, true) "
        "as s(team_id, team_name, valid_from, valid_to, is_current)) as s "
        "on t.team_id = s.team_id and t.valid_from = s.valid_from "
        "when matched then update set * when not matched then insert *"
    )
    assert build() == "incremental: 2 keys to recompute"
    assert rows() == [(1, "red"), (2, "crimson"), (3, "blue"), (4, "navy"), (5, "navy")]

    # Team 1's first version renamed in place: the visits inside it (visit 1).
    spark.sql(f"update {versions} set team_name = 'scarlet' where team_name = 'red'")
    assert build() == "incremental: 1 keys to recompute"
    assert rows() == [(1, "scarlet"), (2, "crimson"), (3, "blue"), (4, "navy"), (5, "navy")]

    # Team 2's new version deleted and its old one reopened (two commits), and a new
    # visit of team 1 on day 3: visits 4 and 5, and the new one.
    spark.sql(f"delete from {versions} where team_name = 'navy'")
    spark.sql(f"update {versions} set valid_to = null, is_current = true where team_id = 2")
    spark.sql(f"insert into silver.awap_visits values (6, {day(3)}, 1)")
    assert build() == "incremental: 3 keys to recompute"
    incremental = rows()
    assert incremental == [
        (1, "scarlet"),
        (2, "crimson"),
        (3, "blue"),
        (4, "blue"),
        (5, "blue"),
        (6, "scarlet"),
    ]

    # Team 1's current version closed on day 5 with no version after it (a delete in
    # the history): the visits of team 1 from then on have no team (visit 2).
    spark.sql(
        f"update {versions} set valid_to = {day(5)}, is_current = false "
        "where team_id = 1 and is_current"
    )
    assert build() == "incremental: 1 keys to recompute"
    incremental = rows()
    assert incremental == [
        (1, "scarlet"),
        (2, None),
        (3, "blue"),
        (4, "blue"),
        (5, "blue"),
        (6, "scarlet"),
    ]
    capsys.readouterr()
    run_project(dbt, lakehouse_home, {}, "--select", model, "--full-refresh")
    assert rows() == incremental
