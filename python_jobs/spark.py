"""The one place that builds the SparkSession and holds every Spark and Delta setting.

Jobs, tests and dbt (through ``python -m python_jobs.run_dbt``) all get their session
from :func:`get_spark`, so they read and write the same catalog with the same settings;
the local Thrift server (``python_jobs.tools.thrift_server``) starts with
:func:`thrift_server_settings`, the same settings again.

Layout under ``LAKEHOUSE_HOME`` (default ``./.lakehouse``)::

    metastore_db/   the catalog (embedded Derby metastore, one process at a time)
    catalog/        or the shared catalog's PostgreSQL cluster (``make catalog-up``)
    warehouse/      managed tables of the silver, gold and ops schemas
    bronze/         Bronze Delta tables, written *by path* by the ingestion job
    ops/            tables the jobs write by path (ingestion observability)
    checkpoints/    Structured Streaming checkpoints, one per query
    landing/        the landing zone of files (the embedded default source)
    tmp/            Spark scratch space and the JVM's temp dir

Why Bronze is written by path: the embedded Derby catalog admits one process at a time,
and ingestion must keep running while ``dbt build`` runs. The ingestion job therefore
uses a session *without* the catalog (``get_spark(catalog=False)``) and writes Delta
tables by path; dbt registers them in the ``bronze`` schema as external tables
(``macros/utils/register_ingestion_tables.sql``). Delta's optimistic concurrency makes
a reader of a path-based table and a streaming appender safe together.

The shared catalog: ``LAKEHOUSE_CATALOG=postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME``
(what ``make catalog-up`` prints, python_jobs/catalog.py) puts the catalog in a Hive
metastore backed by PostgreSQL instead. Spark's built-in Hive 2.3 client runs it in
"local metastore" mode: every Spark process talks to PostgreSQL itself over JDBC
(DataNucleus), so any number of processes hold the catalog at once. Ingestion then
uses a catalog-bound session and registers its own Bronze tables (still written by
path); unset, empty or ``derby`` keeps the embedded Derby catalog above.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pyspark.sql import SparkSession

from python_jobs import class_sharing

REPO_ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent

SPARK_VERSION = "4.2.0"
DELTA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

# Maven coordinates resolved from Maven Central on first use, cached under .venv.
PACKAGES = (
    f"io.delta:delta-spark_{SPARK_VERSION.rsplit('.', 1)[0]}_{SCALA_VERSION}:{DELTA_VERSION}",
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{SPARK_VERSION}",
    # The JDBC driver of the shared catalog's PostgreSQL (LAKEHOUSE_CATALOG).
    "org.postgresql:postgresql:42.7.14",
)
# Transitive dependencies that Spark already ships (at the versions it was built
# with): leaving them out keeps a second, older copy off the class path.
EXCLUDED_PACKAGES = (
    "com.fasterxml.jackson.core:jackson-databind",
    "com.fasterxml.jackson.core:jackson-core",
    "com.fasterxml.jackson.core:jackson-annotations",
    "org.apache.parquet:parquet-hadoop",
    "org.apache.parquet:parquet-column",
    "org.apache.parquet:parquet-common",
    "org.apache.parquet:parquet-encoding",
    "org.apache.parquet:parquet-format-structures",
    "org.apache.parquet:parquet-jackson",
    "org.apache.logging.log4j:log4j-api",
    "org.apache.logging.log4j:log4j-core",
    "org.apache.logging.log4j:log4j-slf4j2-impl",
    "org.slf4j:slf4j-api",
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "org.xerial.snappy:snappy-java",
    "at.yawk.lz4:lz4-java",
    "com.github.luben:zstd-jni",
    "com.google.code.findbugs:jsr305",
    "org.scala-lang.modules:scala-parallel-collections_2.13",
    "org.roaringbitmap:RoaringBitmap",
    "org.roaringbitmap:shims",
    # Annotations only: the PostgreSQL driver runs without them.
    "org.checkerframework:checker-qual",
)
IVY_SETTINGS = HERE / "ivysettings.xml"
# The jars HiveServer2 needs on the driver's class path (see thrift_server_settings).
DELTA_JAR_PREFIXES = ("io.delta_delta-spark", "io.delta_delta-storage")
# The PostgreSQL JDBC driver's jar, as Ivy names it (see catalog_settings).
POSTGRESQL_JAR_PREFIX = "org.postgresql_postgresql"

# The setting that selects the catalog, and the values that mean the embedded one.
CATALOG_ENV = "LAKEHOUSE_CATALOG"
EMBEDDED_CATALOG = ("", "derby")
CATALOG_URL_FORM = "postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME"

# Every timestamp in this project is UTC. Spark's session time zone is UTC (below), and
# so is this process's local time zone: PySpark converts naive datetimes through the
# local zone when it sends or collects them, so anything else would shift
# `_ingested_at` and every collected timestamp by the machine's UTC offset.
os.environ["TZ"] = "UTC"
time.tzset()


def lakehouse_home() -> Path:
    """The root of all state: ``$LAKEHOUSE_HOME`` or ``<repo>/.lakehouse``."""
    return Path(os.environ.get("LAKEHOUSE_HOME") or REPO_ROOT / ".lakehouse").resolve()


def jar_cache_dir() -> Path:
    """Where resolved jars are cached: inside the virtualenv running this code."""
    return Path(sys.prefix) / "ivy"


def _resolved_jars_file() -> Path:
    key = "\n".join([*PACKAGES, *EXCLUDED_PACKAGES, IVY_SETTINGS.read_text()])
    return jar_cache_dir() / f"resolved-{hashlib.sha256(key.encode()).hexdigest()[:16]}.txt"


def cached_jars() -> list[str] | None:
    """The jar files resolved for exactly these packages, if they are all cached."""
    listing = _resolved_jars_file()
    if not listing.exists():
        return None
    jars = listing.read_text().split()
    return jars if jars and all(Path(j).exists() for j in jars) else None


def jar_settings() -> dict[str, str]:
    """The Delta and Kafka connector jars.

    The first session on a machine resolves `PACKAGES` from Maven Central (only) through
    Spark's Ivy into the virtualenv; :func:`get_spark` then records the resolved jar
    files under a name derived from the packages, so later sessions load those files
    directly (no resolution, no network) until a version changes.
    """
    jars = cached_jars()
    if jars:
        return {"spark.jars": ",".join(jars)}
    return {
        "spark.jars.packages": ",".join(PACKAGES),
        "spark.jars.excludes": ",".join(EXCLUDED_PACKAGES),
        "spark.jars.ivy": str(jar_cache_dir()),
        "spark.jars.ivySettings": str(IVY_SETTINGS),
    }


def _record_resolved_jars(spark: SparkSession) -> None:
    listing = _resolved_jars_file()
    if listing.exists():
        return
    jars = [
        j.removeprefix("file://").removeprefix("file:")
        for j in spark.sparkContext.getConf().get("spark.jars", "").split(",")
        if j
    ]
    if jars and all(Path(j).exists() for j in jars):
        tmp = listing.with_suffix(".tmp")
        tmp.write_text("\n".join(jars) + "\n")
        tmp.replace(listing)


def paths() -> dict[str, Path]:
    home = lakehouse_home()
    return {
        "home": home,
        "metastore": home / "metastore_db",
        "warehouse": home / "warehouse",
        "bronze": home / "bronze",
        "ops": home / "ops",
        "checkpoints": home / "checkpoints",
        "landing": home / "landing",
        # Full loads read in place by dbt (models/staging/reference): present, even empty.
        "devices_loads": home / "landing" / "reference" / "devices",
        "tmp": home / "tmp",
    }


def ensure_directories() -> None:
    """Create the lakehouse's directories (the catalog creates its own)."""
    for name, path in paths().items():
        if name != "metastore":
            path.mkdir(parents=True, exist_ok=True)
    # Hive's scratch directories, made here and not by each session: HiveServer2
    # sessions opened at once (dbt's threads) raced to create them and failed
    # ("Couldn't create directory .../hive-resources").
    for name in ("hive", "hive-local", "hive-resources"):
        (paths()["tmp"] / name).mkdir(parents=True, exist_ok=True)


