"""PostgreSQL through the real Debezium connector, into silver, and a column added in
the source taken in without a full refresh.

Debian's PostgreSQL on loopback (`wal_level=logical`, python_jobs/postgresql.py), the
suite's Kafka broker, and a Kafka Connect worker (python_jobs/tools/kafka_connect.py)
running Debezium's PostgreSQL connector twice, from the configuration block of
docs/operations.md: `public.users` with `schemas.enable=true`, `public.articles` with
`false`. A workload driven through `psql` - a snapshot, inserts, several updates of a
key in one transaction, an update that changes nothing, deletes and re-inserts (one in
the same transaction), `REPLICA IDENTITY FULL` switched on part way, `ALTER TABLE ...
ADD COLUMN` mid-stream, numeric extremes, NULLs, timestamps before 1970 (to year 1),
non-ASCII and escaped text - is ingested from Kafka and built (first, a connector
PostgreSQL refuses stops the worker's start with the reason). Then:

- `silver.users` and `silver.articles` equal the PostgreSQL tables, queried here;
- each history has one version per change that altered a tracked column, valid from
  the change's commit time as PostgreSQL recorded it (`track_commit_timestamp`; an
  audit trigger logs every row change with its transaction), a snapshot row from the
  time Debezium read it;
- the added column reached Bronze untouched and `ops.schema_drift` reports it;
- the change docs/operations.md gives for it, applied with `git apply` to a copy of the
  project, is absorbed by the next build (no full refresh): the column reaches silver,
  changes to it open versions, the drift is marked decoded; rows not changed since
  hold null in it, as documented, until the documented `--full-refresh`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from string import Template

import pytest

from python_jobs import ingest
from python_jobs.postgresql import Cluster, free_port
from python_jobs.simulate.kafka_sink import delete_topics, topic_record_counts
from python_jobs.spark import REPO_ROOT, paths
from python_jobs.tools import kafka_connect
from python_jobs.topics import load_topics
from tests.helpers import copy_tracked_files, dbt_on_project, reset_lakehouse

pytestmark = pytest.mark.slow

OPERATIONS = REPO_ROOT / "docs" / "operations.md"
PASSWORD = "debezium-source"
DATABASE = "blog"
USERS, ARTICLES = "blog.public.users", "blog.public.articles"
SOURCE_SETTINGS = (
    ("wal_level", "logical"),
    ("max_wal_senders", "4"),
    ("max_replication_slots", "4"),
    # The commit time of every transaction, to check valid_from against.
    ("track_commit_timestamp", "on"),
    ("shared_buffers", "32MB"),
)
DELIVERY_TIMEOUT_S = 180.0
TS = "YYYY-MM-DD HH24:MI:SS.US"  # PostgreSQL's to_char; Spark's below
SPARK_TS = "yyyy-MM-dd HH:mm:ss.SSSSSS"


@dataclass(frozen=True)
class Table:
    name: str
    topic: str
    key: str
    # (column, PostgreSQL's text of it, Spark's text of it)
    columns: tuple[tuple[str, str, str], ...]

    def pg_select(self, alias: str = "") -> str:
        prefix = f"{alias}." if alias else ""
        return ", ".join(
            pg.format(c=f"{prefix}{name}") + f" as {name}" for name, pg, _ in self.columns
        )

    def spark_select(self) -> str:
        return ", ".join(spark.format(c=name) for name, _, spark in self.columns)

    def with_column(self, name: str) -> Table:
        return Table(self.name, self.topic, self.key, (*self.columns, (name, "{c}", "{c}")))


def _ts(name: str) -> tuple[str, str, str]:
    return (name, f"to_char({{c}}, '{TS}')", f"date_format({{c}}, '{SPARK_TS}')")


def _text(name: str) -> tuple[str, str, str]:
    return (name, "{c}", "{c}")


USERS_TABLE = Table(
    "users",
    USERS,
    "user_id",
    (
        _text("user_id"),
        _text("email"),
        _text("full_name"),
        _text("country"),
        _text("plan"),
        ("lifetime_value", "{c}::text", "cast({c} as string)"),
        _ts("created_at"),
        _ts("updated_at"),
    ),
)
ARTICLES_TABLE = Table(
    "articles",
    ARTICLES,
    "article_id",
    (
        _text("article_id"),
        _text("author_id"),
        _text("title"),
        _text("category"),
        _text("status"),
        _ts("published_at"),
        _ts("updated_at"),
    ),
)

SCHEMA_SQL = """
create table users (
    user_id bigint primary key,
    email text,
    full_name text,
    country text,
    plan text,
    lifetime_value numeric(12, 2),
    created_at timestamp,
    updated_at timestamp
);
create table articles (
    article_id bigint primary key,
    author_id bigint,
    title text,
    category text,
    status text,
    published_at timestamp,
    updated_at timestamp
);
-- Every row change with its transaction: what the histories must hold.
create table audit_log (
    seq bigserial primary key,
    table_name text not null,
    op text not null,
    row_image jsonb not null,
    tx xid8 not null default pg_current_xact_id()
);
create function audit_change() returns trigger language plpgsql as $$
begin
    insert into audit_log (table_name, op, row_image)
    values (
        tg_table_name,
        case tg_op when 'INSERT' then 'c' when 'UPDATE' then 'u' else 'd' end,
        to_jsonb(case when tg_op = 'DELETE' then old else new end)
    );
    return null;
