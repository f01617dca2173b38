"""The one place that builds the SparkSession and holds every Spark and Delta setting.

Jobs, tests and dbt (through ``python -m python_jobs.dbt``) all get their session from
:func:`get_spark`, so they read and write the same catalog with the same settings.

Layout under ``LAKEHOUSE_HOME`` (default ``./.lakehouse``)::

    metastore_db/   the catalog (embedded Derby metastore, one process at a time)
    warehouse/      managed tables of the silver, gold and ops schemas
    bronze/         Bronze Delta tables, written *by path* by the ingestion job
    ops/            ingestion observability tables, also written by path
    checkpoints/    Structured Streaming checkpoints, one per query
    landing/        the landing zone of files (the embedded default source)
    tmp/            Spark scratch space and the JVM's temp dir

Why Bronze is written by path: the embedded Derby catalog admits one process at a time,
and ingestion must keep running while ``dbt build`` runs. The ingestion job therefore
uses a session *without* the catalog (``get_spark(catalog=False)``) and writes Delta
tables by path; dbt registers them in the ``bronze`` schema as external tables
(``macros/utils/register_bronze_tables.sql``). Delta's optimistic concurrency makes
a reader of a path-based table and a streaming appender safe together.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent

SPARK_VERSION = "4.2.0"
DELTA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

# Maven coordinates resolved from Maven Central on first use, cached under .venv.
PACKAGES = (
    f"io.delta:delta-spark_{SPARK_VERSION.rsplit('.', 1)[0]}_{SCALA_VERSION}:{DELTA_VERSION}",
    f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{SPARK_VERSION}",
)


def lakehouse_home() -> Path:
    """The root of all state: ``$LAKEHOUSE_HOME`` or ``<repo>/.lakehouse``."""
    return Path(os.environ.get("LAKEHOUSE_HOME") or REPO_ROOT / ".lakehouse").resolve()


def jar_cache_dir() -> Path:
    """Where resolved jars are cached: inside the virtualenv, so it survives runs."""
    venv = os.environ.get("VIRTUAL_ENV") or str(REPO_ROOT / ".venv")
    return Path(venv) / "ivy"


def _resolved_jars_file() -> Path:
    return jar_cache_dir() / f"resolved-{'-'.join(p.split(':')[1] for p in PACKAGES)}.txt"


def jar_settings() -> dict[str, str]:
    """The Delta and Kafka connector jars.

    The first session on a machine resolves `PACKAGES` from Maven Central through
    Spark's Ivy into the virtualenv; :func:`get_spark` then records the resolved jar
    files, and later sessions load those files directly (no resolution, no network).
    """
    listing = _resolved_jars_file()
    if listing.exists():
        jars = listing.read_text().split()
        if jars and all(Path(j).exists() for j in jars):
            return {"spark.jars": ",".join(jars)}
    return {
        "spark.jars.packages": ",".join(PACKAGES),
        "spark.jars.ivy": str(jar_cache_dir()),
        # Maven Central only.
        "spark.jars.ivySettings": str(Path(__file__).with_name("ivysettings.xml")),
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
        "tmp": home / "tmp",
    }


def spark_settings(catalog: bool = True) -> dict[str, str]:
    """Every Spark and Delta setting the project uses, with the reason for each."""
    p = paths()
    tmp = str(p["tmp"])
    java_opts = " ".join(
        [
            # Keep every scratch file under LAKEHOUSE_HOME (nothing written elsewhere).
            f"-Djava.io.tmpdir={tmp}",
            f"-Dderby.system.home={p['home']}",
            # No /tmp/hsperfdata_* files from the JVM.
            "-XX:-UsePerfData",
            # Warnings and errors only, without the embedded catalog's start-up noise.
            f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}",
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
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={p['metastore']};create=true"
        ),
        "spark.hadoop.hive.exec.scratchdir": str(p["tmp"] / "hive"),
        "spark.hadoop.hive.exec.local.scratchdir": str(p["tmp"] / "hive-local"),
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # A laptop-sized driver: 2 cores share the work; memory for sorts and merges.
        "spark.driver.memory": os.environ.get("SPARK_DRIVER_MEMORY", "6g"),
        # Small shuffle partition counts for local[*]: 200 tiny tasks per shuffle would
        # dominate every query on 2 cores. Adaptive execution coalesces further and
        # picks broadcast joins at run time.
        "spark.sql.shuffle.partitions": "8",
        "spark.default.parallelism": "4",
        "spark.sql.adaptive.enabled": "true",
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
        # of silver read only what changed.
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
        # Schema evolution in MERGE: a new source column is added to the target.
        "spark.databricks.delta.schema.autoMerge.enabled": "true",
        # No web UI (no port clashes when ingestion and dbt run side by side).
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Streaming: keep fewer old checkpoint batches on disk.
        "spark.sql.streaming.minBatchesToRetain": "20",
    }
    settings["spark.sql.catalogImplementation"] = "hive" if catalog else "in-memory"
    return settings


def get_spark(catalog: bool = True) -> SparkSession:
    """Return the Delta-enabled SparkSession of this process (created on first call).

    ``catalog=True`` binds it to the catalog dbt uses (embedded Derby: call it while no
    other process holds the catalog). ``catalog=False`` gives a session with an
    in-memory catalog, for jobs that read and write Delta tables by path while dbt runs.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    for path in paths().values():
        if path.name != "metastore_db":
            path.mkdir(parents=True, exist_ok=True)
    # The launcher JVM that spark-submit starts first: no perf data files in /tmp.
    os.environ.setdefault(
        "SPARK_LAUNCHER_OPTS", f"-XX:-UsePerfData -Djava.io.tmpdir={paths()['tmp']}"
    )
    builder = SparkSession.builder
    for key, value in spark_settings(catalog).items():
        builder = builder.config(key, value)
    if catalog:
        builder = builder.enableHiveSupport()
    spark = builder.getOrCreate()
    _record_resolved_jars(spark)
    return spark


def main() -> int:
    """`python -m python_jobs.spark`: start a session once (resolving the jars on a
    fresh machine) and print what it runs on."""
    import argparse

    argparse.ArgumentParser(
        prog="python -m python_jobs.spark",
        description="Start the project's SparkSession once (resolves and caches the "
        "Delta and Kafka jars on first use) and print its versions and paths.",
    ).parse_args()
    spark = get_spark(catalog=False)
    print(f"Spark {spark.version}, Delta {DELTA_VERSION}, master {spark.sparkContext.master}")
    print(f"lakehouse home: {lakehouse_home()}")
    print(f"jars cached in: {jar_cache_dir()}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