def pii_salt() -> str:
    """The salt of `pseudonymize` (macros/pii): $LAKEHOUSE_PII_SALT, else a random one
    made once per lakehouse and kept in $LAKEHOUSE_HOME/secrets/pii_salt (mode 0600),
    so that pseudonyms stay stable across runs without a salt in the repository."""
    salt = os.environ.get("LAKEHOUSE_PII_SALT", "")
    if salt:
        return salt
    path = lakehouse_home() / "secrets" / "pii_salt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(os.urandom(32).hex(), encoding="ascii")
        scratch.chmod(0o600)
        scratch.replace(path)
    return path.read_text(encoding="ascii").strip()


class CatalogSettingError(ValueError):
    """LAKEHOUSE_CATALOG is neither the embedded catalog nor a PostgreSQL URL."""


@dataclass(frozen=True)
class CatalogURL:
    """The shared catalog's PostgreSQL database, parsed from LAKEHOUSE_CATALOG."""

    user: str
    password: str
    host: str
    port: int
    database: str

    @property
    def jdbc_url(self) -> str:
        # connectTimeout: a catalog that stops answering fails a session in seconds.
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}?connectTimeout=10"

    @property
    def redacted(self) -> str:
        """The URL without its password, for messages and logs."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.database}"


def catalog_url() -> str | None:
    """The shared catalog's URL (``$LAKEHOUSE_CATALOG``), or None for embedded Derby."""
    value = os.environ.get(CATALOG_ENV, "").strip()
    return None if value.lower() in EMBEDDED_CATALOG else value