end $$;
create trigger users_audit after insert or update or delete on users
    for each row execute function audit_change();
create trigger articles_audit after insert or update or delete on articles
    for each row execute function audit_change();
"""

# The rows the connector's snapshot reads (op = r).
SNAPSHOT_SQL = """
insert into users values
    (1, 'ada@example.org', 'Ada Lovelace', 'GB', 'free', 10.50,
     '2024-01-01 08:00:00', '2024-01-01 08:00:00'),
    (2, 'zoe@example.org', 'Zoë Ünïcödé', 'DE', 'pro', 0.00,
     '1969-12-31 23:59:59.999999', '2024-01-02 09:30:00.123456'),
    (3, 'kenji@example.jp', '山田 健二', 'JP', 'team', 9999999999.99,
     '1900-01-01 00:00:00', '2024-01-03 10:00:00'),
    (4, 'null@example.org', null, null, null, null, '0001-01-01 00:00:00', null),
    (5, 'eve@example.org', 'Eve "Quote" \\ Backslash', 'FR', 'free', -9999999999.99,
     '1969-07-20 20:17:40.5', '2024-01-05 11:00:00');
insert into articles values
    (1, 1, 'Notes on the Analytical Engine', 'history', 'published',
     '1843-10-01 00:00:00', '2024-01-01 08:00:00'),
    (2, 2, 'Ελληνικά και 日本語 🎉', 'culture', 'draft', null, '2024-01-02 08:00:00'),
    (3, 3, E'Two\\nlines\\tand a tab', 'tech', 'published',
     '2024-02-29 23:59:59.999999', '2024-03-01 00:00:00'),
    (4, 1, 'Deleted later', 'misc', 'draft', null, '2024-01-04 08:00:00');
"""

# Streamed after the snapshot, with the project as it is. Autocommit, except the
# explicit transactions.
WORKLOAD_A_SQL = """
insert into users values
    (6, 'min@example.org', 'Min Value', 'KR', 'free', -0.01,
     '1969-12-31 23:59:59', '2024-02-01 00:00:00'),
    (7, 'max@example.org', 'Émile Zola', 'FR', 'team', 0.01,
     '1970-01-01 00:00:00.000001', '2024-02-02 00:00:00');
begin;
update users set plan = 'pro', updated_at = '2024-03-01 10:00:00' where user_id = 1;
update users set country = 'FR', updated_at = '2024-03-01 10:00:01' where user_id = 1;
update users set lifetime_value = 123.45 where user_id = 1;
commit;
update users set email = 'ada@lovelace.org' where user_id = 1;
update users set plan = plan where user_id = 2;
delete from users where user_id = 3;
insert into users values (3, 'kenji@example.com', 'Kenji', 'JP', 'free', 1.00,
    '1900-01-01 00:00:00', '2024-03-02 00:00:00');
begin;
delete from users where user_id = 4;
insert into users values (4, 'back@example.org', 'Back Again', 'NZ', 'pro', 42.00,
    '2024-03-03 00:00:00', '2024-03-03 00:00:00');
commit;
update articles set status = 'published', published_at = '2024-03-01 12:00:00'
    where article_id = 2;
