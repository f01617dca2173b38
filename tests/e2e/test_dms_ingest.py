"""AWS DMS files end to end: the blog's users as DMS CSV, its articles as DMS Parquet,
landed, ingested by python_jobs.ingest, built by the same silver models as Debezium's
events (current state; history of the users), with exact rows.

The topics are the contract's two CDC topics with the same Bronze tables, declared in
a registry of the test's own in DMS formats (as an operator's topics.yml would), so the
staging, merge and history models read them unchanged.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from python_jobs import bronze, ingest
from python_jobs.topics import load_topics

REGISTRY = """
topics:
  - topic: blog.public.users
    kind: cdc
    format: dms-csv
    key: [user_id]
    table: blog_public_users
    dms:
      columns:
        - commit_ts
        - user_id bigint
        - email string
        - full_name string
        - country string
        - plan string
        - lifetime_value decimal(12,2)
        - created_at timestamp
        - updated_at timestamp
        - preferred_language string
        - BI_user_id
      commit_timestamp: commit_ts
      before_image_prefix: BI_
  - topic: blog.public.articles
    kind: cdc
    format: dms-parquet
    key: [article_id]
    table: blog_public_articles
    dms:
      columns:
        - commit_ts
        - article_id bigint
        - author_id bigint
        - title string
        - category string
        - status string
        - published_at timestamp
        - updated_at timestamp
        - change_seq
      commit_timestamp: commit_ts
      change_sequence: change_seq
