"""gold.fct_visits and gold.agg_article_daily_visits over stated Bronze events.

Change events for two users and an article, and visits, are written to Bronze through
the ingestion job's own transforms; `dbt run --select +agg_article_daily_visits` builds
the histories, the dimensions, silver.visits, the fact and the aggregate.

- fct_visits: user 7 is created, upgraded and deleted; visits fall before their first
  version, inside each version, exactly at the change, exactly at the delete and after
  it. Round 2 delivers a change of user 8 that happened before some of their visits but
  arrives late: the next build re-attributes them, recomputing only user 8's visits and
  the new ones (the dimensions and the fact are incremental), and equals a rebuild.
- agg_article_daily_visits (lookback 3 days): round 2 also delivers a visit on a new
  day, one two days late (its day is re-aggregated; untouched days keep the invocation
  that wrote them) and one a week late (its day is closed: not aggregated, and the
  reconciliation test warns); round 3 is a re-run that changes no row; round 4 a
  `--full-refresh` that adds the closed day's visit.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import append_to_bronze

ROUND_1 = datetime(2024, 10, 6, 10, 0, tzinfo=UTC)
ROUND_2 = datetime(2024, 10, 7, 10, 0, tzinfo=UTC)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def change(table: str, op: str, lsn: int, at: str, key: dict, **row) -> str:
    """A Debezium change event of `blog.public.<table>` committed at `at` (UTC)."""
    image = {**key, **row, "updated_at": ms(at) * 1000} if op != "d" else None
    source = {"ts_ms": ms(at), "lsn": lsn, "txId": lsn, "snapshot": "false", "db": "blog"}
    source.update({"schema": "public", "table": table})
    before = key if op == "d" else None
    return json.dumps({"before": before, "after": image, "source": source, "op": op})


def user(op: str, lsn: int, at: str, user_id: int, **row) -> str:
    return change("users", op, lsn, at, {"user_id": user_id}, **row)


def visit(visit_id: str, at: str, user_id: int | None, article_id: int = 100, **more) -> str:
    record = {"visit_id": visit_id, "event_time": at + "Z", "user_id": user_id}
    record.update({"article_id": article_id, "page": f"/articles/{article_id}"})
    record.update({"device_type": "mobile", "device_version": "17", **more})
    return json.dumps(record)


USERS_1 = [
    user("c", 100, "2024-10-01T00:00:00", 7, country="DE", plan="free", email="ann@x.org"),
    user("c", 110, "2024-10-01T00:00:00", 8, country="FR", plan="free", email="bo@x.org"),
    user("u", 200, "2024-10-03T00:00:00", 7, country="DE", plan="pro", email="ann@x.org"),
    user("d", 300, "2024-10-05T00:00:00", 7),
]
USERS_2 = [  # committed on 2 October, delivered on 7 October
    user("u", 120, "2024-10-02T00:00:00", 8, country="FR", plan="team", email="bo@x.org"),
]
ARTICLES = [
    change(
        "articles",
        "c",
        90,
        "2024-09-30T00:00:00",
        {"article_id": 100},
        category="tech",
        status="draft",
        author_id=8,
    ),
    change(
        "articles",
        "u",
        150,
        "2024-10-02T12:00:00",
        {"article_id": 100},
        category="tech",
        status="published",
        author_id=8,
    ),
]
VISITS = [
    visit("before-first-version", "2024-09-30T12:00:00", 7),
    visit("inside-first-version", "2024-10-02T00:00:00", 7),
    visit("at-the-change", "2024-10-03T00:00:00", 7),
    visit("inside-second-version", "2024-10-04T00:00:00", 7),
    visit("at-the-delete", "2024-10-05T00:00:00", 7),
    visit("after-the-delete", "2024-10-05T12:00:00", 7),
    visit("user-8-before-late-change", "2024-10-01T12:00:00", 8),
    visit("user-8-after-late-change", "2024-10-02T06:00:00", 8),
    visit("anonymous", "2024-10-04T00:00:00", None),
    visit("unknown-article", "2024-10-04T00:00:00", 8, article_id=999),
    visit("anonymous", "2024-10-04T00:00:00", None, device_version="18"),  # a copy
    visit("no-page", "2024-10-04T00:00:00", 8, page=""),  # rejected by silver.visits
]
VISITS_2 = [
    visit("new-day", "2024-10-06T08:00:00", 8),
    visit("two-days-late", "2024-10-04T12:00:00", 8),
    visit("a-week-late", "2024-09-30T18:00:00", 8),  # before the lookback: a closed day
]

# (visit_id, visit_date, user_id, user_plan, user_country, article_status, category)
FACTS_1 = [
    ("after-the-delete", "2024-10-05", 7, None, None, "published", "tech"),
    ("anonymous", "2024-10-04", None, None, None, "published", "tech"),
    ("at-the-change", "2024-10-03", 7, "pro", "DE", "published", "tech"),
    ("at-the-delete", "2024-10-05", 7, None, None, "published", "tech"),
    ("before-first-version", "2024-09-30", 7, None, None, "draft", "tech"),
    ("inside-first-version", "2024-10-02", 7, "free", "DE", "draft", "tech"),
    ("inside-second-version", "2024-10-04", 7, "pro", "DE", "published", "tech"),
    ("unknown-article", "2024-10-04", 8, "free", "FR", None, None),
    ("user-8-after-late-change", "2024-10-02", 8, "free", "FR", "draft", "tech"),
    ("user-8-before-late-change", "2024-10-01", 8, "free", "FR", "draft", "tech"),
]
FACTS_2 = sorted(
    [
        ("unknown-article", "2024-10-04", 8, "team", "FR", None, None)
        if row[0] == "unknown-article"
        else ("user-8-after-late-change", "2024-10-02", 8, "team", "FR", "draft", "tech")
        if row[0] == "user-8-after-late-change"
        else row
        for row in FACTS_1
    ]
    + [
        ("a-week-late", "2024-09-30", 8, None, None, "draft", "tech"),  # before user 8
        ("new-day", "2024-10-06", 8, "team", "FR", "published", "tech"),
        ("two-days-late", "2024-10-04", 8, "team", "FR", "published", "tech"),
    ]
)

# (visit_date, article_id, visits, unique_users, anonymous_visits, round that wrote it)
AGG_1 = [
    ("2024-09-30", 100, 1, 1, 0, 1),
    ("2024-10-01", 100, 1, 1, 0, 1),
    ("2024-10-02", 100, 2, 2, 0, 1),
    ("2024-10-03", 100, 1, 1, 0, 1),
    ("2024-10-04", 100, 2, 1, 1, 1),
    ("2024-10-04", 999, 1, 1, 0, 1),
    ("2024-10-05", 100, 2, 1, 0, 1),
]
AGG_2 = [  # 10-04 re-aggregated (both articles), 10-06 new, 09-30 closed: unchanged
    ("2024-09-30", 100, 1, 1, 0, 1),
    ("2024-10-01", 100, 1, 1, 0, 1),
    ("2024-10-02", 100, 2, 2, 0, 1),
    ("2024-10-03", 100, 1, 1, 0, 1),
    ("2024-10-04", 100, 3, 2, 1, 2),
    ("2024-10-04", 999, 1, 1, 0, 2),
    ("2024-10-05", 100, 2, 1, 0, 1),
    ("2024-10-06", 100, 1, 1, 0, 2),
]
AGG_4 = [  # --full-refresh: every day from the visits, the closed day's late visit too
    (day, article, 2 if day == "2024-09-30" else n, 2 if day == "2024-09-30" else users, anon, 4)
    for day, article, n, users, anon, _ in AGG_2
]


def facts(spark) -> list[tuple]:
    rows = spark.sql(
        "select visit_id, cast(visit_date as string), user_id, user_plan, user_country, "
        "article_status, article_category from gold.fct_visits order by visit_id"
    ).collect()
    return [tuple(row) for row in rows]


def version_keys_match(spark) -> int:
    """Facts whose version keys are not those of the versions valid at the visit."""
    return spark.sql(
        """
        select count(*) from gold.fct_visits as f
        left join gold.dim_users as u on f.user_version_key = u.user_version_key
        left join gold.dim_articles as a on f.article_version_key = a.article_version_key
        where (f.user_version_key is not null and not (
                u.user_id = f.user_id and u.valid_from <= f.event_time
                and (u.valid_to is null or f.event_time < u.valid_to)))
           or (f.article_version_key is not null and not (
                a.article_id = f.article_id and a.valid_from <= f.event_time
                and (a.valid_to is null or f.event_time < a.valid_to)))
           or (f.user_plan is not null) != (f.user_version_key is not null)
           or (f.article_status is not null) != (f.article_version_key is not null)
        """
    ).first()[0]


def every_column(spark, table: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.table(table).collect())


def last_commit(spark, table: str) -> tuple[str, dict[str, int]]:
    """The operation that last wrote the table's rows (its property commits skipped)
    and the rows it inserted, updated and deleted."""
    history = spark.sql(f"describe history {table}").collect()
    row = next(r for r in history if r["operation"] != "SET TBLPROPERTIES")
    metrics = row["operationMetrics"] or {}
    counts = {
        name: int(metrics.get(f"numTargetRows{name.title()}", 0))
        for name in ("inserted", "updated", "deleted")
    }
    return row["operation"], counts


def aggregate(spark, invocations: list[str]) -> list[tuple]:
    """The aggregate's rows, with the round whose invocation last wrote each."""
    rows = spark.sql(
        "select cast(visit_date as string), article_id, visits, unique_users, "
        "anonymous_visits, _invocation_id from gold.agg_article_daily_visits order by 1, 2"
    ).collect()
    return [(*row[:5], invocations.index(row[5]) + 1) for row in rows]