update articles set title = 'Notes (2nd ed.)' where article_id = 1;
insert into articles values (5, 6, 'Written by Min', 'tech', 'draft', null, '2024-03-02 00:00:00');
alter table users replica identity full;
alter table articles replica identity full;
update users set full_name = null, country = null where user_id = 5;
delete from articles where article_id = 4;
insert into articles values (4, 2, 'Re-inserted', 'misc', 'published',
    '1950-06-15 06:30:00', '2024-03-04 00:00:00');
begin;
update articles set category = 'science' where article_id = 3;
update articles set category = 'physics' where article_id = 3;
commit;
alter table users add column referral_code text;
update users set referral_code = 'R-5' where user_id = 5;
update users set referral_code = 'R-6', plan = 'team' where user_id = 6;
insert into users values (8, 'new@example.org', 'New Column', 'BR', 'free', 5.00,
    '2024-03-05 00:00:00', '2024-03-05 00:00:00', 'R-8');
"""

# Streamed after the change of docs/operations.md took the column into silver.
WORKLOAD_B_SQL = """
update users set plan = 'pro' where user_id = 5;
update users set referral_code = 'R-6b' where user_id = 6;
insert into users values (9, 'nine@example.org', 'Nine', 'IN', 'free', 9.99,
    '2024-04-01 00:00:00', '2024-04-01 00:00:00', 'R-9');
delete from users where user_id = 7;
"""


# --- the source ----------------------------------------------------------------------


@dataclass
class Source:
    cluster: Cluster
    port: int

    def sql(self, statements: str) -> str:
        return self.cluster.psql(self.port, PASSWORD, statements, DATABASE, what="psql (workload)")

    def rows(self, query: str) -> list[dict]:
        """The rows of `query`, as JSON values (text stays text, null None)."""
        out = self.sql(f"select coalesce(json_agg(q), '[]') from ({query}) as q")
        return json.loads(out)


def current_rows(source: Source, table: Table) -> list[tuple]:
    rows = source.rows(f"select {table.pg_select()} from {table.name}")
    return sorted((tuple(r[name] for name, _, _ in table.columns) for r in rows), key=repr)


def silver_rows(spark, table: Table, relation: str) -> list[tuple]:
    rows = spark.sql(f"select {table.spark_select()} from {relation}").collect()
    return sorted((tuple(r) for r in rows), key=repr)


@dataclass
class Version:
    key: int
    values: dict
    valid_from: int  # epoch ms
    valid_to: int | None = None


@dataclass
class History:
    """What a history holds after a sequence of changes: a version per change to a
    tracked column, valid from its commit time (ms), closed by the next or a delete."""

    table: Table
    versions: list[Version] = field(default_factory=list)
    current: dict[int, int] = field(default_factory=dict)

    def apply(self, op: str, key: int, values: dict, at_ms: int, tracked: list[str]) -> None:
        if op == "d":
            if key in self.current:
                self.versions[self.current.pop(key)].valid_to = at_ms
            return
        if key in self.current:
            open_version = self.versions[self.current[key]]
            if all(open_version.values.get(c) == values.get(c) for c in tracked):
                return  # no tracked column changed
            open_version.valid_to = at_ms
        self.current[key] = len(self.versions)
        self.versions.append(Version(key, {c: values.get(c) for c in tracked}, at_ms))

    def rows(self, columns: list[str]) -> list[tuple]:
        return sorted(
            ((v.key, *(v.values.get(c) for c in columns), v.valid_from, v.valid_to)
             for v in self.versions),
            key=repr,
        )  # fmt: skip


def audit_events(source: Source, table: Table, after_seq: int) -> list[tuple]:
    """Every change to `table` logged after `after_seq`: (seq, op, key, row, commit ms)."""
    rows = source.rows(
        f"select a.seq, a.op, {table.pg_select('r')}, "
        "(extract(epoch from date_trunc('milliseconds', "
        "pg_xact_commit_timestamp(a.tx::text::xid))) * 1000)::bigint as commit_ms "
        f"from audit_log as a, jsonb_populate_record(null::{table.name}, a.row_image) as r "
        f"where a.table_name = '{table.name}' and a.seq > {after_seq} order by a.seq"
    )
    return [(r["seq"], r["op"], int(r[table.key]), r, r["commit_ms"]) for r in rows]


def history_rows(spark, table: Table, relation: str) -> list[tuple]:
    names = [name for name, _, _ in table.columns[1:]]
    selected = ", ".join(expression.format(c=name) for name, _, expression in table.columns[1:])
    rows = spark.sql(
        f"select {table.key}, {selected}, unix_millis(valid_from), unix_millis(valid_to), "
        f"is_current from {relation}"
    ).collect()
    for r in rows:
        assert r["is_current"] == (r[-2] is None), r
    return sorted(((int(r[0]), *r[1 : len(names) + 1], r[-3], r[-2]) for r in rows), key=repr)


# --- delivery ---------------------------------------------------------------------------


def expected_records(source: Source, after_seq: int, snapshot: dict[str, int]) -> dict[str, int]:
    """Records each topic must hold: the snapshot's rows, one per logged change since
    the connector started, and a tombstone after each delete."""
    counts = source.rows(
        "select table_name, count(*) as changes, count(*) filter (where op = 'd') as deletes "
        f"from audit_log where seq > {after_seq} group by table_name"
    )
    expected = dict(snapshot)
    for row in counts:
        topic = f"blog.public.{row['table_name']}"
        expected[topic] += row["changes"] + row["deletes"]
    return expected


def wait_for_delivery(bootstrap: str, expected: dict[str, int]) -> float:
    """Until each topic holds exactly its expected records (polled); seconds waited."""
    started = time.monotonic()
    while True:
        held = topic_record_counts(bootstrap, list(expected))
        if any(held.get(t, 0) > n for t, n in expected.items()):
            raise AssertionError(f"more records than changes: {held} > {expected}")
        if all(held.get(t, 0) == n for t, n in expected.items()):
            return time.monotonic() - started
        if time.monotonic() - started > DELIVERY_TIMEOUT_S:
            raise AssertionError(
                f"Debezium delivered {held} of {expected} within {DELIVERY_TIMEOUT_S:.0f} s\n"
                + kafka_connect.log_tail()
            )
        time.sleep(0.5)


@dataclass
class Pipeline:
    """Debezium's records, then ingestion from Kafka, then a build, each timed."""

    bootstrap: str
    timings: dict[str, float]

    def run(self, phase: str, expected: dict[str, int], build: Callable[[], object]) -> None:
        self.timings[f"delivery {phase}"] = wait_for_delivery(self.bootstrap, expected)
        cdc = [t for t in load_topics() if t.kind == "cdc"]
        options = ingest.IngestOptions(source="kafka", bootstrap_servers=self.bootstrap)
        for step, action in (("ingest", lambda: ingest.run(options, cdc)), ("build", build)):
            clock = time.monotonic()
            action()
            self.timings[f"{step} {phase}"] = time.monotonic() - clock