def shared_catalog() -> bool:
    """Whether the catalog is the shared Hive metastore (many processes at once)."""
    return catalog_url() is not None


def parse_catalog_url(url: str) -> CatalogURL:
    """``postgresql://USER[:PASSWORD]@HOST:PORT/DBNAME`` (user and password
    percent-encoded); a one-line :class:`CatalogSettingError` for anything else."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    database = parts.path.strip("/")
    problem = (
        "the scheme must be postgresql://" if parts.scheme != "postgresql"
        else "no USER" if not parts.username
        else "no HOST" if not parts.hostname
        else "no PORT (or not a number)" if port is None
        else "no DBNAME" if not database or "/" in database
        else "query or fragment not allowed" if parts.query or parts.fragment
        else None
    )  # fmt: skip
    if problem is not None or port is None:
        shown = "..." + url.rsplit("@", 1)[1] if "@" in url else url  # never echo a password
        raise CatalogSettingError(
            f"{CATALOG_ENV} must be empty, 'derby' or {CATALOG_URL_FORM}, got '{shown}' "
            f"({problem}): set it to what `make catalog-up` prints"
        )
    return CatalogURL(
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        host=parts.hostname or "",
        port=port,
        database=database,
    )


def catalog_settings() -> dict[str, str]:
    """The Hive metastore settings of the catalog LAKEHOUSE_CATALOG selects."""
    url = catalog_url()
    if url is None:
        return {
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={paths()['metastore']};create=true"
            ),
        }
    catalog = parse_catalog_url(url)
    settings = {
        "spark.hadoop.javax.jdo.option.ConnectionURL": catalog.jdbc_url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "spark.hadoop.javax.jdo.option.ConnectionUserName": catalog.user,
        "spark.hadoop.javax.jdo.option.ConnectionPassword": catalog.password,
        # The metastore's tables are created on first use (`make catalog-up` does it
        # once, so that concurrent first users do not race to create them).
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
    }
    # The metastore client loads the JDBC driver through the driver JVM's own class
    # path, not through the jars a session adds: put it there too.
    driver = [j for j in cached_jars() or [] if Path(j).name.startswith(POSTGRESQL_JAR_PREFIX)]
    if driver:
        settings["spark.driver.extraClassPath"] = os.pathsep.join(driver)
    return settings


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration, then restore what was there."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def launcher_environment() -> dict[str, str]:
    """Environment for the launcher JVM that spark-submit starts before the driver:
    no perf-data files and no temp files outside LAKEHOUSE_HOME, unless the operator's
    own SPARK_LAUNCHER_OPTS say otherwise (for drivers, the Thrift server and the
    cluster's daemons alike)."""
    default = f"-XX:-UsePerfData -Djava.io.tmpdir={paths()['tmp']}"
    return {"SPARK_LAUNCHER_OPTS": os.environ.get("SPARK_LAUNCHER_OPTS") or default}


# The driver JVM's JIT: the C2 compiler takes a method only once it is ten times hotter
# than by default. A short command (one model and its tests) runs thousands of planner,
# catalog and Delta methods a few thousand times each; compiling them all with C2 costs
# more CPU than it saves, and on 2 cores it competes with the work itself. Loops over
# data are still hot enough within seconds, so long jobs keep C2's code
# (bench/README.md, "The analyst's loop": about 20% less CPU for the short command, the
# same time for a 6-million-row aggregation).
JIT_OPTIONS = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=150000",
    "-XX:Tier4BackEdgeThreshold=400000",
)