def reconciliation(dbt) -> tuple[str, int]:
    result = dbt("test", "--select", "agg_article_daily_visits_reconciles")
    (node,) = [
        r for r in result.result.results if r.node.name == "agg_article_daily_visits_reconciles"
    ]
    return (str(node.status), node.failures)


@pytest.fixture(scope="module")
def rounds(spark, dbt):
    from dbt_common.invocation import get_invocation_id

    from tests.helpers import reset_lakehouse

    invocations: list[str] = []

    def build(execution_time: str, *args: str, select: str = "+agg_article_daily_visits"):
        variables = json.dumps({"execution_time": execution_time})
        dbt("run", "--select", select, "--vars", variables, *args)
        invocations.append(get_invocation_id())

    reset_lakehouse(spark)
    seen = {}
    append_to_bronze(spark, "blog.public.users", "users-1.json", USERS_1, ROUND_1, 0)
    append_to_bronze(spark, "blog.public.articles", "articles-1.json", ARTICLES, ROUND_1, 0)
    append_to_bronze(spark, "blog.visits", "visits-1.json", VISITS, ROUND_1, 0)
    build("2024-10-06T11:00:00")
    seen[1] = (facts(spark), version_keys_match(spark), aggregate(spark, invocations))
    append_to_bronze(spark, "blog.public.users", "users-2.json", USERS_2, ROUND_2, 1)
    append_to_bronze(spark, "blog.visits", "visits-2.json", VISITS_2, ROUND_2, 1)
    log = Path(os.environ["DBT_LOG_PATH"]) / "dbt.log"
    logged = log.stat().st_size
    build("2024-10-07T11:00:00")
    seen["publications"] = publications(log.read_text()[logged:])
    seen[2] = (facts(spark), version_keys_match(spark), aggregate(spark, invocations))
    seen["incremental"] = {t: last_commit(spark, f"gold.{t}") for t in INCREMENTAL}
    seen["fct_incremental"] = every_column(spark, "gold.fct_visits")
    seen["reconciliation_2"] = reconciliation(dbt)
    build("2024-10-07T11:00:00", select="agg_article_daily_visits")  # a re-run
    seen[3] = aggregate(spark, invocations)
    build("2024-10-08T11:00:00", "--full-refresh", select="agg_article_daily_visits")
    seen[4] = aggregate(spark, invocations)
    seen["reconciliation_4"] = reconciliation(dbt)
    build("2024-10-08T11:00:00", "--full-refresh", select="dim_users dim_articles fct_visits")
    seen["fct_rebuilt"] = every_column(spark, "gold.fct_visits")
    return seen