# --- the documentation's blocks --------------------------------------------------------


def documented_block(marker: str, language: str) -> str:
    """The fenced block that follows the `<!-- tested: ... -->` comment naming `marker`."""
    text = OPERATIONS.read_text()
    match = re.search(
        rf"<!-- tested: [^>]*{re.escape(marker)}[^>]*-->\n```{language}\n(.*?)^```$",
        text,
        re.S | re.M,
    )
    assert match, f"docs/operations.md has no {language} block marked '{marker}'"
    return match.group(1)


def connector_configs(source: Source, password: str = PASSWORD) -> dict[str, dict[str, str]]:
    template = Template(documented_block("starts its connectors", "properties"))
    configs = {}
    for name, table, schemas in (
        ("blog-users", "users", "true"),
        ("blog-articles", "articles", "false"),
    ):
        text = template.substitute(
            NAME=name,
            PGHOST="127.0.0.1",
            PGPORT=source.port,
            PGUSER=source.cluster.superuser,
            PGPASSWORD=password,
            PGDATABASE=DATABASE,
            TABLES=f"public.{table}",
            SLOT=f"lakehouse_{table}",
            SCHEMAS_ENABLE=schemas,
            REPLICATION_FACTOR=1,
            PARTITIONS=2,
        )
        settings = kafka_connect.parse_properties(text)
        configs[settings.pop("name")] = settings
    return configs


# --- the test ----------------------------------------------------------------------------


def _bronze(spark, topic: str):
    table = next(t for t in load_topics() if t.topic == topic)
    return spark.read.format("delta").load(str(table.bronze_path))


BUILD = ("build", "--select", "+users", "+users_history", "source_columns", "schema_drift")
BUILD_A = (*BUILD, "+articles", "+articles_history")


