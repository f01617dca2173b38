"""Shared pytest fixtures: one Delta-enabled SparkSession and in-process dbt.

The whole suite runs against one lakehouse home in a temporary directory (set before
the session starts, since the catalog location is fixed at start), with one
SparkSession created by `python_jobs.spark.get_spark` - the same settings that jobs and
dbt use. dbt runs in-process (`dbtRunner`) on that session, so no test pays a JVM start.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tiers import FAST_TEST_FILES, SLOWEST_FILES

pytest_plugins = ["tests.kafka_fixture"]

# Fixed before anything imports python_jobs.spark's consumers: the suite's own home.
_HOME = Path(tempfile.mkdtemp(prefix="lakehouse-test-"))
os.environ["LAKEHOUSE_HOME"] = str(_HOME)
# The suite's session uses the embedded catalog of its own home (a shared catalog that
# `make` picked up from a lakehouse's catalog/url is not the suite's to write to).
for _var in (
    "DBT_TARGET_PATH",
    "DBT_LOG_PATH",
    "DBT_TARGET",
    "LAKEHOUSE_CATALOG",
    "LAKEHOUSE_SCHEMA_PREFIX",
    "SPARK_MASTER",
):
    os.environ.pop(_var, None)
# Test data is small, and two workers (make test) each run a driver beside the jobs
# and servers their tests start: a smaller heap than the 6g default leaves room.
os.environ.setdefault("SPARK_DRIVER_MEMORY", "3g")
# Test tables hold tens of rows: one shuffle partition and no adaptive re-planning
# between stages (each of which is a job of its own under adaptive execution). A query
# of the history macro takes 0.7 s instead of 2.4 s; the results are the same.
# Expressions are interpreted, not compiled to Java (factoryMode NO_CODEGEN, a setting
# Spark's own test suites use): on tens of rows, compiling a query's generated classes
# costs more than running it (a fifth of the CPU in a profile of small Delta
# statements); the maintenance, commit-window and backfill tests took 9% less time.
# So the catalog API that decodes rows with generated code (spark.catalog.listTables)
# is not used; SQL (`show tables`) is.
# Processes the tests start (jobs, dbt, the demo) inherit it; a test that checks the
# production settings clears it.
os.environ.setdefault(
    "LAKEHOUSE_SPARK_CONF",
    "spark.sql.shuffle.partitions=1 spark.sql.adaptive.enabled=false "
    "spark.sql.codegen.factoryMode=NO_CODEGEN",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the fast tier's tests `fast` (tests/tiers.py lists its files), and collect
    the slowest files first, slowest first (the others keep their order)."""
    root = Path(str(config.rootpath))
    rank = {path: number for number, path in enumerate(SLOWEST_FILES)}
    for item in items:
        if item.path.relative_to(root).as_posix() in FAST_TEST_FILES:
            item.add_marker(pytest.mark.fast)
    items.sort(key=lambda item: rank.get(item.path.relative_to(root).as_posix(), len(rank)))


@pytest.fixture(scope="session")
def lakehouse_home() -> Iterator[Path]:
    yield _HOME


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("KEEP_LAKEHOUSE") != "1":
        shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def spark(lakehouse_home: Path):
    from python_jobs.spark import get_spark

    return get_spark()


class DbtError(AssertionError):
    pass


@pytest.fixture(scope="session")
def dbt(spark):
    """Run a dbt command in-process on the shared session; raise if it fails.

    `dbt("build", "--select", "x")` returns dbt's result; `dbt(..., expect_fail=True)`
    returns it without raising when it failed (and raises if it succeeded).
    """
    from python_jobs.run_dbt import invoke

    def run(*args: str, expect_fail: bool = False):
        result = invoke(list(args))
        if result.success == expect_fail:
            messages = []
            for node in getattr(result.result, "results", None) or []:
                if node.status not in ("success", "pass"):
                    messages.append(f"{node.node.unique_id}: {node.status}: {node.message}")
            raise DbtError(
                f"dbt {' '.join(args)} {'succeeded' if result.success else 'failed'}: "
                f"{result.exception or ''} {messages}"
            )
        return result

    return run


@pytest.fixture()
def clean_lakehouse(spark):
    """An empty lakehouse: no tables in the layer schemas, no Bronze, no checkpoints."""
    from python_jobs.spark import paths
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    yield paths()


@pytest.fixture()
def simulate() -> Callable[..., Path]:
    """Run the workload simulator (pure Python) into `landing`; returns the truth dir."""
    from tests.helpers import run_simulator

    def run(landing: Path, truth: Path, *args: str) -> Path:
        proc = run_simulator(landing, truth, *args)
        assert proc.returncode == 0, proc.stderr
        return truth

    return run


def _patch_statements(monkeypatch, pattern: str, change) -> Callable[[], None]:
    """Test-only: every SQL statement dbt sends to Spark that matches `pattern` (a regex,
    searched anywhere: dbt puts a query comment first) goes through `change(sql)`, which
    returns the statement to run or raises. Returns the function that restores dbt's
    own execution (the end of the test does too)."""
    from dbt.adapters.spark.session import SessionConnectionWrapper

    original = SessionConnectionWrapper.execute
    compiled = re.compile(pattern, re.IGNORECASE | re.DOTALL)

    def execute(self, sql: str, bindings=None):
        return original(self, change(sql) if compiled.search(sql) else sql, bindings)

    monkeypatch.setattr(SessionConnectionWrapper, "execute", execute)
    return lambda: monkeypatch.setattr(SessionConnectionWrapper, "execute", original)


@pytest.fixture()
def fail_statement(monkeypatch) -> Callable[[str, str], Callable[[], None]]:
    """Test-only fault injection into in-process dbt (nothing in the project's macros):
    `disarm = fail_statement(pattern, message)` makes the first SQL statement dbt sends
    to Spark that matches `pattern` fail, and every matching one after it, with
    "injected fault <message>", before it runs; so a run dies between two writes.
    `disarm()` (or the end of the test) restores dbt's own execution."""

    def arm(pattern: str, message: str) -> Callable[[], None]:
        def fail(sql: str) -> str:
            raise RuntimeError(f"injected fault {message}")

        return _patch_statements(monkeypatch, pattern, fail)

    return arm


@pytest.fixture()
def before_statement(monkeypatch) -> Callable[[str, Callable[[], None]], Callable[[], None]]:
    """Test-only: `disarm = before_statement(pattern, action)` calls `action()` once, just
    before the first SQL statement dbt sends that matches `pattern` runs (e.g. another
    process writing a table between two of a run's statements). `disarm()` (or the end of
    the test) restores dbt's own execution."""

    def arm(pattern: str, action: Callable[[], None]) -> Callable[[], None]:
        pending = [action]

        def run_first(sql: str) -> str:
            while pending:
                pending.pop()()
            return sql

        return _patch_statements(monkeypatch, pattern, run_first)

    return arm


@pytest.fixture()
def rewrite_statement(monkeypatch) -> Callable[[str, str, str], Callable[[], None]]:
    """Test-only: `undo = rewrite_statement(pattern, old, new)` replaces `old` with `new`
    in every SQL statement dbt sends that matches `pattern` (e.g. a writer whose clock
    runs behind: `current_timestamp()` in the run log's inserts). `undo()` (or the end
    of the test) restores dbt's own statements."""

    def arm(pattern: str, old: str, new: str) -> Callable[[], None]:
        def rewrite(sql: str) -> str:
            assert old in sql, f"{old!r} is not in the statement {sql[:300]!r}"
            return sql.replace(old, new)

        return _patch_statements(monkeypatch, pattern, rewrite)

    return arm
