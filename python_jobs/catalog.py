"""`make catalog-up` / `make catalog-down`: the shared catalog's PostgreSQL, on loopback.

A PostgreSQL cluster of Debian's `postgresql` package (the binaries in
``/usr/lib/postgresql/<version>/bin``) holding the Hive metastore that every Spark
process of this lakehouse shares when ``LAKEHOUSE_CATALOG`` points at it
(python_jobs/spark.py). Everything it writes is under ``$LAKEHOUSE_HOME/catalog``::

    postgresql/       the cluster's data directory (listens on 127.0.0.1 only)
    postgresql.log    the server's log
    url               the URL to set as LAKEHOUSE_CATALOG (mode 0600: it holds the
                      password, made up at the first `up`)

    python -m python_jobs.catalog up [--port N]   # prints the URL
    python -m python_jobs.catalog url             # prints it again
    python -m python_jobs.catalog down

``up`` is idempotent (a running cluster is reused) and so is ``down`` (nothing running
is fine). The first ``up`` also creates the metastore's schema: every table at once,
with DataNucleus' SchemaTool over the Hive metastore's own mapping (``package.jdo`` in
Spark's hive-metastore jar), then one catalog-bound Spark session creates the layer
schemas (``bronze``, ``silver``, ``gold``, ``ops``). Left to DataNucleus' create-on-first-
use alone, PostgreSQL deadlocks: the first `drop table` creates the grant tables (with
foreign keys to ``TBLS``) on one connection while the drop's own transaction holds
``TBLS`` on another, and processes that start together race to create the same tables.

The cluster itself (initdb, configuration, start, stop, psql; the ``postgres`` OS user
under root, since PostgreSQL refuses to run as root) is ``python_jobs/postgresql.py``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import importlib.util
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.parse import quote

from python_jobs.postgresql import HOST, Cluster, PostgresError, as_root, free_port, port_open
from python_jobs.spark import (
    CATALOG_ENV,
    POSTGRESQL_JAR_PREFIX,
    REPO_ROOT,
    CatalogSettingError,
    CatalogURL,
    cached_jars,
    lakehouse_home,
    parse_catalog_url,
)

DATABASE = "metastore"
SUPERUSER = "lakehouse"
PORT_ENV = "CATALOG_PORT"
# The metastore table that tells whether the schema exists (DataNucleus' name for it).
SCHEMA_TABLE = "DBS"
LAYER_SCHEMAS = ("bronze", "silver", "gold", "ops")
SETTINGS = (
    # Every Spark process keeps a small pool of metastore connections.
    ("max_connections", "200"),
    ("shared_buffers", "32MB"),
)


class CatalogError(PostgresError):
    """The catalog's PostgreSQL could not be found, started, reached or stopped."""


class ProbeError(RuntimeError):
    """The catalog's database cannot be used; `reason` is one of `unreachable`,
    `not_postgresql`, `login`, `database`, `other` (the message says what failed)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# --- probe: a PostgreSQL login, in Python, before any JVM starts ----------------------


def _message(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("!I", len(payload) + 4) + payload


def _receive(sock: socket.socket) -> tuple[bytes, bytes]:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ProbeError("not_postgresql", "the server closed the connection")
            data += chunk
        return data

    kind = exactly(1)
    (length,) = struct.unpack("!I", exactly(4))
    if length < 4 or length > 1 << 20:
        raise ProbeError("not_postgresql", "the server does not speak PostgreSQL's protocol")
    return kind, exactly(length - 4)


def _error_fields(payload: bytes) -> dict[str, str]:
    fields = {}
    for part in payload.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return fields


def _scram(sock: socket.socket, catalog: CatalogURL, mechanisms: list[bytes]) -> None:
    """SCRAM-SHA-256 (RFC 5802/7677), PostgreSQL's default password authentication."""
    if b"SCRAM-SHA-256" not in mechanisms:
        raise ProbeError("other", f"unsupported SASL mechanisms {mechanisms}")
    nonce = base64.b64encode(secrets.token_bytes(18)).decode()
    first_bare = f"n=,r={nonce}"
    initial = ("n,," + first_bare).encode()
    sock.sendall(_message(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(initial)) + initial))
    kind, payload = _receive(sock)
    if kind != b"R" or struct.unpack("!I", payload[:4])[0] != 11:
        raise ProbeError("login", "the server did not continue the SCRAM exchange")
    server_first = payload[4:].decode()
    attributes = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", catalog.password.encode(), base64.b64decode(attributes["s"]),
        int(attributes["i"]),
    )  # fmt: skip
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    final_bare = f"c=biws,r={attributes['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth_message, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    sock.sendall(_message(b"p", f"{final_bare},p={proof.decode()}".encode()))