def _max_seq(source: Source) -> int:
    return source.rows("select max(seq) as seq from audit_log")[0]["seq"]


def _snapshot_read_ms(spark, table: Table) -> dict[int, int]:
    """When Debezium read each snapshot row (its `source.ts_ms`)."""
    rows = (
        _bronze(spark, table.topic)
        .where("op = 'r'")
        .selectExpr(
            f"cast(get_json_object(after, '$.{table.key}') as bigint) as key",
            "unix_millis(source_committed_at) as at",
        )
        .collect()
    )
    return {r["key"]: r["at"] for r in rows}


def _replay(history: History, events: list[tuple], tracked: list[str], read_ms=None) -> None:
    for _, op, key, row, commit_ms in events:
        at = read_ms[key] if read_ms is not None else commit_ms
        history.apply(op if read_ms is None else "c", key, row, at, tracked)


def _drift(spark) -> list[tuple]:
    return [
        tuple(r)
        for r in spark.sql(
            "select topic, column_name, first_seen_bronze_version, unix_millis(first_seen_at),"
            " first_seen_batch_id, decoded, drift_resolved_at is not null from ops.schema_drift"
        ).collect()
    ]


def test_postgresql_through_debezium(spark, dbt, clean_lakehouse, kafka_broker, tmp_path):
    home = clean_lakehouse["home"]
    timings: dict[str, float] = {}
    clock = time.monotonic()
    delete_topics(kafka_broker.bootstrap, [USERS, ARTICLES])  # an earlier test's records
    shutil.rmtree(kafka_connect.connect_home(), ignore_errors=True)
    cluster = Cluster(home / "debezium-source", settings=SOURCE_SETTINGS)
    shutil.rmtree(cluster.home, ignore_errors=True)
    cluster.prepare_home()
    cluster.initdb(PASSWORD)
    cluster.start(free_port())
    source = Source(cluster, cluster.recorded_port() or 0)
    through = Pipeline(kafka_broker.bootstrap, timings)
    try:
        cluster.psql(source.port, PASSWORD, f"create database {DATABASE}")
        source.sql(SCHEMA_SQL)
        source.sql(SNAPSHOT_SQL)
        start_seq = _max_seq(source)
        snapshot = {USERS: 5, ARTICLES: 4}
        timings["postgresql"] = time.monotonic() - clock

        # A connector that PostgreSQL refuses stops the start, saying which and why.
        with pytest.raises(kafka_connect.ConnectError) as refused:
            kafka_connect.start_worker(kafka_broker.bootstrap, connector_configs(source, "wrong"))
        assert (
            "the Kafka Connect worker exited during start-up: connector blog-users: Error while "
            "validating connector config: FATAL: password authentication failed for user "
            '"lakehouse"'
        ) in str(refused.value)
        assert kafka_connect.worker_status() is None

        clock = time.monotonic()
        connect_started_ms = int(time.time() * 1000)
        kafka_connect.start_worker(kafka_broker.bootstrap, connector_configs(source))
        timings["connect start"] = time.monotonic() - clock
        timings["snapshot"] = wait_for_delivery(kafka_broker.bootstrap, snapshot)
        snapshot_done_ms = int(time.time() * 1000)

        # --- phase A: the project as it is -------------------------------------------
        source.sql(WORKLOAD_A_SQL)
        seq_a = _max_seq(source)
        expected = expected_records(source, start_seq, snapshot)
        through.run("A", expected, lambda: dbt(*BUILD_A))

        # Every record in Bronze, none set aside: one event per change.
        dead = spark.read.format("delta").load(str(paths()["bronze"] / "dead_letter"))
        assert dead.count() == 0, dead.select("_topic", "_error_detail").collect()
        ops = {
            topic: {
                r["op"]: r["count"] for r in _bronze(spark, topic).groupBy("op").count().collect()
            }
            for topic in (USERS, ARTICLES)
        }
        assert ops == {
            USERS: {"r": 5, "c": 5, "u": 8, "d": 2},
            ARTICLES: {"r": 4, "c": 2, "u": 4, "d": 1},
        }
        # The added column reached Bronze untouched, in every image after the change.
        users_bronze = _bronze(spark, USERS)
        carried = users_bronze.where("after like '%\"referral_code\"%'")
        assert sorted(
            r[0] for r in carried.selectExpr("get_json_object(after, '$.referral_code')").collect()
        ) == ["R-5", "R-6", "R-8"]

        # silver == PostgreSQL, row for row.
        assert silver_rows(spark, USERS_TABLE, "silver.users") == current_rows(source, USERS_TABLE)
        assert silver_rows(spark, ARTICLES_TABLE, "silver.articles") == current_rows(
            source, ARTICLES_TABLE
        )

        # The histories: one version per change to a tracked column. The snapshot's
        # versions start when Debezium read them; the others at their commit time.
        histories = {}
        for table in (USERS_TABLE, ARTICLES_TABLE):
            read_ms = _snapshot_read_ms(spark, table)
            assert all(
                connect_started_ms - 1000 <= at <= snapshot_done_ms for at in read_ms.values()
            )
            tracked = [name for name, _, _ in table.columns[1:]]
            history = History(table)
            initial = [e for e in audit_events(source, table, 0) if e[0] <= start_seq]
            _replay(history, initial, tracked, read_ms)
            _replay(history, audit_events(source, table, start_seq), tracked)
            histories[table.name] = history
            relation = f"silver.{table.name}_history"
            assert history_rows(spark, table, relation) == history.rows(tracked), relation
        assert (
            len(histories["users"].versions) == 5 + 11
            and len(histories["articles"].versions) == 4 + 6
        )

        # The drift: one new column, reported, not decoded.
        first = (
            users_bronze.where("after like '%\"referral_code\"%'")
            .selectExpr(
                "min(struct(_metadata.row_commit_version, unix_millis(_ingested_at), _batch_id))"
            )
            .first()[0]
        )
        assert _drift(spark) == [(USERS, "referral_code", *first, False, False)]
        columns = spark.sql("select topic, column_name, decoded from ops.source_columns").collect()
        assert sorted(tuple(r) for r in columns) == sorted(
            [(ARTICLES, name, True) for name, _, _ in ARTICLES_TABLE.columns]
            + [(USERS, name, True) for name, _, _ in USERS_TABLE.columns]
            + [(USERS, "referral_code", False)]
        )
        users_version_a = spark.sql("describe history silver.users").first()["version"]

        # --- phase B: the documented change takes the column into silver -------------
        project = tmp_path / "project"
        copy_tracked_files(project)
        change = documented_block("applies this change", "diff")
        subprocess.run(["git", "apply", "-"], input=change, text=True, cwd=project, check=True)
        source.sql(WORKLOAD_B_SQL)
        expected = expected_records(source, start_seq, snapshot)
        through.run("B", expected, lambda: dbt_on_project(project, tmp_path / "dbt", *BUILD))

        users = USERS_TABLE.with_column("referral_code")
        in_source = current_rows(source, users)
        assert ("R-8",) == tuple(r[-1] for r in in_source if r[0] == 8)
        # User 8's last change came before the build that took the column in: null in
        # it until its next change (docs/operations.md); every other row as in PostgreSQL.
        assert silver_rows(spark, users, "silver.users") == [
            (*r[:-1], None) if r[0] == 8 else r for r in in_source
        ]
        tracked = [name for name, _, _ in users.columns[1:]]
        _replay(histories["users"], audit_events(source, users, seq_a), tracked)
        # A change to the new column alone opens a version now (user 6: inserted, then
        # plan and the untracked column changed, then the column alone).
        versions = histories["users"].versions
        assert [v.values.get("referral_code") for v in versions if v.key == 6] == [
            None,
            None,
            "R-6b",
        ]
        assert history_rows(spark, users, "silver.users_history") == histories["users"].rows(
            tracked
        )
        assert _drift(spark) == [(USERS, "referral_code", *first, True, True)]
        # Absorbed without a full refresh: the table was altered and merged, not replaced.
        operations = [
            r["operation"]
            for r in spark.sql("describe history silver.users").collect()
            if r["version"] > users_version_a
        ]
        assert operations and not [op for op in operations if "REPLACE" in op or "CREATE" in op]

        # The documented full refresh fills the rows not changed since, from Bronze.
        dbt_on_project(project, tmp_path / "dbt", "run", "--select", "users", "--full-refresh")
        assert silver_rows(spark, users, "silver.users") == current_rows(source, users)
    finally:
        kafka_connect.stop_worker()
        cluster.stop()
        reset_lakehouse(spark)
        print("timings (s):", {k: round(v, 1) for k, v in timings.items()})
    assert kafka_connect.worker_status() is None
