"""The one SparkSession: Delta enabled, local, state under LAKEHOUSE_HOME, jars cached."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from python_jobs import spark as spark_module
from python_jobs.preflight import DERBY_LOCK, derby_holder
from python_jobs.spark import (
    REPO_ROOT,
    _resolved_jars_file,
    cluster_daemon_java_options,
    launcher_environment,
    master_settings,
    spark_settings,
    thrift_server_settings,
)
from tests.helpers import job_env


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -c code` from the repository in `env`, its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_session_runs_delta_with_the_project_settings(spark, lakehouse_home: Path) -> None:
    conf = spark.conf
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    # The suite's own LAKEHOUSE_SPARK_CONF (tests/conftest.py), over the defaults.
    assert conf.get("spark.sql.shuffle.partitions") == "1"
    assert conf.get("spark.sql.adaptive.enabled") == "false"
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sparkContext.master.startswith("local")

    path = lakehouse_home / "tmp" / "delta_probe"
    spark.range(3).write.format("delta").mode("overwrite").save(str(path))
    props = {
        r["key"]: r["value"] for r in spark.sql(f"show tblproperties delta.`{path}`").collect()
    }
    assert props["delta.enableDeletionVectors"] == "true"
    assert props["delta.enableChangeDataFeed"] == "true"
    assert sorted(r.id for r in spark.read.format("delta").load(str(path)).collect()) == [0, 1, 2]


def test_catalog_and_warehouse_live_under_lakehouse_home(spark, lakehouse_home: Path) -> None:
    spark.sql("create schema if not exists ops")
    spark.sql("create or replace table ops.probe (a int) using delta")
    location = spark.sql("describe detail ops.probe").collect()[0]["location"]
    assert location.removeprefix("file:").startswith(str(lakehouse_home / "warehouse"))
    assert (lakehouse_home / "metastore_db").is_dir()
    assert not (REPO_ROOT / "metastore_db").exists()
    assert not (REPO_ROOT / "spark-warehouse").exists()
    spark.sql("drop table ops.probe")


def test_lakehouse_spark_conf_goes_over_the_defaults(monkeypatch) -> None:
    monkeypatch.delenv("LAKEHOUSE_SPARK_CONF")
    defaults = spark_settings()
    assert defaults["spark.sql.shuffle.partitions"] == "8"
    assert defaults["spark.sql.adaptive.enabled"] == "true"
    monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", " spark.sql.shuffle.partitions=64\tspark.x.y=a=b ")
    assert spark_settings() == {
        **defaults,
        "spark.sql.shuffle.partitions": "64",
        "spark.x.y": "a=b",
    }
    for bad in ("shuffle=2", "spark.sql.shuffle.partitions", "spark.a="):
        monkeypatch.setenv("LAKEHOUSE_SPARK_CONF", f"spark.ok=1 {bad}")
        with pytest.raises(ValueError) as error:
            spark_settings()
        assert str(error.value) == (
            f"LAKEHOUSE_SPARK_CONF: '{bad}' is not a spark.KEY=VALUE pair "
            "(space-separated, e.g. spark.sql.shuffle.partitions=64)"
        )


def test_the_operators_settings_go_over_the_thrift_servers_and_launchers(monkeypatch) -> None:
    """LAKEHOUSE_SPARK_CONF goes over the executors' sizing of a Thrift server on a
    cluster too (`--ui-port` keeps its port, where `make cluster-up` reads the status;
    the Delta jars stay on its class path); the operator's SPARK_LAUNCHER_OPTS replace
    the project's for every JVM started."""
    monkeypatch.setattr(
        spark_module, "cached_jars", lambda: ["/jars/io.delta_delta-spark_2.13-4.4.0.jar"]
    )
    monkeypatch.setenv(
        "LAKEHOUSE_SPARK_CONF",
        "spark.executor.memory=3g spark.cores.max=2 spark.ui.port=5000 "
        "spark.driver.extraClassPath=/extra.jar",
    )
    settings = thrift_server_settings("spark://127.0.0.1:7077", ui_port=4050)
    # The Delta jars stay first on the driver's class path (its sessions load Delta).
    assert settings["spark.driver.extraClassPath"] == os.pathsep.join(
        ["/jars/io.delta_delta-spark_2.13-4.4.0.jar", "/extra.jar"]
    )
    assert settings["spark.app.name"] == "lakehouse-thrift-server"
    assert [settings[key] for key in ("spark.master", "spark.executor.cores")] == [
        "spark://127.0.0.1:7077",
        "1",
    ]
    assert [settings[f"spark.{key}"] for key in ("executor.memory", "cores.max", "ui.port")] == [
        "3g",
        "2",
        "4050",
    ]
    monkeypatch.delenv("SPARK_LAUNCHER_OPTS", raising=False)
    tmp = spark_module.paths()["tmp"]
    assert launcher_environment() == {
        "SPARK_LAUNCHER_OPTS": f"-XX:-UsePerfData -Djava.io.tmpdir={tmp}"
    }
    monkeypatch.setenv("SPARK_LAUNCHER_OPTS", "-Xmx96m")
    assert launcher_environment() == {"SPARK_LAUNCHER_OPTS": "-Xmx96m"}


