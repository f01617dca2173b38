"""point_in_time_join (the Static Joiner) on fixture relations.

A user with two versions and a delete, an article with one version; facts before the
first version, at and inside each version, at the boundary, after the delete, and with
a null key. Each fact must see the version valid at its time, or none. Times are whole
seconds since the epoch.
"""

from __future__ import annotations

import pytest

from tests.macros.test_macro_arguments import compile_sql

USERS = [  # (user_id, plan, valid_from, valid_to)
    (1, "free", 10, 20),
    (1, "pro", 20, 30),  # closed by a delete at 30
    (2, "free", 5, None),
]
ARTICLES = [(100, "draft", 0, None)]  # (article_id, status, valid_from, valid_to)
FACTS = [  # (visit_id, user_id, article_id, event_time)
    ("before-first-version", 1, 100, 9),
    ("at-first-version", 1, 100, 10),
    ("inside-first-version", 1, 100, 15),
    ("at-the-change", 1, 100, 20),
    ("inside-second-version", 1, 100, 25),
    ("at-the-delete", 1, 100, 30),
    ("after-the-delete", 1, 100, 40),
    ("other-user-current", 2, 100, 40),
    ("anonymous", None, 100, 40),
]


@pytest.fixture(scope="module")
def relations(spark):
    spark.sql("create schema if not exists silver")
    tables = {
        "silver.pit_users": (USERS, "user_id long, plan string, vf long, vt long"),
        "silver.pit_articles": (ARTICLES, "article_id long, status string, vf long, vt long"),
    }
    for name, (rows, schema) in tables.items():
        spark.createDataFrame(rows, schema).selectExpr(
            "*", "timestamp_seconds(vf) as valid_from", "timestamp_seconds(vt) as valid_to"
        ).drop("vf", "vt").write.format("delta").mode("overwrite").saveAsTable(name)
    spark.createDataFrame(
        FACTS, "visit_id string, user_id long, article_id long, t long"
    ).selectExpr("*", "timestamp_seconds(t) as event_time").drop("t").createOrReplaceTempView(
        "pit_facts"
    )
    yield
    for name in tables:
        spark.sql(f"drop table if exists {name}")


def test_each_fact_sees_the_version_valid_at_its_time(spark, relations) -> None:
    joins = compile_sql(
        "{{ point_in_time_join('silver.pit_users', 'u', 'f.event_time', "
        "{'f.user_id': 'user_id'}) }}"
        "\n{{ point_in_time_join('silver.pit_articles', 'a', 'f.event_time', "
        "{'f.article_id': 'article_id'}) }}"
    )
    rows = spark.sql(f"select f.visit_id, u.plan, a.status from pit_facts as f {joins}").collect()
    assert sorted(tuple(r) for r in rows) == sorted(
        [
            ("before-first-version", None, "draft"),
            ("at-first-version", "free", "draft"),
            ("inside-first-version", "free", "draft"),
            ("at-the-change", "pro", "draft"),
            ("inside-second-version", "pro", "draft"),
            ("at-the-delete", None, "draft"),
            ("after-the-delete", None, "draft"),
            ("other-user-current", "free", "draft"),
            ("anonymous", None, "draft"),
        ]
    )