def probe(catalog: CatalogURL, timeout: float = 5.0) -> None:
    """Log in to the catalog's database as a Spark process would, over PostgreSQL's own
    protocol (no client library, no JVM): raises :class:`ProbeError` if the server does
    not answer, is not PostgreSQL, refuses the user or password, or lacks the database.
    Takes a round trip or two; writes nothing."""
    try:
        sock = socket.create_connection((catalog.host, catalog.port), timeout=timeout)
    except OSError as error:
        raise ProbeError("unreachable", error.strerror or str(error)) from None
    with sock:
        sock.settimeout(timeout)
        try:
            params = (
                b"user\0" + catalog.user.encode() + b"\0"
                b"database\0" + catalog.database.encode() + b"\0"
                b"application_name\0lakehouse-preflight\0\0"
            )
            sock.sendall(struct.pack("!II", len(params) + 8, 196608) + params)
            while True:
                kind, payload = _receive(sock)
                if kind == b"E":
                    fields = _error_fields(payload)
                    code, text = fields.get("C", ""), fields.get("M", "error")
                    # 3D000 invalid_catalog_name; 28xxx invalid authorization.
                    reason = (
                        "database" if code == "3D000"
                        else "login" if code.startswith("28") else "other"
                    )  # fmt: skip
                    raise ProbeError(reason, text)
                if kind in (b"Z", b"K", b"S", b"N"):
                    if kind == b"Z":  # ready for query: logged in, database there
                        sock.sendall(_message(b"X", b""))
                        return
                    continue
                if kind != b"R":
                    raise ProbeError("not_postgresql", "unexpected reply to a login")
                (code,) = struct.unpack("!I", payload[:4])
                if code == 0:  # authentication ok
                    continue
                if code == 3:  # clear-text password
                    sock.sendall(_message(b"p", catalog.password.encode() + b"\0"))
                elif code == 5:  # md5
                    inner = hashlib.md5((catalog.password + catalog.user).encode()).hexdigest()
                    outer = hashlib.md5(inner.encode() + payload[4:8]).hexdigest()
                    sock.sendall(_message(b"p", b"md5" + outer.encode() + b"\0"))
                elif code == 10:  # SASL
                    _scram(sock, catalog, [m for m in payload[4:].split(b"\0") if m])
                elif code == 12:  # SASL final: the server's signature
                    continue
                else:
                    raise ProbeError("other", f"unsupported authentication method {code}")
        except TimeoutError:
            raise ProbeError("unreachable", f"no answer within {timeout:g} s") from None
        except OSError as error:
            raise ProbeError("unreachable", error.strerror or str(error)) from None


def catalog_home() -> Path:
    return lakehouse_home() / "catalog"


def cluster() -> Cluster:
    """The catalog's PostgreSQL cluster (python_jobs/postgresql.py)."""
    return Cluster(catalog_home(), SUPERUSER, SETTINGS)


def data_dir() -> Path:
    return cluster().data_dir


def url_file() -> Path:
    return catalog_home() / "url"


def log_file() -> Path:
    return cluster().log_file


def is_running() -> bool:
    """Whether this lakehouse's cluster is running (`pg_ctl status`)."""
    return cluster().is_running()


def _recorded_password() -> str | None:
    """The superuser's password, from the URL recorded by an earlier `up`."""
    if not url_file().exists():
        return None
    try:
        return parse_catalog_url(url_file().read_text(encoding="utf-8").strip()).password
    except CatalogSettingError:
        return None