def test_lakehouse_jvm_options_go_last_on_every_jvm(monkeypatch, tmp_path: Path) -> None:
    """LAKEHOUSE_JVM_OPTIONS reach a driver the job starts, and the settings put them
    last on drivers, executors and cluster daemons. The job's process keeps no
    SPARK_LAUNCHER_OPTS of the project's: its children start JVMs with their own."""
    env = job_env(tmp_path, LAKEHOUSE_JVM_OPTIONS="-Xss2m -XX:TieredStopAtLevel=1")
    env.pop("SPARK_LAUNCHER_OPTS", None)
    probe = (
        "import os; from python_jobs.spark import get_spark; s = get_spark(catalog=False); "
        "print(os.environ.get('SPARK_LAUNCHER_OPTS')); "
        "print(list(s.sparkContext._jvm.java.lang.management.ManagementFactory"
        ".getRuntimeMXBean().getInputArguments()))"
    )
    proc = run_python(probe, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-2] == "None"
    arguments = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    at = arguments.index("-Xss2m")
    assert arguments[at : at + 2] == ["-Xss2m", "-XX:TieredStopAtLevel=1"], arguments
    monkeypatch.setenv("LAKEHOUSE_JVM_OPTIONS", " -Xss2m\t-XX:+UseSerialGC ")
    extra = ["-Xss2m", "-XX:+UseSerialGC"]
    driver = spark_settings(catalog=False)["spark.driver.extraJavaOptions"].split()
    executors = master_settings("spark://127.0.0.1:7077")["spark.executor.extraJavaOptions"]
    assert driver[-2:] == executors.split()[-2:] == cluster_daemon_java_options().split()[-2:]
    assert driver[-2:] == extra
    monkeypatch.delenv("LAKEHOUSE_JVM_OPTIONS")
    assert "-Xss2m" not in spark_settings(catalog=False)["spark.driver.extraJavaOptions"]
    assert "-Xss2m" not in cluster_daemon_java_options()


def test_catalog_free_settings_use_an_in_memory_catalog() -> None:
    assert spark_settings(catalog=False)["spark.sql.catalogImplementation"] == "in-memory"
    assert spark_settings(catalog=True)["spark.sql.catalogImplementation"] == "hive"


SECOND_SESSION = """
import json
from datetime import UTC, datetime
from python_jobs import bronze
from python_jobs.spark import get_spark
spark = get_spark()
spark.sql("show databases").collect()  # boots the embedded catalog
lines = spark.createDataFrame([("x", "f", 1)], "_raw string, _source_file string, _line_number int")
row = bronze.decorate(lines, 0, datetime(2024, 10, 7, 23, 30, tzinfo=UTC)).selectExpr(
    "date_format(_ingested_at, 'yyyy-MM-dd HH:mm:ss') as t",
    "cast(_ingest_date as string) as d",
    "_ingested_at as collected",
).first()
jvm = spark.sparkContext._gateway.proc.pid
print(json.dumps({"t": row.t, "d": row.d, "collected": str(row.collected), "jvm": jvm}))
"""