def jvm_base_options(tmpdir: Path) -> list[str]:
    """The options every JVM the project starts begins with (drivers, executors, the
    cluster's daemons)."""
    return [
        # Scratch files under LAKEHOUSE_HOME (nothing written elsewhere).
        f"-Djava.io.tmpdir={tmpdir}",
        # UTC in the JVM too (see the TZ note at the top of this module).
        "-Duser.timezone=UTC",
        # No /tmp/hsperfdata_* files from the JVM.
        "-XX:-UsePerfData",
        # Warnings and errors only, without the embedded catalog's start-up noise.
        f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
    ]


def extra_jvm_options() -> list[str]:
    """LAKEHOUSE_JVM_OPTIONS: more options for every JVM the project starts (drivers,
    executors, the cluster's daemons), after the project's own, so they win. E.g.
    `-XX:TieredStopAtLevel=1` (no C2 at all) for short commands on tiny tables, as the
    Airflow, crash-recovery, shared-catalog and cluster tests run (SHORT_COMMAND_JVM
    in tests/helpers.py); alone, it also shrinks the code cache to 48 MB, which a
    long-running driver fills, so they add `-XX:ReservedCodeCacheSize=240m`."""
    return os.environ.get("LAKEHOUSE_JVM_OPTIONS", "").split()