def _psql(port: int, password: str, sql: str, database: str = "postgres") -> str:
    return cluster().psql(port, password, sql, database)


def make_url(port: int, password: str) -> str:
    return f"postgresql://{SUPERUSER}:{quote(password, safe='')}@{HOST}:{port}/{DATABASE}"


def _schema_exists(port: int, password: str) -> bool:
    found = _psql(
        port,
        password,
        "select count(*) from information_schema.tables "
        f"where table_schema = 'public' and table_name = '{SCHEMA_TABLE}'",
        DATABASE,
    )
    return found == "1"


def java() -> str:
    """``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else ``java`` from PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise CatalogError("no java found (set JAVA_HOME or put Java 17 on PATH)")
    return found


def _spark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise CatalogError("pyspark is not installed: run `make setup` first")
    return Path(spec.submodule_search_locations[0]) / "jars"


def create_schema(catalog: CatalogURL) -> None:
    """Every table of the Hive metastore, in one go (DataNucleus' SchemaTool over the
    metastore's mapping in Spark's own hive-metastore jar: the schema Spark's Hive
    client expects, with the naming settings Hive gives DataNucleus)."""
    jars = _spark_jars()
    metastore_jars = sorted(jars.glob("hive-metastore-*.jar"))
    driver = [j for j in cached_jars() or [] if Path(j).name.startswith(POSTGRESQL_JAR_PREFIX)]
    if not metastore_jars or not driver:
        raise CatalogError(
            "the Hive metastore or PostgreSQL JDBC driver jar is missing: run `make setup`"
        )
    work = catalog_home() / "schematool"
    work.mkdir(exist_ok=True)
    mapping = work / "package.jdo"
    with zipfile.ZipFile(metastore_jars[-1]) as jar:
        mapping.write_bytes(jar.read("package.jdo"))
    props = work / "datanucleus.properties"
    settings = {
        "javax.jdo.option.ConnectionURL": catalog.jdbc_url,
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": catalog.user,
        "javax.jdo.option.ConnectionPassword": catalog.password,
        "datanucleus.storeManagerType": "rdbms",
        # Hive's own settings for DataNucleus (HiveConf): the same names for tables,
        # columns, constraints and value generators.
        "datanucleus.identifierFactory": "datanucleus1",
        "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
    }
    escaped = {k: v.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=")
               for k, v in settings.items()}  # fmt: skip
    props.write_text("".join(f"{k}={v}\n" for k, v in escaped.items()), encoding="utf-8")
    props.chmod(0o600)
    try:
        cluster().run(
            [
                java(),
                "-XX:-UsePerfData",
                f"-Djava.io.tmpdir={work}",
                "-cp",
                os.pathsep.join([*driver, str(jars / "*")]),
                "org.datanucleus.store.schema.SchemaTool",
                "-create",
                "-api",
                "JDO",
                "-props",
                str(props),
                str(mapping),
            ],
            "creating the metastore schema (DataNucleus SchemaTool)",
        )
    finally:
        props.unlink(missing_ok=True)


def initialize_schema(url: str) -> None:
    """Create the metastore's schema and the layer schemas, in a Spark process of its own
    (this one may already run a session on another catalog)."""
    proc = subprocess.run(
        [sys.executable, "-m", "python_jobs.catalog", "init"],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            CATALOG_ENV: url,
            "SPARK_DRIVER_MEMORY": os.environ.get("CATALOG_INIT_DRIVER_MEMORY", "1g"),
        },
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        output = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise CatalogError("creating the metastore schema failed:\n" + "\n".join(output))


def _init_in_this_process() -> None:
    """`python -m python_jobs.catalog init`: a catalog-bound session creates the
    metastore's tables (DataNucleus, on first use) and the layer schemas."""
    from python_jobs.spark import get_spark, shared_catalog

    if not shared_catalog():
        raise CatalogError(f"init needs {CATALOG_ENV} set to the shared catalog's URL")
    spark = get_spark(catalog=True)
    try:
        spark.sql("show databases").collect()
        for schema in LAYER_SCHEMAS:
            spark.sql(f"create database if not exists {schema}")
        # DataNucleus creates a table when its kind of object is first used: a table, a
        # view, their properties, and dropping them (the grants a drop looks up), so
        # that two processes never do it first at once.
        scratch = "lakehouse_catalog_init"
        spark.sql(f"create database if not exists {scratch}")
        spark.sql(f"create table {scratch}.t (id int) using delta")
        spark.sql(f"alter table {scratch}.t set tblproperties ('lakehouse.init' = 'true')")
        spark.sql(f"create view {scratch}.v as select id from {scratch}.t")
        spark.sql(f"drop view {scratch}.v")
        spark.sql(f"drop table {scratch}.t")
        spark.sql(f"drop database {scratch} cascade")
    finally:
        spark.stop()