def test_a_second_session_uses_cached_jars_utc_and_frees_the_catalog_on_exit(
    spark, tmp_path: Path
) -> None:
    # The suite's session (started above) resolved or reused the jars and recorded them.
    assert _resolved_jars_file().exists()
    # A machine far from UTC: timestamps must still be stored and read back as UTC.
    env = {**os.environ, "LAKEHOUSE_HOME": str(tmp_path / "home"), "TZ": "Asia/Kolkata"}
    proc = run_python(SECOND_SESSION, env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    jvm = result.pop("jvm")
    assert result == {
        "t": "2024-10-07 23:30:00",
        "d": "2024-10-07",
        "collected": "2024-10-07 23:30:00",
    }
    # When the command has returned, its driver JVM has exited and the embedded
    # catalog is free: a next command started at once is not refused it.
    assert not Path(f"/proc/{jvm}").exists()
    assert (tmp_path / "home" / "metastore_db" / DERBY_LOCK).exists()
    assert not derby_holder(tmp_path / "home" / "metastore_db")
    # No Ivy resolution at all, so nothing can be downloaded.
    assert "resolving dependencies" not in proc.stderr
    assert "downloading" not in proc.stderr.lower()
    # Nor the JVM's start-up notice (python_jobs.spark.JVM_NOTICES).
    assert "WARNING: Using incubator modules" not in proc.stderr, proc.stderr


def driver_stderr(spark, capfd, action) -> str:
    """What the driver JVM writes to stderr while `action()` runs: the lines our stderr
    receives up to a marker the JVM prints after it (the JVM's lines arrive in order)."""
    import time

    marker = "end of the driver's lines for this test"
    capfd.readouterr()
    action()
    spark.sparkContext._jvm.java.lang.System.err.println(marker)
    seen = ""
    deadline = time.monotonic() + 60
    while marker not in seen and time.monotonic() < deadline:
        time.sleep(0.1)
        seen += capfd.readouterr().err
    assert marker in seen, seen
    return seen[: seen.index(marker)]


def test_the_drivers_stderr_keeps_its_logging_without_the_start_up_notice(spark, capfd) -> None:
    """The driver JVM's stderr reaches ours line by line (get_spark starts it through
    python_jobs.spark._forward_jvm_stderr), except the notice of the vector module that
    Spark's launcher always adds."""
    from python_jobs.spark import JVM_NOTICES

    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert "--add-modules=jdk.incubator.vector" in arguments  # so the JVM did announce it

    def write() -> None:
        jvm.java.lang.System.err.println(JVM_NOTICES[0].decode())
        jvm.java.lang.System.err.println("a line of the driver's own")

    assert driver_stderr(spark, capfd, write) == "a line of the driver's own\n"


def test_a_full_refresh_and_a_merge_log_nothing(spark, capfd) -> None:
    """Two warnings of expected events stay out of the log (python_jobs/log4j2.properties):
    Hive refusing the first try of `create or replace table` on a Delta table (Spark's
    second try succeeds), and the release of the source copy after a MERGE."""

    def statements() -> None:
        spark.sql("create schema if not exists spark_logging")
        spark.sql("drop table if exists spark_logging.t")
        columns = "(id bigint not null, v string) using delta"
        spark.sql(f"create table spark_logging.t {columns}")
        spark.sql("insert into spark_logging.t values (1, 'a')")
        spark.sql(f"create or replace table spark_logging.t {columns}")
        spark.sql(
            "merge into spark_logging.t as t using (select id, max(v) as v from values "
            "(1, 'b'), (2, 'c') as s(id, v) group by id) as s on t.id = s.id "
            "when matched then update set * when not matched then insert *"
        )
        assert sorted(spark.sql("select * from spark_logging.t").collect()) == [(1, "b"), (2, "c")]
        spark.sql("drop schema spark_logging cascade")

    assert driver_stderr(spark, capfd, statements) == ""


def test_a_jvm_that_fails_to_start_says_why_on_stderr(tmp_path: Path) -> None:
    """The JVM's own message when it cannot start reaches stderr before pyspark's error."""
    env = job_env(tmp_path / "home", SPARK_DRIVER_MEMORY="lots")
    proc = run_python("from python_jobs.spark import get_spark; get_spark(catalog=False)", env)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[:2] == [
        "Invalid maximum heap size: -Xmxlots",
        "Error: Could not create the Java Virtual Machine.",
    ], proc.stderr[-3000:]
    assert "JAVA_GATEWAY_EXITED" in lines[-1], proc.stderr[-3000:]


def test_the_driver_maps_the_class_sharing_archive(spark) -> None:
    """`make setup` built the archive, and the suite's driver JVM (started by get_spark,
    like every job's) has it mapped."""
    from pyspark import SparkContext

    from python_jobs import class_sharing

    archive = class_sharing.archive_path()
    assert archive.exists(), f"{archive} is not built: make setup builds it"
    pid = SparkContext._gateway.proc.pid
    # (The maps name the file by its real path: .venv may be a link.)
    assert str(archive.resolve()) in Path(f"/proc/{pid}/maps").read_text()


def test_class_sharing_options(monkeypatch, tmp_path: Path) -> None:
    from python_jobs import class_sharing

    archive = tmp_path / "driver.jsa"
    monkeypatch.setattr(class_sharing, "archive_path", lambda: archive)
    monkeypatch.delenv(class_sharing.CDS_ENV, raising=False)
    quiet = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    # Not built: no option (a missing archive would also turn off the JDK's own).
    assert class_sharing.java_options() == []
    archive.write_bytes(b"")
    assert class_sharing.java_options() == [f"-XX:SharedArchiveFile={archive}", *quiet]
    monkeypatch.setenv(class_sharing.CDS_ENV, "off")
    assert class_sharing.java_options() == []
    monkeypatch.setenv(class_sharing.DUMP_ENV, str(tmp_path / "new.jsa"))
    assert class_sharing.java_options() == [f"-XX:ArchiveClassesAtExit={tmp_path}/new.jsa", *quiet]
    settings = spark_settings(catalog=False)["spark.driver.extraJavaOptions"].split()
    assert settings[-3:] == [f"-XX:ArchiveClassesAtExit={tmp_path}/new.jsa", *quiet]


def test_a_jvm_that_cannot_use_the_archive_starts_without_a_word() -> None:
    """Another class path (here: none) cannot use the archive: the JVM starts as
    without it, and prints nothing about it."""
    from python_jobs import class_sharing

    archive = class_sharing.archive_path()
    assert archive.exists()
    proc = subprocess.run(
        [
            class_sharing.java_binary(),
            f"-XX:SharedArchiveFile={archive}",
            *class_sharing.QUIET,
            "-version",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "cds" not in proc.stderr.lower() and "archive" not in proc.stderr.lower()