def spark_settings(catalog: bool = True) -> dict[str, str]:
    """Every Spark and Delta setting the project uses, with the reason for each."""
    p = paths()
    tmp = str(p["tmp"])
    java_opts = " ".join(
        [
            *jvm_base_options(p["tmp"]),
            f"-Dderby.system.home={p['home']}",
            *JIT_OPTIONS,
            # The classes of earlier starts, mapped from an archive (python_jobs/class_sharing.py).
            *class_sharing.java_options(),
            *extra_jvm_options(),
        ]
    )
    settings = {
        "spark.master": os.environ.get("SPARK_MASTER", "local[*]"),
        "spark.app.name": "lakehouse",
        # Delta Lake: SQL extension and catalog so `using delta`, MERGE, RESTORE work.
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **jar_settings(),
        # State lives under LAKEHOUSE_HOME.
        "spark.sql.warehouse.dir": str(p["warehouse"]),
        "spark.local.dir": tmp,
        "spark.driver.extraJavaOptions": java_opts,
        **catalog_settings(),
        "spark.hadoop.hive.exec.scratchdir": str(p["tmp"] / "hive"),
        "spark.hadoop.hive.exec.local.scratchdir": str(p["tmp"] / "hive-local"),
        # One directory per session (Hive's default is per session too): sessions
        # that share one create and delete it under each other.
        "spark.hadoop.hive.downloaded.resources.dir": (
            str(p["tmp"] / "hive-resources") + "/${hive.session.id}_resources"
        ),
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # A laptop-sized driver: 2 cores share the work; memory for sorts and merges.
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "6g"),
        # Small shuffle partition counts for local[*]: 200 tiny tasks per shuffle would
        # dominate every query on 2 cores. Adaptive execution coalesces further and
        # picks broadcast joins at run time.
        "spark.sql.shuffle.partitions": "8",
        "spark.default.parallelism": "4",
        "spark.sql.adaptive.enabled": "true",
        # Delta rebuilds a table's state from its log before every read and write in 50
        # tasks by default; on 2 cores that fixed cost (~2 s) dominated every small MERGE,
        # UPDATE and DELETE. Two partitions hold the log of a table of millions of rows.
        "spark.databricks.delta.snapshotPartitions": "2",
        # VACUUM lists a table's directories in a job of this many tasks (Spark's default
        # is 10,000): 16 s for a table of five files on 2 cores, 1.3 s with 8.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # dbt-spark forces ANSI mode off in its sessions; jobs use the same semantics so
        # that SQL behaves identically in dbt and in Python.
        "spark.sql.ansi.enabled": "false",
        # Timestamps are UTC everywhere (Debezium commit times are epoch UTC).
        "spark.sql.session.timeZone": "UTC",
        # Deletion vectors: MERGE/DELETE/UPDATE mark rows deleted instead of rewriting
        # whole files, so the cost of a merge follows the batch, not the table.
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "true",
        # Change data feed on by default for new tables: incremental models downstream
        # of silver read only what changed. (Schema evolution is not switched on
        # globally: a MERGE that may add columns says so, `merge with schema evolution`.)
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        # No web UI (no port clashes when ingestion and dbt run side by side).
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Streaming: keep fewer old checkpoint batches on disk.
        "spark.sql.streaming.minBatchesToRetain": "20",
        # Fair scheduling between pools: ingestion runs one streaming query per topic,
        # each in its own pool, so a topic's small jobs (its batch-log row, a check)
        # do not queue behind another topic's big parse job, as they would in FIFO.
        "spark.scheduler.mode": "FAIR",
        # The pseudonymization salt, read by SQL as ${spark.lakehouse.pii_salt}: it never
        # appears in compiled SQL, dbt's logs or the repository.
        "spark.lakehouse.pii_salt": pii_salt(),
    }
    settings["spark.sql.catalogImplementation"] = "hive" if catalog else "in-memory"
    settings.update(master_settings(settings["spark.master"]))
    settings.update(conf_overrides())
    return settings


CONF_ENV = "LAKEHOUSE_SPARK_CONF"


def conf_overrides() -> dict[str, str]:
    """The operator's own Spark settings, last: `LAKEHOUSE_SPARK_CONF`, space-separated
    `spark.key=value` pairs (e.g. `spark.sql.shuffle.partitions=64` on a larger machine).
    Anything else is refused, naming the pair, before a session starts."""
    overrides = {}
    for pair in os.environ.get(CONF_ENV, "").split():
        key, sep, value = pair.partition("=")
        if not sep or not key.startswith("spark.") or not value:
            raise ValueError(
                f"{CONF_ENV}: '{pair}' is not a spark.KEY=VALUE pair "
                "(space-separated, e.g. spark.sql.shuffle.partitions=64)"
            )
        overrides[key] = value
    return overrides


def master_settings(master: str) -> dict[str, str]:
    """``spark.master`` and, for a Spark standalone cluster (``spark://host:port``, e.g.
    the loopback one of ``python -m python_jobs.tools.cluster``), how this application's
    executors are sized and where they keep their files."""
    settings = {"spark.master": master}
    if not master.startswith("spark://"):
        return settings
    tmp = paths()["tmp"]
    executor_java_opts = " ".join([*jvm_base_options(tmp), *extra_jvm_options()])
    settings.update(
        {
            # Small executors for a small cluster: one core each, and by default one
            # executor per application, so that two applications (the Thrift server and
            # ingestion) run side by side on the two 1-core workers of `make cluster-up`.
            "spark.executor.cores": "1",
            "spark.executor.memory": os.environ.get("SPARK_EXECUTOR_MEMORY", "1g"),
            "spark.cores.max": os.environ.get("SPARK_CORES_MAX", "1"),
            "spark.executor.extraJavaOptions": executor_java_opts,
            "spark.executorEnv.TZ": "UTC",
            # Python on the executors is this virtualenv's (pyspark and its deps).
            "spark.pyspark.python": sys.executable,
            # The driver listens on loopback only; executors connect back there.
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        }
    )
    return settings


