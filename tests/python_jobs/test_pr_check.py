"""python_jobs.tools.pr_check on a scratch clone of this repository: real git, real dbt.

Production is built for silver.users and its parents (`dbt run --select +users`,
target local) over two stated users in Bronze. A branch of the clone changes one silver
model, users.sql; pr_check with the original commit as BASE parses that commit for
production, lints the changed file and builds `state:modified+` under the prefix
`pr_test`: exactly users and its two tests run (and the view over the ops source
filter_stats, which is per target), in pr_test_silver, reading the
unmodified staging view from production (--defer), and production's users is not
written. A keyword in upper case in the same change fails the lint with the file and
line as a GitHub annotation, and nothing is built. No change at all: nothing to do.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT, lakehouse_home
from python_jobs.tools import pr_check
from tests.gold.test_fct_visits import ROUND_1, user
from tests.helpers import append_to_bronze, delta_version

USERS = [
    user("c", 100, "2024-10-01T00:00:00", 7, country="DE", plan="free", email="ann@x.org"),
    user("c", 110, "2024-10-01T00:00:00", 8, country="FR", plan="pro", email="bo@x.org"),
]
EXPECTED_USERS = [(7, "DE", "free"), (8, "FR", "pro")]
USERS_SQL = "models/silver/users.sql"
SELECT = "select * from {{ ref('int_blog__user_changes') }}  -- noqa: AM04"


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=pr-check test", "-c", "user.email=pr-check@example.org"]
    return subprocess.run(
        ["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()


def users(spark, schema: str) -> list[tuple]:
    rows = spark.sql(f"select user_id, country, plan from {schema}.users order by user_id")
    return [tuple(row) for row in rows.collect()]


@pytest.fixture(scope="module")
def production(spark, dbt):
    """Production (target local) built for silver.users and its parents."""
    from tests.helpers import reset_lakehouse

    reset_lakehouse(spark)
    append_to_bronze(spark, "blog.public.users", "users-1.json", USERS, ROUND_1, 0)
    dbt("run", "--select", "+users")
    yield
    spark.sql("drop database if exists pr_test_silver cascade")
    spark.sql("drop database if exists pr_test_gold cascade")
    spark.sql("drop database if exists pr_test_ops cascade")


@pytest.fixture()
def clone(tmp_path: Path) -> tuple[Path, str]:
    """A clone of this repository on a branch `change`; returns it and its base commit."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    git(repo, "checkout", "-q", "-b", "change")
    return repo, git(repo, "rev-parse", "HEAD")


def commit_change(repo: Path, old: str, new: str) -> None:
    model = repo / USERS_SQL
    model.write_text(model.read_text().replace(old, new))
    git(repo, "commit", "-q", "-am", "change users")


def check(repo: Path, base: str) -> int:
    return pr_check.main(["--project-dir", str(repo), "--base", base, "--prefix", "pr_test"])


def run_results() -> Path:
    return lakehouse_home() / "dbt" / "pr-check" / "pr_test" / "target" / "run_results.json"


def test_builds_the_changed_model_and_its_children_under_the_prefix(spark, production, clone):
    repo, base = clone
    commit_change(repo, "{#- The columns", "{#- Every column of users is")
    production_version = delta_version(spark, "silver.users")

    assert check(repo, base) == 0

    results = json.loads(run_results().read_text())["results"]
    ran = {
        (r["unique_id"].split(".")[0], r["unique_id"].split(".")[2], r["status"])
        for r in results
        if not r["unique_id"].startswith("operation.")
    }
    # users and its tests; and the view over the ops source filter_stats with its tests
    # and its unit test: the ops sources live in the target's own ops schema
    # (pr_test_ops, not ops), so dbt's state comparison counts them, and the view over
    # them, as modified.
    assert ran == {
        ("model", "users", "success"),
        ("test", "not_null_users_user_id", "pass"),
        ("test", "unique_users_user_id", "pass"),
        ("model", "filter_stats_current", "success"),
        ("unit_test", "filter_stats_current", "pass"),
        ("test", "not_null_filter_stats_current_filter_name", "pass"),
        ("test", "not_null_filter_stats_current_invocation_id", "pass"),
        ("test", "not_null_filter_stats_current_relation", "pass"),
        (
            "test",
            "unique_combination_filter_stats_current_invocation_id__relation__filter_name",
            "pass",
        ),
        (
            "test",
            "unique_combination_filter_stats_current_relation__execution_time__filter_name",
            "pass",
        ),
    }
    assert users(spark, "pr_test_silver") == EXPECTED_USERS
    tables = {r.tableName for r in spark.sql("show tables in pr_test_silver").collect()}
    assert "stg_blog__users" not in tables  # read from production through --defer
    assert users(spark, "silver") == EXPECTED_USERS
    assert delta_version(spark, "silver.users") == production_version


def test_a_lint_violation_fails_with_file_and_line_and_builds_nothing(
    spark, production, clone, capsys
):
    repo, base = clone
    line = (repo / USERS_SQL).read_text().splitlines().index(SELECT) + 1
    commit_change(repo, SELECT, SELECT.replace("select * from", "SELECT * FROM"))
    run_results().unlink(missing_ok=True)
    spark.sql("drop database if exists pr_test_silver cascade")

    assert check(repo, base) == 1

    out = capsys.readouterr().out.splitlines()
    prefix = f"::error title=SQLFluff,file={USERS_SQL},line={line},"
    assert [a for a in out if a.startswith("::error")] == [
        f"{prefix}col=1,endLine={line},endColumn=7::CP01: Keywords must be lower case. "
        "[capitalisation.keywords]",
        f"{prefix}col=10,endLine={line},endColumn=14::CP01: Keywords must be lower case. "
        "[capitalisation.keywords]",
    ]
    assert not run_results().exists()
    assert not spark.catalog.databaseExists("pr_test_silver")


def test_nothing_changed_builds_nothing(spark, production, clone, capsys):
    repo, base = clone
    run_results().unlink(missing_ok=True)

    assert check(repo, base) == 0

    assert capsys.readouterr().out == (
        f"pr-check: nothing changed since {base} ({base[:12]}): nothing to lint or build\n"
    )
    assert not run_results().exists()
