"""The simulated OLTP database of the blog platform: tables, rows, transactions.

:class:`Database` holds the live rows of ``public.users`` and ``public.articles`` plus the
write-ahead-log bookkeeping Debezium exposes (LSN, txId, commit clock), and makes the
changes of one transaction at a time. Everything random comes from the ``random.Random``
it is given, and every choice is made from lists (never from sets or ``hash()``), so the
same seed makes the same changes.

Rows are dicts in column order. Internal value types: ``int64`` -> int, ``string`` ->
str, ``timestamp`` -> epoch microseconds (int), ``decimal`` -> unscaled int (cents).
A row dict is never mutated after it was emitted: a change builds a new dict.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from python_jobs.simulate.encoding import DAY_US

Row = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """One column of a source table and its PostgreSQL/Debezium type."""

    name: str
    kind: str  # "int64" | "string" | "timestamp" | "decimal"
    optional: bool = True
    scale: int = 0
    precision: int = 0


@dataclass(frozen=True)
class TableSpec:
    """A source table as contract section 3 declares it."""

    name: str
    topic: str
    key: str
    columns: tuple[Column, ...]
    # Columns added later by schema drift (absent from the stream before the DDL).
    late_columns: tuple[Column, ...] = ()

    @property
    def all_columns(self) -> tuple[Column, ...]:
        return self.columns + self.late_columns

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.all_columns)


PREFERRED_LANGUAGE = Column("preferred_language", "string")

USERS = TableSpec(
    name="users",
    topic="blog.public.users",
    key="user_id",
    columns=(
        Column("user_id", "int64", optional=False),
        Column("email", "string"),
        Column("full_name", "string"),
        Column("country", "string"),
        Column("plan", "string"),
        Column("lifetime_value", "decimal", scale=2, precision=12),
        Column("created_at", "timestamp"),
        Column("updated_at", "timestamp"),
    ),
    late_columns=(PREFERRED_LANGUAGE,),
)

ARTICLES = TableSpec(
    name="articles",
    topic="blog.public.articles",
    key="article_id",
    columns=(
        Column("article_id", "int64", optional=False),
        Column("author_id", "int64"),
        Column("title", "string"),
        Column("category", "string"),
        Column("status", "string"),
        Column("published_at", "timestamp"),
        Column("updated_at", "timestamp"),
    ),
)

TABLES = (USERS, ARTICLES)

# --- value pools (tuples: indexable, ordered) -----------------------------------------

FIRST_NAMES = (
    "Ada", "Alan", "Grace", "Linus", "Margaret", "Dennis", "Barbara", "Ken", "Frances",
    "Edsger", "José", "Zoë", "Łukasz", "Søren", "Amélie", "Björn", "Chloé", "Dmitri",
    "Aiko", "Priya", "Mateo", "Fatima", "Noah", "Olivia", "Wei", "Yuki", "Kwame", "Inês",
)  # fmt: skip
LAST_NAMES = (
    "Lovelace", "Turing", "Hopper", "Torvalds", "Hamilton", "Ritchie", "Liskov",
    "Thompson", "Allen", "Dijkstra", "García", "Müller", "Kowalski", "Kierkegaard",
    "Dubois", "Andersson", "Nakamura", "Sharma", "Rossi", "Silva", "Okafor", "Chen",
    "Novák", "Haddad", "Jensen", "O'Neil",
)  # fmt: skip
EMAIL_DOMAINS = ("example.com", "mail.example.org", "inbox.example.net", "corp.example.com")
COUNTRIES = (
    "US", "GB", "DE", "FR", "ES", "IT", "NL", "PL", "SE", "IN", "BR", "JP", "CA", "AU",
    "MX", "NG",
)  # fmt: skip
PLAN_BAG = ("free",) * 10 + ("basic",) * 5 + ("pro",) * 4 + ("enterprise",)
LANGUAGES = ("en", "de", "fr", "es", "pt", "it", "nl", "pl", "ja", "hi")
CATEGORIES = (
    "data-engineering", "analytics", "machine-learning", "devops", "databases",
    "career", "tutorials", "opinion",
)  # fmt: skip
TITLE_ADJECTIVES = (
    "Practical", "Incremental", "Streaming", "Idempotent", "Scalable", "Lazy",
    "Declarative", "Hidden", "Reliable", "Fast", "Boring", "Exactly-Once",
)  # fmt: skip
TITLE_NOUNS = (
    "Pipelines", "Snapshots", "Merges", "Joins", "Partitions", "Checkpoints",
    "Backfills", "Schemas", "Watermarks", "Lakehouses", "Tombstones", "Dashboards",
)  # fmt: skip
TITLE_TAILS = (
    "in Practice", "Explained", "for Beginners", "at Scale", "Without Tears",
    "Revisited", "the Hard Way", "in 10 Minutes", "— a Field Guide", "",
)  # fmt: skip
STATUS_BAG = ("draft",) * 8 + ("published",) * 11 + ("archived",)


def _ascii_slug(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return "".join(ch for ch in folded.lower() if ch.isalnum())


_SLUGS = {name: _ascii_slug(name) for name in FIRST_NAMES + LAST_NAMES}

# --- seeded helpers --------------------------------------------------------------------


class KeyPool:
    """Keys in insertion order with O(1) add/remove and seeded random choice.

    Choosing from a list (not a set) keeps choices reproducible for a given seed.
    """

    __slots__ = ("keys", "_index")

    def __init__(self, keys: list[int] | None = None) -> None:
        self.keys: list[int] = []
        self._index: dict[int, int] = {}
        for key in keys or ():
            self.add(key)

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def add(self, key: int) -> None:
        if key in self._index:
            raise ValueError(f"key {key} already in pool")
        self._index[key] = len(self.keys)
        self.keys.append(key)

    def remove(self, key: int) -> None:
        pos = self._index.pop(key)
        last = self.keys.pop()
        if last != key:
            self.keys[pos] = last
            self._index[last] = pos

    def choice(self, rng: random.Random) -> int:
        keys = self.keys
        return keys[int(rng.random() * len(keys))]

    def oldest(self) -> int:
        return self.keys[0]


@dataclass(frozen=True)
class ChangeMix:
    """How a transaction's changes are drawn."""

    delete_rate: float = 0.05  # share of changes that are deletes
    reinsert_rate: float = 0.25  # share of inserts that re-insert a deleted key
    insert_rate: float = 0.2  # share of changes that are inserts
    users_share: float = 0.4  # share of changes on users (the rest: articles)


