"""Class data sharing for the Spark driver JVM: a start-up cost paid once per machine.

Every job, dbt command and test process starts a driver JVM that loads and verifies
the same tens of thousands of classes (Spark, Delta, Hive, the catalog). A dynamic
class-data-sharing archive (JDK 17, `-XX:ArchiveClassesAtExit`) records them once,
after a short training session; later JVMs map it instead of loading the classes again:
2.4 s less wall time and 2.9 CPU-seconds less per start on this project's machine
(docs/operations.md, "Driver start-up").

`make setup` builds the archive (`python -m python_jobs.class_sharing build`) into the
virtualenv, named for what it depends on (the pyspark version, the cached jars, the
Java binary); `python_jobs.spark` uses it when it exists. A JVM that cannot use it
(another class path, e.g. with the shared catalog's JDBC driver on it, or another JDK)
ignores it silently and starts as without it. `LAKEHOUSE_JVM_CDS=off` turns it off.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CDS_ENV = "LAKEHOUSE_JVM_CDS"
# Set in the training process only: where its JVM writes the archive at exit.
DUMP_ENV = "LAKEHOUSE_JVM_CDS_DUMP"
# The JVM logs a warning when an archive does not match its class path, and several
# while dumping (classes it cannot archive): none of them is the user's business.
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def java_binary() -> str:
    """The java that spark-submit runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found else ""


def archive_path() -> Path:
    """The archive for this pyspark, these cached jars and this Java, in the venv."""
    import pyspark

    from python_jobs.spark import cached_jars, jar_cache_dir

    java = java_binary()
    stamp = str(os.stat(java).st_mtime_ns) if java else ""
    key = "\n".join([pyspark.__version__, java, stamp, *(cached_jars() or [])])
    return jar_cache_dir() / "cds" / f"driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def java_options() -> list[str]:
    """The driver's class-sharing options: write the archive (training), use it (when
    built and not turned off), or none."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return [f"-XX:ArchiveClassesAtExit={dump}", *QUIET]
    if os.environ.get(CDS_ENV, "").lower() in ("off", "0", "false", "no"):
        return []
    archive = archive_path()
    return [f"-XX:SharedArchiveFile={archive}", *QUIET] if archive.exists() else []


def train() -> None:
    """The training session: a catalog-bound session running what jobs and dbt run
    first (catalog, Delta DDL and DML, history, a JSON parse), then a JVM exit that
    writes the archive."""
    from python_jobs.spark import get_spark, stop_jvm

    spark = get_spark(catalog=True)
    for statement in (
        "create schema if not exists training",
        "create table training.t (id bigint, v string, at timestamp) using delta",
        "insert into training.t values (1, 'a', current_timestamp())",
        "merge into training.t as t using (select 1 as id, 'b' as v, "
        "current_timestamp() as at) as s on t.id = s.id when matched then update set * "
        "when not matched then insert *",
        "describe history training.t",
        "describe detail training.t",
        "show tables in training",
        "select from_json('{\"a\": 1}', 'a int').a, count(*) from training.t group by 1",
    ):
        spark.sql(statement).collect()
    # The JVM writes the archive as it exits.
    stop_jvm()


def build(force: bool = False) -> Path:
    """Build the archive if it does not exist (or `force`); returns its path. The
    training runs in a process of its own, in a scratch lakehouse home, with the
    embedded catalog; the archive replaces any earlier one in one rename."""
    from python_jobs.spark import cached_jars, paths

    archive = archive_path()
    if archive.exists() and not force:
        return archive
    if not cached_jars():
        raise RuntimeError("the Spark jars are not cached yet: run `python -m python_jobs.spark`")
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    scratch_root = paths()["tmp"]
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cds-training-", dir=scratch_root) as scratch:
        env = {
            **os.environ,
            "LAKEHOUSE_HOME": scratch,
            "LAKEHOUSE_CATALOG": "derby",
            DUMP_ENV: str(partial),
        }
        env.pop("SPARK_MASTER", None)
        proc = subprocess.run(
            [sys.executable, "-m", "python_jobs.class_sharing", "train"],
            env=env,
            capture_output=True,
            text=True,
        )
    if proc.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        raise RuntimeError(
            f"the class-sharing training session failed (exit {proc.returncode}):\n"
            + proc.stderr[-3000:]
        )
    os.replace(partial, archive)
    for old in archive.parent.glob("driver-*.jsa"):
        if old != archive:
            old.unlink(missing_ok=True)
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.class_sharing",
        description="Build the Spark driver's class-data-sharing archive (make setup does), "
        "or print where it is.",
    )
    parser.add_argument("command", choices=("build", "path", "train"))
    parser.add_argument("--force", action="store_true", help="build it again")
    args = parser.parse_args(argv)
    if args.command == "train":
        if not os.environ.get(DUMP_ENV):
            parser.error(f"train runs under `build` only ({DUMP_ENV} is not set)")
        train()
        return 0
    if args.command == "path":
        archive = archive_path()
        print(f"{archive} ({'built' if archive.exists() else 'not built'})")
        return 0
    try:
        archive = build(force=args.force)
    except RuntimeError as error:
        print(f"python -m python_jobs.class_sharing: error: {error}", file=sys.stderr)
        return 1
    print(f"driver class-sharing archive: {archive} ({archive.stat().st_size >> 20} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