def cluster_daemon_java_options() -> str:
    """JVM options (and Spark settings) of the standalone master and workers that
    ``python -m python_jobs.tools.cluster`` starts (SPARK_DAEMON_JAVA_OPTS)."""
    return " ".join(
        [
            *jvm_base_options(paths()["home"] / "cluster" / "tmp"),
            # An application that does not say how many cores it wants gets one, not
            # the whole cluster.
            "-Dspark.deploy.defaultCores=1",
            # No REST submission server: it listens on a fixed port (6066) and
            # applications connect with spark:// anyway.
            "-Dspark.master.rest.enabled=false",
            *extra_jvm_options(),
        ]
    )


def thrift_server_settings(master: str | None = None, ui_port: int | None = None) -> dict[str, str]:
    """Settings for a Spark Thrift Server (HiveServer2) bound to the catalog.

    HiveServer2 sessions resolve data sources through their own class loader, which
    does not see `spark.jars`: the Delta jars themselves also go on the driver's class
    path (only those: their transitive dependencies could shadow Spark's own).

    ``master`` runs it on a cluster (default: SPARK_MASTER, else local); ``ui_port``
    turns its web UI and REST API (``/api/v1``) on at that port (over a `spark.ui.port`
    of LAKEHOUSE_SPARK_CONF: `make cluster-up` reads its status there).
    """
    jars = cached_jars()
    if not jars:
        raise RuntimeError(
            "the Delta jars are not cached yet: run `make setup` (or any job) once first"
        )
    settings = spark_settings(catalog=True)
    if master is not None:
        settings.update(master_settings(master))
        # The operator's settings go over the cluster's sizing too, as in get_spark.
        settings.update(conf_overrides())
    delta = [j for j in jars if Path(j).name.startswith(DELTA_JAR_PREFIXES)]
    # Then whatever the class path held: the shared catalog's JDBC driver, or the
    # operator's own (LAKEHOUSE_SPARK_CONF).
    driver = settings.get("spark.driver.extraClassPath", "")
    settings["spark.driver.extraClassPath"] = os.pathsep.join([*delta, *filter(None, [driver])])
    settings["spark.app.name"] = "lakehouse-thrift-server"
    if ui_port is not None:
        settings["spark.ui.enabled"] = "true"
        settings["spark.ui.port"] = str(ui_port)
    return settings


# What the driver JVM prints on stderr outside its logging that is not the user's
# business: Spark's launcher always adds the incubating vector module (its
# JavaModuleOptions), and the JVM announces that at every start.
JVM_NOTICES = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def _forward_jvm_stderr(fd: int) -> None:
    """Copy the JVM's stderr to ours line by line, without `JVM_NOTICES`, until the JVM
    closes it; a failed write is dropped, never left to block the JVM."""
    with os.fdopen(fd, "rb") as lines:
        for line in lines:
            if line.rstrip(b"\r\n") in JVM_NOTICES:
                continue
            try:
                os.write(2, line)
            except OSError:
                pass