def up(port: int | None = None) -> str:
    """Start this lakehouse's catalog cluster (or find it running); returns its URL,
    also recorded in ``$LAKEHOUSE_HOME/catalog/url``."""
    pg = cluster()
    pg.prepare_home()
    password = _recorded_password()
    initialized = pg.initialized()
    if initialized and password is None:
        raise CatalogError(
            f"{data_dir()} exists but {url_file()} (its password) is missing: stop it "
            "(make catalog-down), delete the catalog directory and run make catalog-up again"
        )
    if not initialized:
        password = secrets.token_urlsafe(24)
        pg.initdb(password)
    assert password is not None
    if pg.is_running():
        running_port = pg.recorded_port()
        assert running_port is not None
        if port is not None and port != running_port:
            raise CatalogError(
                f"the catalog already runs on port {running_port}, not {port}: "
                "make catalog-down first to move it"
            )
        port = running_port
    else:
        previous = pg.recorded_port()
        if port is None:
            reusable = previous is not None and not port_open(previous)
            port = previous if reusable and previous is not None else free_port()
        elif port_open(port):
            raise CatalogError(f"port {port} is in use: choose another {PORT_ENV}")
        pg.start(port)
    if not _psql(port, password, f"select 1 from pg_database where datname = '{DATABASE}'"):
        _psql(port, password, f"create database {DATABASE}")
    url = make_url(port, password)
    pg.write_owned(url_file(), url + "\n")
    if as_root():  # the URL (and its password) stays readable by root only
        os.chown(url_file(), 0, 0)
    if not _schema_exists(port, password):
        create_schema(parse_catalog_url(url))
        initialize_schema(url)
    return url


def down() -> bool:
    """Stop this lakehouse's catalog cluster; False if it was not running."""
    return cluster().stop()


def recorded_url() -> str | None:
    """The URL the last `up` recorded for this lakehouse, if any."""
    if not url_file().exists():
        return None
    return url_file().read_text(encoding="utf-8").strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.catalog",
        description="The shared catalog: a PostgreSQL cluster under "
        "$LAKEHOUSE_HOME/catalog, on 127.0.0.1, holding the Hive metastore that every "
        f"Spark process uses when {CATALOG_ENV} is set to the URL `up` prints.",
    )
    parser.add_argument(
        "command",
        choices=("up", "down", "url", "init"),
        help="up: start it (idempotent), create the metastore schema on first start and "
        "print the URL; down: stop it (idempotent); url: print the recorded URL; "
        f"init: create the metastore schema in the catalog {CATALOG_ENV} names (up does it)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ[PORT_ENV]) if os.environ.get(PORT_ENV, "").isdigit() else None,
        help=f"port of a new start (default: ${PORT_ENV}, else the last one if free, "
        "else a free one)",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            url = up(args.port)
            print(f"catalog running: set {CATALOG_ENV}={url}", file=sys.stderr)
            print(url)
        elif args.command == "down":
            stopped = down()
            print("catalog stopped" if stopped else "catalog not running", file=sys.stderr)
        elif args.command == "url":
            url = recorded_url()
            if url is None:
                parser.exit(1, f"{parser.prog}: error: no catalog yet: run make catalog-up\n")
            print(url)
        else:
            _init_in_this_process()
    except PostgresError as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