"""

# users, as DMS CSV files beside this test (dms_files/blog.public.users): a full load
# without Op, then two CDC files (named by time: after LOAD... in write order, though
# not in name order). User 3's key becomes 30 (the before-image column BI_user_id
# holds the old key); user 2 is deleted; a full name holds the delimiter (quoted);
# NULLs in strings and decimals; an X is no Op.
USER_FILES = Path(__file__).parent / "dms_files" / "blog.public.users"

ARTICLE_COLUMNS = (
    "commit_ts string, article_id bigint, author_id bigint, title string, category string,"
    " status string, published_at timestamp, updated_at timestamp, change_seq string"
)
LOADED = "2024-10-01 00:00:00.000000"


def _seq(time: str, number: int) -> str:
    """An AR_H_CHANGE_SEQ: YYYYMMDDHHmmSShh and a 19-digit change number."""
    return f"{time}{number:019d}"


# articles: a full load without Op (change_seq empty, as in a full load), then two CDC
# files whose names are NOT in change order (the second file is named earlier): the
# change sequence orders them, so article 12's title is the later one.
ARTICLES = {
    "LOAD00000001.parquet": (
        False,
        [
            (LOADED, 10, 1, "Hello", "news", "draft", None, datetime(2024, 9, 20, 9), ""),
            (
                LOADED,
                11,
                2,
                "Deep dive",
                "tech",
                "published",
                datetime(2024, 9, 10, 9),
                datetime(2024, 9, 10, 9),
                "",
            ),
        ],
    ),
    "20241001-1000000000.parquet": (
        True,
        [
            (
                "U",
                "2024-10-01 10:00:00.000000",
                10,
                1,
                "Hello",
                "news",
                "published",
                datetime(2024, 10, 1, 10),
                datetime(2024, 10, 1, 10),
                _seq("2024100110000000", 1),
            ),
            (
                "I",
                "2024-10-01 10:10:00.000000",
                12,
                1,
                "Draft title",
                "tech",
                "draft",
                None,
                datetime(2024, 10, 1, 10, 10),
                _seq("2024100110100000", 2),
            ),
            (
                "D",
                "2024-10-01 10:20:00.000000",
                11,
                2,
                "Deep dive",
                "tech",
                "published",
                datetime(2024, 9, 10, 9),
                datetime(2024, 9, 10, 9),
                _seq("2024100110200000", 3),
            ),
        ],
    ),
    "20241001-0900000000.parquet": (
        True,
        [
            (
                "U",
                "2024-10-01 10:30:00.000000",
                12,
                1,
                "Final title",
                "tech",
                "draft",
                None,
                datetime(2024, 10, 1, 10, 30),
                _seq("2024100110300000", 4),
            )
        ],
    ),
}


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def land_users(landing: Path) -> None:
    directory = landing / "blog.public.users"
    directory.mkdir(parents=True)
    for file in sorted(USER_FILES.glob("*.csv")):
        shutil.copy(file, directory / f"{file.name}.tmp")
        (directory / f"{file.name}.tmp").rename(directory / file.name)


def land_articles(spark, landing: Path, scratch: Path) -> None:
    """Each file written by Spark into a scratch directory, then renamed in as DMS
    names it (a landing file appears atomically)."""
    directory = landing / "blog.public.articles"
    directory.mkdir(parents=True)
    for name, (with_op, rows) in ARTICLES.items():
        schema = ("Op string, " if with_op else "") + ARTICLE_COLUMNS
        out = scratch / name
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        part.rename(directory / name)
        shutil.rmtree(out)


@pytest.fixture()
def dms_topics(tmp_path: Path):
    registry = tmp_path / "topics.yml"
    registry.write_text(REGISTRY)
    return load_topics(registry)


def test_dms_csv_and_parquet_files_build_the_silver_current_state_and_history(
    spark, dbt, clean_lakehouse, dms_topics, tmp_path
) -> None:
    landing = clean_lakehouse["landing"]
    land_users(landing)
    land_articles(spark, landing, tmp_path / "scratch")

    ingest.run(ingest.IngestOptions(landing=landing), topics=dms_topics)

    dead = spark.read.format("delta").load(bronze.dead_letter_path())
    assert [
        (Path(r["_source_file"]).name, r["_line_number"], r["_error_reason"])
        for r in dead.collect()
    ] == [("20241001-1100000000.csv", 3, "unknown_op")]
    batches = spark.read.format("delta").load(bronze.batches_path())
    assert sorted(
        (r["topic"], r["records_read"], r["bronze_rows"], r["dead_letters"])
        for r in batches.collect()
    ) == [
        ("blog.public.articles", 6, 6, 0),
        # 9 CSV records; the key update is two records (a delete and an insert).
        ("blog.public.users", 10, 9, 1),
    ]
    # Ingesting again finds nothing new: no Bronze row twice.
    counts = {
        t.table: spark.read.format("delta").load(str(t.bronze_path)).count() for t in dms_topics
    }
    ingest.run(ingest.IngestOptions(landing=landing), topics=dms_topics)
    assert (
        {t.table: spark.read.format("delta").load(str(t.bronze_path)).count() for t in dms_topics}
        == counts
        == {"blog_public_users": 9, "blog_public_articles": 6}
    )

    # The models and their data tests (the staging tests check one row per position
    # and key); their dbt unit tests run in every project build. Versions of the CSV
    # table: the history model reads the Parquet table's Bronze rows alike.
    models = ("+users", "+users_history", "+articles")
    dbt("build", "--select", *models, "--exclude", "test_type:unit")

    users = spark.table("silver.users").select(
        "user_id",
        "full_name",
        "country",
        "plan",
        "lifetime_value",
        "updated_at",
        "preferred_language",
        "_source_committed_at",
    )
    assert sorted(tuple(r) for r in users.collect()) == [
        (1, "Ann Lee", "FR", "pro", Decimal("19.99"), _t("2024-10-01 10:05"), "fr",
         _t("2024-10-01 10:05")),
        (4, "Dee Park", "US", "pro", Decimal("-5.25"), _t("2024-10-01 11:05"), None,
         _t("2024-10-01 11:05")),
        (30, "Cy, Jr.", "CA", "free", None, _t("2024-10-01 10:10"), None,
         _t("2024-10-01 10:10")),
    ]  # fmt: skip
    history = spark.table("silver.users_history").select(
        "user_id", "plan", "lifetime_value", "valid_from", "valid_to", "is_current"
    )
    loaded = _t(LOADED)
    assert sorted(tuple(r) for r in history.collect()) == [
        (1, "free", Decimal("0.00"), loaded, _t("2024-10-01 10:05"), False),
        (1, "pro", Decimal("19.99"), _t("2024-10-01 10:05"), None, True),
        (2, "pro", Decimal("120.50"), loaded, _t("2024-10-01 11:00"), False),
        (3, "free", None, loaded, _t("2024-10-01 10:10"), False),
        (4, "free", Decimal("0.00"), _t("2024-10-01 10:00"), _t("2024-10-01 11:05"), False),
        (4, "pro", Decimal("-5.25"), _t("2024-10-01 11:05"), None, True),
        (30, "free", None, _t("2024-10-01 10:10"), None, True),
    ]

    articles = spark.table("silver.articles").select(
        "article_id", "title", "status", "published_at", "updated_at", "_source_lsn"
    )
    assert sorted(tuple(r) for r in articles.collect()) == [
        (10, "Hello", "published", _t("2024-10-01 10:00"), _t("2024-10-01 10:00"),
         2024100110000000),
        (12, "Final title", "draft", None, _t("2024-10-01 10:30"), 2024100110300000),
    ]  # fmt: skip
