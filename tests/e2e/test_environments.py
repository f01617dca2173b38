"""Environments: dev and ci builds write prefixed schemas beside production.

Production (`local`) runs users and visits (`dbt run`: the models, not their tests);
then two `ci` runs with different prefixes (LAKEHOUSE_SCHEMA_PREFIX) build the same
models from the same Bronze, the second after one more change arrived. Each writes its
own `<prefix>_silver` tables and its own `<prefix>_ops` run log and filter statistics,
and leaves production and the other prefix exactly as they were (same rows, same Delta
versions). A bad prefix fails at compile time and creates nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.gold.test_fct_visits import user, visit
from tests.helpers import append_to_bronze, delta_version

AT = datetime(2024, 10, 6, 10, 0, tzinfo=UTC)
LATER = datetime(2024, 10, 7, 10, 0, tzinfo=UTC)
USERS = [
    user("c", 100, "2024-10-01T00:00:00", 7, country="DE", plan="free", email="ann@x.org"),
    user("c", 110, "2024-10-01T00:00:00", 8, country="FR", plan="free", email="bo@x.org"),
]
LATE_USER = user("c", 120, "2024-10-02T00:00:00", 9, country="PT", plan="pro", email="cy@x.org")
VISITS = [visit("v1", "2024-10-05T09:00:00", 7), visit("v2", "2024-10-05T09:30:00", None)]
SELECT = ["--select", "+users", "+visits", "--no-partial-parse"]


def _vars(at: datetime) -> list[str]:
    return ["--vars", json.dumps({"execution_time": at.strftime("%Y-%m-%dT%H:%M:%S")})]


def _state(spark, schema: str) -> dict[str, object]:
    """What a build left in one environment: rows and Delta versions of its tables."""
    users = sorted(r.user_id for r in spark.table(f"{schema}_silver.users").collect())
    visits = sorted(r.visit_id for r in spark.table(f"{schema}_silver.visits").collect())
    return {
        "users": users,
        "visits": visits,
        "users_version": delta_version(spark, f"{schema}_silver.users"),
        "runs": sorted(
            (r.model, r.status) for r in spark.table(f"{schema}_ops.window_runs").collect()
        ),
        "filter_runs": spark.table(f"{schema}_ops.filter_stats")
        .select("invocation_id")
        .distinct()
        .count(),
    }


def _production(spark) -> dict[str, object]:
    return {
        "users": sorted(r.user_id for r in spark.table("silver.users").collect()),
        "visits": sorted(r.visit_id for r in spark.table("silver.visits").collect()),
        "users_version": delta_version(spark, "silver.users"),
        "runs": spark.table("ops.window_runs").count(),
        "filter_runs": spark.table("ops.filter_stats").count(),
    }


@pytest.fixture()
def prefixed_schemas(spark):
    """Drops the test's prefixed schemas afterwards (reset_lakehouse knows the layers)."""
    yield
    for row in spark.sql("show schemas").collect():
        if row[0].startswith(("ci_a_", "ci_b_")):
            spark.sql(f"drop schema {row[0]} cascade")


@pytest.mark.slow
def test_prefixed_builds_leave_each_other_and_production_untouched(
    spark, dbt, clean_lakehouse, prefixed_schemas, monkeypatch
) -> None:
    append_to_bronze(spark, "blog.public.users", "users-1.json", USERS, AT, 0)
    append_to_bronze(spark, "blog.visits", "visits-1.json", VISITS, AT, 0)
    dbt("run", *SELECT, *_vars(AT))
    production = _production(spark)
    assert production["users"] == [7, 8] and production["visits"] == ["v1", "v2"]

    monkeypatch.setenv("LAKEHOUSE_SCHEMA_PREFIX", "ci_a")
    dbt("run", "--target", "ci", *SELECT, *_vars(AT))
    ci_a = _state(spark, "ci_a")
    assert ci_a["users"] == [7, 8] and ci_a["visits"] == ["v1", "v2"]
    # Its own run log: the prefixed relations' runs, one start and one success each.
    assert ci_a["runs"] == [
        ("ci_a_silver.users", "started"),
        ("ci_a_silver.users", "succeeded"),
        ("ci_a_silver.visits", "started"),
        ("ci_a_silver.visits", "succeeded"),
    ]
    assert ci_a["filter_runs"] == 1
    assert _production(spark) == production

    append_to_bronze(spark, "blog.public.users", "users-2.json", [LATE_USER], LATER, 1)
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_PREFIX", "ci_b")
    dbt("run", "--target", "ci", *SELECT, *_vars(LATER))
    ci_b = _state(spark, "ci_b")
    assert ci_b["users"] == [7, 8, 9] and ci_b["visits"] == ["v1", "v2"]
    assert _state(spark, "ci_a") == ci_a
    assert _production(spark) == production

    schemas = {r[0] for r in spark.sql("show schemas").collect()}
    for prefix in ("ci_a_", "ci_b_", ""):
        assert {f"{prefix}silver", f"{prefix}gold", f"{prefix}ops"} <= schemas, prefix

    # A prefix that is not a schema name fails at compile time, naming the setting.
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_PREFIX", "pr-12!")
    failed = dbt("run", "--target", "ci", *SELECT, *_vars(LATER), expect_fail=True)
    assert "LAKEHOUSE_SCHEMA_PREFIX" in str(failed.exception)
    assert not any(s.startswith("pr") for s in {r[0] for r in spark.sql("show schemas").collect()})