def test_each_visit_sees_the_versions_valid_at_its_time(rounds) -> None:
    assert rounds[1][:2] == (FACTS_1, 0)


def test_a_change_that_arrives_late_re_attributes_the_visits_it_covers(rounds) -> None:
    assert rounds[2][:2] == (FACTS_2, 0)


# Round 2, per incremental gold model: (operation, rows inserted/updated/deleted).
INCREMENTAL = {
    # user 8's late change splits their one version: closed (updated), the new one inserted
    "dim_users": ("MERGE", {"inserted": 1, "updated": 1, "deleted": 0}),
    # no article changed: nothing recomputed, the table not written
    "dim_articles": ("WRITE", {"inserted": 0, "updated": 0, "deleted": 0}),
    # the 3 new visits; user 8's 2 valid visits at or after the late change's time
    # recomputed and re-attributed (the one before it is not recomputed)
    "fct_visits": ("MERGE", {"inserted": 3, "updated": 2, "deleted": 0}),
}


def test_round_2_recomputes_only_what_changed(rounds) -> None:
    assert rounds["incremental"] == INCREMENTAL
    assert rounds["publications"] == {
        # user 8's version, closed, and the one the late change opened
        "dim_users": "incremental: 2 keys to recompute",
        "dim_articles": "incremental: 0 keys to recompute",
        # the 3 new visits and user 8's 2 earlier ones from the late change's time on
        "fct_visits": "incremental: 5 keys to recompute",
    }


def publications(log: str) -> dict[str, str]:
    """How each gold model published, from the audited_table lines of a dbt log."""
    found = re.findall(r"audited_table \(model gold\.(\w+)\): (.*)", log)
    return {model: how.strip() for model, how in found}


def test_the_incremental_fact_equals_a_full_rebuild(rounds) -> None:
    assert rounds["fct_rebuilt"] == rounds["fct_incremental"]
    assert len(rounds["fct_rebuilt"]) == len(FACTS_2)


def test_the_first_build_aggregates_every_day(rounds) -> None:
    assert rounds[1][2] == AGG_1


def test_late_visits_re_aggregate_only_their_days_within_the_lookback(rounds) -> None:
    assert rounds[2][2] == AGG_2
    # The closed day's late visit is reported, not lost: 09-30 has 2 visits, 1 counted.
    assert rounds["reconciliation_2"] == ("warn", 1)


def test_a_re_run_changes_no_row(rounds) -> None:
    assert rounds[3] == AGG_2


def test_a_full_refresh_adds_the_closed_days_late_visits(rounds) -> None:
    assert rounds[4] == AGG_4
    assert rounds["reconciliation_4"] == ("pass", 0)


def test_the_model_tests_pass_on_the_result(dbt, rounds) -> None:
    # unique/not_null/accepted_values, relationships to the dimensions' versions, keys
    dbt("test", "--select", "fct_visits", "agg_article_daily_visits")