@dataclass(slots=True)
class Change:
    """One row change inside a transaction (what Debezium turns into one event)."""

    table: TableSpec
    op: str  # "c" | "u" | "d" | "r"
    key: int
    row: Row | None  # after image; None for deletes
    lsn: int
    columns: tuple[str, ...]  # the table's columns at the time of the change


@dataclass(slots=True)
class Transaction:
    """A committed transaction: its changes share ``tx_id`` and ``commit_ms``."""

    tx_id: int
    commit_ms: int
    last_commit_lsn: int | None
    changes: list[Change] = field(default_factory=list)
    snapshot: bool = False


def _align8(value: int) -> int:
    return (value + 7) & ~7


def _pick(rng: random.Random, items: tuple[str, ...]) -> str:
    """``rng.choice`` without its overhead (hot path)."""
    return items[int(rng.random() * len(items))]


_USER_CHANGES = ("email", "full_name", "country", "plan", "lifetime_value")
_USER_CHANGES_LANG = _USER_CHANGES + ("preferred_language", "preferred_language")


class Database:
    """The live OLTP state plus the WAL bookkeeping of the source PostgreSQL."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.rows: dict[str, dict[int, Row]] = {"users": {}, "articles": {}}
        self.live: dict[str, KeyPool] = {"users": KeyPool(), "articles": KeyPool()}
        self.deleted: dict[str, KeyPool] = {"users": KeyPool(), "articles": KeyPool()}
        self.next_id: dict[str, int] = {"users": 1, "articles": 1}
        self.authored: dict[int, int] = {}  # live articles per author
        self.has_preferred_language = False
        self._columns = {t.name: tuple(c.name for c in t.columns) for t in TABLES}
        # WAL position: realistic magnitudes for a young database, 8-byte aligned.
        self.lsn = _align8(24_023_128 + rng.randrange(0, 65_536))
        self.last_commit_lsn: int | None = None
        self.tx_id = 760 + rng.randrange(0, 200)
        self.clock_ms = 0  # commit time of the last transaction

    # --- columns ---------------------------------------------------------------------

    def columns(self, table: TableSpec) -> tuple[str, ...]:
        """The table's columns as the stream currently sees them."""
        return self._columns[table.name]

    def add_preferred_language(self) -> int:
        """``ALTER TABLE users ADD COLUMN preferred_language text``; returns the DDL's LSN.

        The DDL itself produces no change event; every later users event carries the
        column (null until a row sets it).
        """
        self.has_preferred_language = True
        self._columns["users"] = USERS.column_names
        users = self.rows["users"]
        for key in self.live["users"].keys:
            row = dict(users[key])
            row["preferred_language"] = None
            users[key] = row
        self.lsn = _align8(self.lsn + 312)
        return self.lsn

    # --- initial population and snapshot ---------------------------------------------

    def populate(self, n_users: int, n_articles: int, now_ms: int) -> None:
        """Rows that exist before the connector starts (created up to two years ago)."""
        rng = self.rng
        now_us = now_ms * 1000
        for _ in range(n_users):
            created = now_us - rng.randrange(1, 730 * DAY_US)
            updated = created + rng.randrange(0, now_us - created)
            self._insert_user(self._new_key("users"), created, updated)
        for _ in range(n_articles):
            if not self.live["users"]:
                break
            author = self.live["users"].choice(rng)
            floor = self.rows["users"][author]["created_at"]
            created = floor + rng.randrange(0, now_us - floor)
            updated = created + rng.randrange(0, now_us - created)
            self._insert_article(self._new_key("articles"), author, created, updated)

    def snapshot(self, ts_ms: int) -> Transaction:
        """The connector's initial snapshot: every row, one LSN and one txId."""
        self.clock_ms = ts_ms
        tx = Transaction(self.tx_id, ts_ms, None, snapshot=True)
        for table in TABLES:
            rows = self.rows[table.name]
            columns = self.columns(table)
            for key in sorted(self.live[table.name].keys):
                tx.changes.append(Change(table, "r", key, rows[key], self.lsn, columns))
        self.tx_id += 1
        self.last_commit_lsn = self.lsn
        return tx

    # --- streaming transactions ------------------------------------------------------

    def transaction(self, commit_ms: int, size: int, mix: ChangeMix) -> Transaction:
        """Commit one transaction of ``size`` changes at ``commit_ms``."""
        if commit_ms <= self.clock_ms:
            raise ValueError(f"commit time {commit_ms} not after {self.clock_ms}")
        rng = self.rng
        self.clock_ms = commit_ms
        self.tx_id += 1 if rng.random() < 0.7 else rng.randrange(2, 5)
        self.lsn = _align8(self.lsn + 40 + int(rng.random() * 4096))  # other WAL traffic
        tx = Transaction(self.tx_id, commit_ms, self.last_commit_lsn)
        touched: dict[str, set[int]] = {"users": set(), "articles": set()}
        commit_us = commit_ms * 1000
        random_ = rng.random
        columns = self._columns
        lsn = self.lsn
        for _ in range(size):
            table, op, key, row = self._one_change(commit_us, mix, touched)
            touched[table.name].add(key)
            lsn = (lsn + 71 + int(random_() * 480)) & ~7  # the change's WAL record
            tx.changes.append(Change(table, op, key, row, lsn, columns[table.name]))
        self.lsn = _align8(lsn + 56)  # the commit record
        self.last_commit_lsn = self.lsn
        return tx

    def _one_change(
        self, now_us: int, mix: ChangeMix, touched: dict[str, set[int]]
    ) -> tuple[TableSpec, str, int, Row | None]:
        rng = self.rng
        table = USERS if rng.random() < mix.users_share else ARTICLES
        draw = rng.random()
        if draw < mix.delete_rate:
            key = self._pick_live(table, touched, deletable=True)
            if key is not None:
                self._delete(table, key)
                return table, "d", key, None
        elif draw >= mix.delete_rate + mix.insert_rate:
            key = self._pick_live(table, touched, deletable=False)
            if key is not None:
                return table, "u", key, self._update(table, key, now_us)
        # An insert (also the fallback when no key fits the drawn operation).
        if table is ARTICLES and not self.live["users"]:
            table = USERS
        key = None
        deleted = self.deleted[table.name]
        if deleted and rng.random() < mix.reinsert_rate:
            candidate = deleted.choice(rng)
            if candidate not in touched[table.name]:
                deleted.remove(candidate)
                key = candidate
        if key is None:
            key = self._new_key(table.name)
        created = now_us - int(rng.random() * 3000)
        if table is USERS:
            row = self._insert_user(key, created, created)
        else:
            author = self.live["users"].choice(rng)
            row = self._insert_article(key, author, created, created)
        return table, "c", key, row

    def _pick_live(
        self, table: TableSpec, touched: dict[str, set[int]], deletable: bool
    ) -> int | None:
        pool = self.live[table.name]
        if not pool:
            return None
        seen = touched[table.name]
        for _ in range(6):
            key = pool.choice(self.rng)
            if key in seen:
                continue
            # A user who still authors live articles can't be deleted (foreign key).
            if deletable and table is USERS and self.authored.get(key, 0):
                continue
            return key
        return None

    def _new_key(self, table: str) -> int:
        key = self.next_id[table]
        self.next_id[table] = key + 1
        return key

    # --- row builders ----------------------------------------------------------------

    def _insert_user(self, key: int, created: int, updated: int) -> Row:
        rng = self.rng
        first = _pick(rng, FIRST_NAMES)
        last = _pick(rng, LAST_NAMES)
        plan = _pick(rng, PLAN_BAG)
        row: Row = {
            "user_id": key,
            "email": f"{_SLUGS[first]}.{_SLUGS[last]}{key}@{_pick(rng, EMAIL_DOMAINS)}",
            "full_name": f"{first} {last}",
            "country": None if rng.random() < 0.03 else _pick(rng, COUNTRIES),
            "plan": plan,
            "lifetime_value": self._lifetime_value(plan),
            "created_at": created,
            "updated_at": updated,
        }
        if self.has_preferred_language:
            row["preferred_language"] = None if rng.random() < 0.2 else _pick(rng, LANGUAGES)
        self.rows["users"][key] = row
        self.live["users"].add(key)
        return row

    def _lifetime_value(self, plan: str) -> int:
        rng = self.rng
        if plan == "free":
            return 0 if rng.random() < 0.7 else rng.randrange(1, 2_000)
        if rng.random() < 0.02:  # a charge-back left the account negative
            return -rng.randrange(1, 10_000)
        return rng.randrange(0, 500_000)

    def _insert_article(self, key: int, author: int, created: int, updated: int) -> Row:
        rng = self.rng
        status = _pick(rng, STATUS_BAG)
        published = None
        if status != "draft":
            published = created + rng.randrange(0, updated - created + 1)
        row: Row = {
            "article_id": key,
            "author_id": author,
            "title": self._title(),
            "category": _pick(rng, CATEGORIES),
            "status": status,
            "published_at": published,
            "updated_at": updated,
        }
        self.rows["articles"][key] = row
        self.live["articles"].add(key)
        self.authored[author] = self.authored.get(author, 0) + 1
        return row

    def _title(self) -> str:
        rng = self.rng
        parts = (
            _pick(rng, TITLE_ADJECTIVES),
            _pick(rng, TITLE_NOUNS),
            _pick(rng, TITLE_TAILS),
        )
        return " ".join(p for p in parts if p)

    def _delete(self, table: TableSpec, key: int) -> None:
        row = self.rows[table.name].pop(key)
        self.live[table.name].remove(key)
        self.deleted[table.name].add(key)
        if table is ARTICLES:
            self.authored[row["author_id"]] -= 1

    def _update(self, table: TableSpec, key: int, now_us: int) -> Row:
        """A new version of the row: ``updated_at`` plus at least one other column."""
        rng = self.rng
        old = self.rows[table.name][key]
        row = dict(old)
        # The statement's now(), a little before the commit, never before the last one.
        updated = max(old["updated_at"] + 1, now_us - int(rng.random() * 5000))
        if table is USERS:
            self._change_user(row)
        else:
            self._change_article(row, updated)
        row["updated_at"] = updated
        self.rows[table.name][key] = row
        return row

    def _change_user(self, row: Row) -> None:
        rng = self.rng
        choices = _USER_CHANGES_LANG if self.has_preferred_language else _USER_CHANGES
        names = [_pick(rng, choices)]
        if rng.random() < 0.2:
            second = _pick(rng, choices)
            if second != names[0]:
                names.append(second)
        for name in names:
            old = row[name]
            for _ in range(20):
                if name == "email":
                    local = row["email"].split("@", 1)[0]
                    new = f"{local}@{_pick(rng, EMAIL_DOMAINS)}"
                elif name == "full_name":
                    new = f"{_pick(rng, FIRST_NAMES)} {row['full_name'].split(' ', 1)[-1]}"
                elif name == "country":
                    new = _pick(rng, COUNTRIES)
                elif name == "plan":
                    new = _pick(rng, PLAN_BAG)
                elif name == "lifetime_value":
                    new = old + int(rng.random() * 52_000) - 2_000
                else:
                    new = _pick(rng, LANGUAGES)
                if new != old:
                    row[name] = new
                    break
            else:  # a pool too small to change: fall back to a column that always can
                row["lifetime_value"] += 1

    def _change_article(self, row: Row, now_us: int) -> None:
        """Change one of status (with published_at), category or title."""
        rng = self.rng
        status = row["status"]
        draw = rng.random()
        if draw < 0.35:  # a status transition
            if status == "draft":
                row["status"], row["published_at"] = "published", now_us
            elif status == "published":
                if rng.random() < 0.7:
                    row["status"] = "archived"
                else:  # unpublished back to draft
                    row["status"], row["published_at"] = "draft", None
            else:  # archived articles are restored
                row["status"] = "published"
            return
        if draw < 0.55:
            new = _pick(rng, CATEGORIES)
            if new != row["category"]:
                row["category"] = new
                return
        new_title = self._title()
        if new_title == row["title"]:
            new_title += " (updated)"
        row["title"] = new_title

    # --- persistence for --resume ----------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        return {
            "tables": {
                name: [self.rows[name][key] for key in self.live[name].keys]
                for name in ("users", "articles")
            },
            "deleted": {name: list(pool.keys) for name, pool in self.deleted.items()},
            "next_id": dict(self.next_id),
            "has_preferred_language": self.has_preferred_language,
            "lsn": self.lsn,
            "last_commit_lsn": self.last_commit_lsn,
            "tx_id": self.tx_id,
            "clock_ms": self.clock_ms,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], rng: random.Random) -> Database:
        db = cls(rng)
        for table in TABLES:
            name = table.name
            for row in state["tables"][name]:
                key = row[table.key]
                db.rows[name][key] = row
                db.live[name].add(key)
                if table is ARTICLES:
                    db.authored[row["author_id"]] = db.authored.get(row["author_id"], 0) + 1
            db.deleted[name] = KeyPool(list(state["deleted"][name]))
        db.next_id = dict(state["next_id"])
        if state["has_preferred_language"]:
            db.has_preferred_language = True
            db._columns["users"] = USERS.column_names
        db.lsn = state["lsn"]
        db.last_commit_lsn = state["last_commit_lsn"]
        db.tx_id = state["tx_id"]
        db.clock_ms = state["clock_ms"]
        return db