def _launch_jvm(settings: dict[str, str]) -> None:
    """Start the driver JVM (py4j's gateway, as pyspark does on its first session) with
    its stderr through `_forward_jvm_stderr`: its logging and errors show as before,
    its start-up notice does not. Nothing when this process already has a JVM."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf()
    for key, value in settings.items():
        conf.set(key, value)
    read, write = os.pipe()
    forwarder = threading.Thread(
        target=_forward_jvm_stderr, args=(read,), name="jvm-stderr", daemon=True
    )
    forwarder.start()
    try:
        # The launcher's options reach spark-submit through the environment, for this
        # launch only: the process's children (a job, the Thrift server, a cluster)
        # start their own JVMs with their own home's.
        with environment(**launcher_environment()):
            gateway = launch_gateway(conf, popen_kwargs={"stderr": write})
    except BaseException:
        os.close(write)
        forwarder.join(timeout=5)  # what the JVM said before it failed, first
        raise
    os.close(write)
    SparkContext._ensure_initialized(gateway=gateway)
    atexit.register(stop_jvm)


# How long a command waits, at its end, for its driver JVM to finish Spark's and Derby's
# shutdown (a second or two on this machine) before it kills it.
JVM_EXIT_WAIT_S = 120


def _quiet_py4j_at_exit(record: logging.LogRecord) -> bool:
    return record.msg != "Exception while sending command."


def stop_jvm() -> None:
    """Stop this process's session and wait for the driver JVM it started to exit.

    Registered at exit by `_launch_jvm`: a JVM started by py4j exits on its own when
    its stdin closes, but only after the command has returned, and until then it holds
    the embedded catalog; a command started at once after it (`run --step snapshot &&
    run --step build`) was refused the catalog. Nothing when this process started no
    JVM, or it has exited."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None or proc.poll() is not None:
        return
    # py4j's thread that frees Java objects may still send to the exiting JVM; py4j
    # logs that (at INFO, then retries) on the root logger: not news at exit.
    logging.getLogger().addFilter(_quiet_py4j_at_exit)
    active = SparkContext._active_spark_context
    if active is not None:
        try:
            active.stop()
        except Exception:  # noqa: BLE001 - exiting anyway; the JVM says why on stderr
            pass
    proc.stdin.close()
    try:
        proc.wait(timeout=JVM_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        print(f"spark: the driver JVM did not exit in {JVM_EXIT_WAIT_S} s: killed", file=sys.stderr)
        proc.kill()
        proc.wait()


def get_spark(catalog: bool = True) -> SparkSession:
    """Return the Delta-enabled SparkSession of this process (created on first call).

    ``catalog=True`` binds it to the catalog dbt uses (embedded Derby: call it while no
    other process holds the catalog). ``catalog=False`` gives a session with an
    in-memory catalog, for jobs that read and write Delta tables by path while dbt runs;
    such jobs also run on a catalog-bound session when one is already active.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        implementation = active.conf.get("spark.sql.catalogImplementation")
        if catalog and implementation != "hive":
            raise RuntimeError(
                "get_spark(catalog=True): this process already runs a session without "
                f"the catalog ({implementation}); build the catalog-bound session first"
            )
        return active
    # Before anything is written or a JVM starts: a missing service or a held catalog
    # fails here with one line that says what to start or set.
    from python_jobs import preflight

    preflight.check_session(catalog)
    ensure_directories()
    settings = spark_settings(catalog)
    _launch_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    if catalog:
        builder = builder.enableHiveSupport()
    spark = builder.getOrCreate()
    _record_resolved_jars(spark)
    return spark


# The ingestion job's own SQL settings (python_jobs/ingest.py), on a session of its own
# so that nothing else reads with them.
INGESTION_SETTINGS = {
    # Each landing file (or split of one, 128 MB by default) in a task of its own: the
    # cost of opening a file is counted as a whole split, so no two files share a task.
    # A line's number is then its row index within the task (bronze.number_lines).
    "spark.sql.files.maxPartitionBytes": str(128 * 1024 * 1024),
    "spark.sql.files.openCostInBytes": str(128 * 1024 * 1024),
}


def ingestion_session(spark: SparkSession) -> SparkSession:
    """A session of `spark`'s application (same catalog, same jars) with
    ``INGESTION_SETTINGS``."""
    session = spark.newSession()
    for key, value in INGESTION_SETTINGS.items():
        session.conf.set(key, value)
    return session


def main(argv: list[str] | None = None) -> int:
    """`python -m python_jobs.spark`: start a session once (resolving the jars on a
    fresh machine) and print what it runs on."""
    import argparse

    argparse.ArgumentParser(
        prog="python -m python_jobs.spark",
        description="Start the project's SparkSession once (resolves and caches the "
        "Delta and Kafka jars on first use) and print its versions and paths.",
    ).parse_args(argv)
    spark = get_spark(catalog=False)
    print(f"Spark {spark.version}, Delta {DELTA_VERSION}, master {spark.sparkContext.master}")
    print(f"lakehouse home: {lakehouse_home()}")
    print(f"jars cached in: {jar_cache_dir()}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
