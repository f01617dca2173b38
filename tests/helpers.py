"""Helpers shared by test modules: reset the lakehouse, read landing files and Bronze."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from python_jobs.spark import REPO_ROOT, paths

LAYER_SCHEMAS = ("bronze", "silver", "gold", "ops")

# What jobs run in the suite's own process set from the suite's home (run_dbt's dbt
# paths and salt) or a developer may have set (target, catalog, master): a job started
# for another home derives its own (docs generate once wrote its catalog.json into the
# suite's dbt target directory instead of the home under test).
SUITE_PROCESS_VARIABLES = (
    "LAKEHOUSE_HOME",
    "DBT_TARGET_PATH",
    "DBT_LOG_PATH",
    "LAKEHOUSE_PII_SALT",
    "DBT_TARGET",
    "LAKEHOUSE_CATALOG",
    "SPARK_MASTER",
)


# For a test whose processes each run short commands on tiny tables (the Airflow DAG's
# tasks, the crash-recovery test's ingestion runs, the shared-catalog test's five
# drivers, the cluster test's daemons, drivers and executors): their JVMs compile with
# C1 only. C2 spent about a third of such a command's CPU compiling code it then barely
# ran: one DAG run took 125 s instead of 167 s. A long process keeps C2 (the demo's
# first build took 260 s with C1 only, 176 s with C2; docs/testing.md). C1 alone
# reserves 48 MB of code cache, which a driver that lives a few minutes can fill ("Out
# of space in CodeCache"): the default 240 MB is kept.
SHORT_COMMAND_JVM = {
    "LAKEHOUSE_JVM_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
}


def job_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a job started in a subprocess for the lakehouse at `home`."""
    env = {k: v for k, v in os.environ.items() if k not in SUITE_PROCESS_VARIABLES}
    return {**env, "LAKEHOUSE_HOME": str(home), **extra}


def reset_lakehouse(spark) -> None:
    """Drop every table of the layer schemas and delete Bronze, checkpoints, landing."""
    for schema in LAYER_SCHEMAS:
        if not spark.catalog.databaseExists(schema):
            continue
        # SQL, not spark.catalog.listTables: the catalog API decodes its rows with
        # generated code, which the suite's sessions do not compile (tests/conftest.py).
        views = {r.viewName for r in spark.sql(f"show views in {schema}").collect()}
        for row in spark.sql(f"show tables in {schema}").collect():
            if row.isTemporary:
                continue
            kind = "view" if row.tableName in views else "table"
            spark.sql(f"drop {kind} if exists {schema}.{row.tableName}")
    p = paths()
    for name in ("bronze", "ops", "checkpoints", "landing"):
        shutil.rmtree(p[name], ignore_errors=True)
        p[name].mkdir(parents=True)
    p["devices_loads"].mkdir(parents=True)
    shutil.rmtree(p["home"] / "truth", ignore_errors=True)
    shutil.rmtree(p["home"] / "outbox", ignore_errors=True)
    # Delta caches table logs by path; the paths above were just deleted.
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def delta_version(spark, table: str) -> int:
    """The Delta table's current version (its newest commit)."""
    return spark.sql(f"describe history {table} limit 1").first()["version"]


def landing_records(landing: Path, topic: str) -> list[tuple[str, int, str]]:
    """Every non-tombstone line of a topic's landing files: (file name, line no, raw)."""
    records = []
    for file in sorted((landing / topic).glob("*.json")):
        text = file.read_text(encoding="utf-8")
        if text.endswith("\n"):
            text = text[:-1]
        if not text:
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            # Whitespace as Java's \\s (what Bronze's tombstone test trims).
            if line.strip(" \t\n\r\f\v") not in ("", "null"):
                records.append((file.name, number, line))
    return records


def _landing_positions(frame) -> list[tuple[str, int, str]]:
    rows = frame.select("_source_file", "_line_number", "_raw").collect()
    # `_source_file` is the file's URI (a space is `%20`).
    return sorted(
        (Path(unquote(urlsplit(r["_source_file"]).path)).name, r["_line_number"], r["_raw"])
        for r in rows
    )


def bronze_records(spark, table: str) -> list[tuple[str, int, str]]:
    """A Bronze table's records from the landing zone: (file name, line no, raw)."""
    return _landing_positions(spark.read.format("delta").load(str(paths()["bronze"] / table)))


def dead_letter_records(spark, topic: str) -> list[tuple[str, int, str]]:
    """A topic's dead letters from the landing zone: (file name, line no, raw)."""
    dead = spark.read.format("delta").load(str(paths()["bronze"] / "dead_letter"))
    return _landing_positions(dead.where(f"_topic = '{topic}'"))


def ingested_records(spark, topic: str, table: str) -> list[tuple[str, int, str]]:
    """Every record of a topic that ingestion kept: its Bronze rows and dead letters."""
    return sorted(bronze_records(spark, table) + dead_letter_records(spark, topic))


def append_with_commit_versions(frame, table: str, merge_schema: bool = False) -> None:
    """Appends `frame` to the Delta table `table` in one commit, laid out as Bronze
    (`bronze.append_as_bronze`), so that models over it read each row's commit version
    (`_metadata.row_commit_version`) like staging models read Bronze's."""
    from python_jobs import bronze

    bronze.append_as_bronze(frame, table, merge_schema)


def append_to_bronze(spark, topic_name: str, file_name: str, lines, ingested_at, batch: int):
    """Appends `lines` to a topic's Bronze table as the ingestion job would (the same
    classification and decoration, so bad lines become rows it would dead-letter), as
    if read from the landing file `file_name` in micro-batch `batch` at `ingested_at`."""
    from python_jobs import bronze
    from python_jobs.topics import load_topics

    topic = next(t for t in load_topics() if t.topic == topic_name)
    bronze.ensure_table(spark, topic)
    rows = [(line, topic.topic, None, None, file_name, n) for n, line in enumerate(lines, 1)]
    records = bronze.classify(
        spark.createDataFrame(rows, bronze.LINE_SCHEMA), topic, bronze.DEFAULT_MAX_RECORD_BYTES
    )
    frame = bronze.bronze_rows(bronze.decorate(records, batch, ingested_at))
    frame.write.format("delta").mode("append").save(str(topic.bronze_path))


def run_simulator(
    landing: Path, truth: Path, *args: str, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m python_jobs.simulate` into `landing` and `truth` (quiet), optionally
    in another LAKEHOUSE_HOME; returns the finished process, whatever its exit code."""
    env = {**os.environ, "LAKEHOUSE_HOME": str(home)} if home else os.environ.copy()
    command = ["--landing-dir", str(landing), "--truth-dir", str(truth), "--quiet", *args]
    return subprocess.run(
        [sys.executable, "-m", "python_jobs.simulate", *command],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_tracked_files(destination: Path) -> None:
    """The repository's tracked files as they are in the working tree (a copy of the
    project that a test may change)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def dbt_on_project(project: Path, work: Path, *args: str):
    """dbt in-process on the suite's session, on the project at `project` (a copy),
    its target and logs under `work`; fails naming every node that did not pass."""
    from python_jobs.run_dbt import invoke

    result = invoke(
        [
            *args,
            "--project-dir",
            str(project),
            "--target-path",
            str(work / "target"),
            "--log-path",
            str(work / "logs"),
        ]
    )
    failed = [
        f"{n.node.unique_id}: {n.status}: {n.message}"
        for n in getattr(result.result, "results", None) or []
        if n.status not in ("success", "pass", "warn")
    ]
    assert result.success, f"dbt {' '.join(args)}: {result.exception or ''} {failed}"
    return result
