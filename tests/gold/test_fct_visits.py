"""gold.fct_visits: each visit joined to the user and article versions valid at its time.

Change events for two users and an article, and visits, are written to Bronze through
the ingestion job's own transforms; `dbt run --select +fct_visits` builds the histories,
the dimensions, silver.visits and the fact. User 7 is created, upgraded and deleted;
visits fall before their first version, inside each version, exactly at the change,
exactly at the delete and after it. Round 2 delivers a change of user 8 that happened
before some of their visits but arrives late: the next build re-attributes them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

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
FACTS_2 = [
    ("unknown-article", "2024-10-04", 8, "team", "FR", None, None)
    if row[0] == "unknown-article"
    else ("user-8-after-late-change", "2024-10-02", 8, "team", "FR", "draft", "tech")
    if row[0] == "user-8-after-late-change"
    else row
    for row in FACTS_1
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


@pytest.fixture(scope="module")
def rounds(spark, dbt):
    from tests.helpers import reset_lakehouse

    def build(execution_time: str) -> None:
        dbt(
            "run",
            "--select",
            "+fct_visits",
            "--vars",
            json.dumps({"execution_time": execution_time}),
        )

    reset_lakehouse(spark)
    seen = {}
    append_to_bronze(spark, "blog.public.users", "users-1.json", USERS_1, ROUND_1, 0)
    append_to_bronze(spark, "blog.public.articles", "articles-1.json", ARTICLES, ROUND_1, 0)
    append_to_bronze(spark, "blog.visits", "visits-1.json", VISITS, ROUND_1, 0)
    build("2024-10-06T11:00:00")
    seen[1] = (facts(spark), version_keys_match(spark))
    append_to_bronze(spark, "blog.public.users", "users-2.json", USERS_2, ROUND_2, 1)
    build("2024-10-07T11:00:00")
    seen[2] = (facts(spark), version_keys_match(spark))
    return seen


def test_each_visit_sees_the_versions_valid_at_its_time(rounds) -> None:
    assert rounds[1] == (FACTS_1, 0)


def test_a_change_that_arrives_late_re_attributes_the_visits_it_covers(rounds) -> None:
    assert rounds[2] == (FACTS_2, 0)


def test_the_model_tests_pass_on_the_result(dbt, rounds) -> None:
    # unique/not_null/accepted_values and relationships to the dimensions' versions
    dbt("test", "--select", "fct_visits")
