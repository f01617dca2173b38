"""A real single-node Apache Kafka broker on loopback, for tests and the demo.

One JVM runs the broker and the KRaft controller together (combined mode, no
ZooKeeper), bound to 127.0.0.1 only. The jars come from Maven Central only
(``python_jobs/ivysettings.xml``), resolved once by the Ivy that pyspark ships into
``<venv>/kafka/<version>/lib``; later starts resolve nothing. Everything the broker
writes is under ``$LAKEHOUSE_HOME/kafka``::

    server.properties  log4j.properties  broker.pid
    data/              the partitions and the KRaft metadata log
    logs/              server.log (warnings and errors), broker.out (the JVM's output)
    tmp/               the JVM's temp dir

    python -m python_jobs.tools.kafka_broker up [--port N]   # prints the bootstrap servers
    python -m python_jobs.tools.kafka_broker status
    python -m python_jobs.tools.kafka_broker down
    python -m python_jobs.tools.kafka_broker resolve          # only fetch the jars

Topics are never created automatically: :func:`create_topics` creates them.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import hashlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from python_jobs.spark import IVY_SETTINGS, paths

log = logging.getLogger("kafka_broker")

# Kafka 3.9.2 is the release of the kafka-clients 3.9.2 that Spark's Kafka connector
# uses: the broker and Spark's consumer speak exactly the same protocol versions.
KAFKA_VERSION = "3.9.2"
SCALA_VERSION = "2.13"
# The broker's jars as Maven publishes them name no logging backend; Kafka's own
# distribution ships slf4j-reload4j, so do we (otherwise the broker logs nothing).
DEPENDENCIES = (
    ("org.apache.kafka", f"kafka_{SCALA_VERSION}", KAFKA_VERSION),
    ("org.slf4j", "slf4j-reload4j", "1.7.36"),
    ("ch.qos.reload4j", "reload4j", "1.2.25"),
)
HOST = "127.0.0.1"
NODE_ID = 1
HEAP = "-Xmx512m"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"

# Broker processes this interpreter started, so that stopping one also reaps it.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class BrokerError(RuntimeError):
    """The broker could not be resolved, started, reached or stopped."""


@dataclass(frozen=True)
class Broker:
    """A running broker of this ``LAKEHOUSE_HOME``."""

    bootstrap: str  # "127.0.0.1:<port>"
    port: int
    controller_port: int
    pid: int
    home: Path  # $LAKEHOUSE_HOME/kafka
    data_dir: Path
    log_dir: Path

    @property
    def server_log(self) -> Path:
        return self.log_dir / "server.log"


# --- the jars --------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where the broker's jars are kept: inside the virtualenv running this code."""
    return Path(sys.prefix) / "kafka"


def lib_dir() -> Path:
    return broker_jars().lib


def ivy_jar() -> Path:
    """The Ivy jar shipped in the pyspark package."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError("pyspark is not installed: run `make setup` first")
    jars = sorted((Path(spec.submodule_search_locations[0]) / "jars").glob("ivy-*.jar"))
    if not jars:
        raise BrokerError("no ivy-*.jar in the pyspark package")
    return jars[-1]


def java() -> str:
    """``$JAVA_HOME/bin/java`` if JAVA_HOME is set, else ``java`` from PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise BrokerError("no java found (set JAVA_HOME or put Java 17 on PATH)")
    return found


@dataclass(frozen=True)
class MavenJars:
    """Artifacts and their dependencies from Maven Central, retrieved into one directory.

    Resolved once by the Ivy that pyspark ships (``python_jobs/ivysettings.xml``: Maven
    Central only), with Ivy's cache under ``<venv>/kafka/ivy`` shared by every set; a
    stamp named after the dependencies and the settings records the files, so later
    uses resolve nothing. Used for the broker's jars here, and for Kafka Connect and
    the Debezium connector plugin (``python_jobs/tools/kafka_connect.py``).

    With ``archive`` (a classifier such as ``plugin``), each dependency is its
    ``<name>-<revision>-<archive>.tar.gz`` alone (no dependencies), unpacked into lib/:
    how Kafka Connect plugins such as Debezium's connectors are published.
    """

    title: str  # for messages: "Apache Kafka 3.9.2"
    module: str  # the Ivy module's name (part of the stamp's key)
    home: Path  # holds ivy.xml, the stamp and (by default) lib/
    dependencies: tuple[tuple[str, str, str], ...]  # (organisation, name, revision)
    lib_name: str = "lib"  # the directory of jars, relative to home
    archive: str | None = None  # a classifier: fetch each dependency's .tar.gz of it

    @property
    def lib(self) -> Path:
        return self.home / self.lib_name

    def ivy_module(self) -> str:
        if self.archive is None:
            deps = "\n".join(
                f'    <dependency org="{org}" name="{name}" rev="{rev}" conf="default->default"/>'
                for org, name, rev in self.dependencies
            )
            head = '<ivy-module version="2.0">\n'
        else:
            deps = "\n".join(
                f'    <dependency org="{org}" name="{name}" rev="{rev}" transitive="false">\n'
                f'      <artifact name="{name}" type="tar.gz" ext="tar.gz"'
                f' m:classifier="{self.archive}"/>\n'
                "    </dependency>"
                for org, name, rev in self.dependencies
            )
            head = '<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">\n'
        return (
            f'{head}  <info organisation="lakehouse" module="{self.module}"/>\n'
            '  <configurations><conf name="default"/></configurations>\n'
            f"  <dependencies>\n{deps}\n  </dependencies>\n"
            "</ivy-module>\n"
        )

    def stamp(self) -> Path:
        key = self.ivy_module() + IVY_SETTINGS.read_text()
        return self.home / f"resolved-{hashlib.sha256(key.encode()).hexdigest()[:16]}"

    def cached(self) -> list[Path] | None:
        """The jars, if they were resolved for exactly these dependencies."""
        stamp = self.stamp()
        if not stamp.exists():
            return None
        jars = [Path(line) for line in stamp.read_text().split()]
        return jars if jars and all(j.exists() for j in jars) else None

    def ensure(self) -> list[Path]:
        """The jars: resolved from Maven Central on first use, then from the cache."""
        jars = self.cached()
        if jars:
            return jars
        with _locked(self.home.parent / f"{self.home.name}.lock"):
            jars = self.cached()  # another process may have resolved them meanwhile
            if jars:
                return jars
            log.info("resolving %s from Maven Central (first use only)", self.title)
            started = time.monotonic()
            staging = self.lib.with_name(self.lib.name + ".resolving")
            shutil.rmtree(staging, ignore_errors=True)
            self.home.mkdir(parents=True, exist_ok=True)
            scratch = cache_dir() / "tmp"
            scratch.mkdir(parents=True, exist_ok=True)
            module = self.home / "ivy.xml"
            module.write_text(self.ivy_module())
            ivy_home = cache_dir() / "ivy"
            cmd = [
                java(),
                "-XX:-UsePerfData",
                f"-Djava.io.tmpdir={scratch}",
                f"-Divy.default.ivy.user.dir={ivy_home}",
                "-jar",
                str(ivy_jar()),
                "-settings",
                str(IVY_SETTINGS),
                "-cache",
                str(ivy_home / "cache"),
                "-ivy",
                str(module),
                "-confs",
                "default",
                "-retrieve",
                f"{staging}/[organisation]_[artifact]-[revision](-[classifier]).[ext]",
                "-warn",
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=scratch)
            if proc.returncode == 0 and self.archive is not None:
                for archive in sorted(staging.glob("*.tar.gz")):
                    with tarfile.open(archive) as tar:
                        tar.extractall(staging, filter="data")
                    archive.unlink()
            found = sorted(staging.rglob("*.jar")) if staging.is_dir() else []
            if proc.returncode != 0 or not found:
                output = (proc.stdout + proc.stderr).strip().splitlines()[-20:]
                raise BrokerError(
                    f"resolving {self.title} from Maven Central failed "
                    f"(exit {proc.returncode}):\n" + "\n".join(output)
                )
            shutil.rmtree(self.lib, ignore_errors=True)
            self.lib.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(self.lib)
            jars = sorted(self.lib.rglob("*.jar"))
            stamp = self.stamp()
            tmp = stamp.with_suffix(".tmp")
            tmp.write_text("".join(f"{j}\n" for j in jars))
            tmp.replace(stamp)
            log.info(
                "resolved %d jars into %s in %.1f s",
                len(jars),
                self.lib,
                time.monotonic() - started,
            )
            return jars


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def broker_jars() -> MavenJars:
    return MavenJars(
        f"Apache Kafka {KAFKA_VERSION}", "kafka-broker", cache_dir() / KAFKA_VERSION, DEPENDENCIES
    )


def cached_jars() -> list[Path] | None:
    """The broker's jars, if they were resolved for exactly these dependencies."""
    return broker_jars().cached()


def ensure_jars() -> list[Path]:
    """The broker's jars: resolved from Maven Central on first use, then from the cache."""
    return broker_jars().ensure()


# --- files and processes ---------------------------------------------------------------


def broker_home() -> Path:
    return paths()["home"] / "kafka"


def service_files(home: Path, config: str, pid: str, **more: str) -> dict[str, Path]:
    """The files of a JVM service kept in `home`: its `logs/` and `tmp/`, its `config`,
    log4j configuration and `pid` file, and `more` (name: path under `home`)."""
    files = {
        "home": home,
        "logs": home / "logs",
        "tmp": home / "tmp",
        "config": home / config,
        "log4j": home / "log4j.properties",
        "pid": home / pid,
    }
    return {**files, **{name: home / path for name, path in more.items()}}


def _files() -> dict[str, Path]:
    return service_files(broker_home(), "server.properties", "broker.pid", data="data")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _server_properties(port: int, controller_port: int, data: Path) -> str:
    settings = {
        # KRaft combined mode: one process is the broker and the controller quorum.
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        # Loopback only, for clients and the controller alike.
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        # Topics exist because someone created them (create_topics), never by accident.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        # One broker: internal topics with one replica, and small.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "0",
        # A laptop with 2 cores.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "log.cleaner.threads": "1",
        "log.retention.hours": "-1",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def log4j_properties(log_file: Path, header: str, loggers: dict[str, str]) -> str:
    """A log4j 1 configuration (reload4j): warnings and errors into `log_file`, and the
    `loggers` named at their levels."""
    return (
        f"# Written by {header}\n"
        "log4j.rootLogger=WARN, file\n"
        "log4j.appender.file=org.apache.log4j.RollingFileAppender\n"
        f"log4j.appender.file.File={log_file}\n"
        "log4j.appender.file.MaxFileSize=10MB\n"
        "log4j.appender.file.MaxBackupIndex=1\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        + "".join(f"log4j.logger.{name}={level}\n" for name, level in loggers.items())
    )


def _log4j_properties(logs: Path) -> str:
    return log4j_properties(
        logs / "server.log",
        "python_jobs.tools.kafka_broker: warnings and errors only, into one file;\n"
        "# the start and stop lines, so that the log says when the broker ran.",
        {"kafka.server.KafkaRaftServer": "INFO"},
    )


def jvm_command(jars: list[Path], heap: str, logs: Path, tmp: Path, log4j: Path) -> list[str]:
    """`java` with a small heap on `jars`, its crash files in `logs`, its temp files in
    `tmp`, UTC, logging as `log4j` says; the main class and arguments follow."""
    return [
        java(),
        heap,
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:+ExitOnOutOfMemoryError",
        # No /tmp/hsperfdata_* files; crash files stay under the process's own dir.
        "-XX:-UsePerfData",
        f"-XX:ErrorFile={logs / 'hs_err_pid%p.log'}",
        "-Djava.awt.headless=true",
        f"-Djava.io.tmpdir={tmp}",
        "-Duser.timezone=UTC",
        f"-Dlog4j.configuration=file:{log4j}",
        "-cp",
        os.pathsep.join(str(j) for j in jars),
    ]


def _jvm(files: dict[str, Path], heap: str) -> list[str]:
    return jvm_command(ensure_jars(), heap, files["logs"], files["tmp"], files["log4j"])


def _format_storage(files: dict[str, Path]) -> None:
    """Format the KRaft storage once (kept across restarts: topics survive a restart)."""
    if (files["data"] / "meta.properties").exists():
        return
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    cmd = [
        *_jvm(files, "-Xmx256m"),
        STORAGE_TOOL,
        "format",
        # One argument: a random id may start with '-', which argparse would take
        # for an option ("--cluster-id: expected one argument").
        f"--cluster-id={cluster_id}",
        "--config",
        str(files["config"]),
        "--ignore-formatted",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=files["home"])
    if proc.returncode != 0:
        raise BrokerError(
            f"formatting the Kafka storage in {files['data']} failed "
            f"(exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()[-2000:]}"
        )


def read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def is_our_jvm(pid: int, main_class: str, config: Path) -> bool:
    """Whether ``pid`` is a live JVM running ``main_class`` with ``config`` on its command
    line (so not a reused pid)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:  # ours, exited (now reaped)
            _CHILDREN.pop(pid, None)
            return False
        # Started here: its command line is the one we gave. (/proc's is empty for a
        # moment after Popen returns, while the kernel is still loading the new image.)
        return main_class in child.args and str(config) in child.args
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rpartition(")")[2].split()[0] in ("Z", "X"):  # exited, not yet reaped
        return False
    return main_class.encode() in cmdline and str(config).encode() in cmdline


def start_jvm(cmd: list[str], home: Path, output: Path, pidfile: Path) -> int:
    """Starts ``cmd`` detached (its own session: it survives the command that started
    it), its output appended to ``output``; records and returns its pid."""
    with open(output, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    pidfile.write_text(f"{proc.pid}\n")
    return proc.pid


def stop_jvm(pidfile: Path, main_class: str, config: Path, what: str, timeout: float) -> bool:
    """Stops the JVM recorded in ``pidfile`` if it is still ours: SIGTERM, then SIGKILL
    after ``timeout``. Returns whether one was running."""
    pid = read_pid(pidfile)
    if pid is None or not is_our_jvm(pid, main_class, config):
        pidfile.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_our_jvm(pid, main_class, config) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_our_jvm(pid, main_class, config):
        log.warning("%s (pid %d) ignored SIGTERM for %.0f s: killing it", what, pid, timeout)
        os.kill(pid, signal.SIGKILL)
        while is_our_jvm(pid, main_class, config):
            time.sleep(0.05)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()
    pidfile.unlink(missing_ok=True)
    log.info("%s stopped (pid %d)", what, pid)
    return True


def _is_our_broker(pid: int, files: dict[str, Path]) -> bool:
    """Whether ``pid`` is a live broker started with this home's config (not a reused pid)."""
    return is_our_jvm(pid, MAIN_CLASS, files["config"])


def broker_pids() -> list[int]:
    """Every live broker process of this ``LAKEHOUSE_HOME`` (normally none or one)."""
    files = _files()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_our_broker(int(entry.name), files):
            found.append(int(entry.name))
    return sorted(found)


def _config_ports(config: Path) -> tuple[int, int]:
    """(PLAINTEXT port, CONTROLLER port) from a server.properties this module wrote."""
    ports: dict[str, int] = {}
    for line in config.read_text().splitlines():
        if line.startswith("listeners="):
            for listener in line.partition("=")[2].split(","):
                name, _, address = listener.partition("://")
                ports[name] = int(address.rpartition(":")[2])
    return ports["PLAINTEXT"], ports["CONTROLLER"]


def _broker(pid: int, files: dict[str, Path]) -> Broker:
    port, controller_port = _config_ports(files["config"])
    return Broker(
        bootstrap=f"{HOST}:{port}",
        port=port,
        controller_port=controller_port,
        pid=pid,
        home=files["home"],
        data_dir=files["data"],
        log_dir=files["logs"],
    )


def broker_status() -> Broker | None:
    """The broker running for this ``LAKEHOUSE_HOME``, or None."""
    files = _files()
    pid = read_pid(files["pid"])
    if pid is None or not _is_our_broker(pid, files) or not files["config"].exists():
        return None
    return _broker(pid, files)


def tail(paths: list[Path], lines: int, nothing: str) -> str:
    """The last `lines` lines of each of `paths` that has any (for error messages)."""
    parts = []
    for path in paths:
        if path.exists():
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                parts.append(f"--- {path} (last {len(text)} lines)\n" + "\n".join(text))
    return "\n".join(parts) or nothing


def log_tail(lines: int = 40) -> str:
    """The last lines of the broker's log files (for error messages)."""
    logs = _files()["logs"]
    return tail([logs / "server.log", logs / "broker.out"], lines, "(the broker wrote no log)")


def _wait_until_ready(broker: Broker, timeout: float) -> None:
    """Until the broker accepts connections and reports itself in the cluster metadata."""
    from confluent_kafka.admin import AdminClient

    files = _files()
    deadline = time.monotonic() + timeout
    while True:
        if not _is_our_broker(broker.pid, files):
            files["pid"].unlink(missing_ok=True)
            raise BrokerError(f"the Kafka broker exited during start-up\n{log_tail()}")
        if port_open(broker.port):
            admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
            try:
                if admin.list_topics(timeout=5).brokers:
                    return
            except Exception:  # noqa: BLE001 - not ready yet; the deadline decides
                pass
        if time.monotonic() > deadline:
            stop_broker()
            raise BrokerError(
                f"the Kafka broker did not accept connections on {broker.bootstrap} "
                f"within {timeout:.0f} s\n{log_tail()}"
            )
        time.sleep(0.2)


def start_broker(port: int | None = None, timeout: float = START_TIMEOUT_S) -> Broker:
    """Start the broker of this ``LAKEHOUSE_HOME`` (detached) and wait until it serves.

    ``port`` is the PLAINTEXT port (a free one if None); the controller port is always
    chosen free. A broker already running for this home is returned as is when it has
    that port (or any port, if None).
    """
    files = _files()
    running = broker_status()
    if running is not None:
        if port is not None and port != running.port:
            raise BrokerError(
                f"a broker already runs for {files['home']} on {running.bootstrap}, "
                f"not on port {port}: stop it first"
            )
        log.info("Kafka broker already running: pid %d on %s", running.pid, running.bootstrap)
        return running
    files["pid"].unlink(missing_ok=True)
    ensure_jars()
    if port is not None and port_open(port):
        raise BrokerError(f"port {port} on {HOST} is already in use")
    port = port if port is not None else free_port()
    controller_port = free_port()
    while controller_port == port:
        controller_port = free_port()
    for name in ("home", "data", "logs", "tmp"):
        files[name].mkdir(parents=True, exist_ok=True)
    files["config"].write_text(_server_properties(port, controller_port, files["data"]))
    files["log4j"].write_text(_log4j_properties(files["logs"]))
    started = time.monotonic()
    _format_storage(files)
    cmd = [*_jvm(files, HEAP), MAIN_CLASS, str(files["config"])]
    pid = start_jvm(cmd, files["home"], files["logs"] / "broker.out", files["pid"])
    broker = _broker(pid, files)
    _wait_until_ready(broker, timeout)
    log.info(
        "Kafka %s broker started in %.1f s: pid %d on %s",
        KAFKA_VERSION,
        time.monotonic() - started,
        broker.pid,
        broker.bootstrap,
    )
    return broker


def stop_broker(timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the broker of this ``LAKEHOUSE_HOME``: SIGTERM, then SIGKILL after ``timeout``.

    Returns whether a broker was running. Stopping a stopped broker does nothing.
    """
    files = _files()
    return stop_jvm(files["pid"], MAIN_CLASS, files["config"], "the Kafka broker", timeout)


# --- topics ----------------------------------------------------------------------------


def create_topics(
    bootstrap: str, names: Iterable[str], partitions: int, timeout: float = 30.0
) -> list[str]:
    """Create the topics that don't exist yet (one replica each); returns those created."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    wanted = list(dict.fromkeys(names))
    created: list[str] = []
    while True:
        existing = set(admin.list_topics(timeout=timeout).topics)
        missing = [name for name in wanted if name not in existing]
        if not missing:
            return created
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1) for name in missing]
        )
        retry = False
        for name, future in futures.items():
            try:
                future.result(timeout=timeout)
                created.append(name)
            except KafkaException as error:
                code = error.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                # A broker that just started may not be registered with its controller.
                if error.args[0].retriable() and time.monotonic() < deadline:
                    retry = True
                    continue
                raise BrokerError(f"creating topic {name} on {bootstrap}: {error}") from None
        if not retry:
            return created
        time.sleep(0.5)


# --- command line ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.kafka_broker",
        description=(
            f"A single-node Apache Kafka {KAFKA_VERSION} broker (KRaft, broker and "
            "controller in one JVM) on 127.0.0.1, its state under $LAKEHOUSE_HOME/kafka. "
            "The first start resolves the broker's jars from Maven Central into the "
            "virtualenv."
        ),
    )
    parser.add_argument(
        "command",
        choices=("up", "down", "status", "resolve"),
        help="up: start it detached and print the bootstrap servers (a running broker "
        "is kept); down: stop it; status: print whether it runs (exit 1 if not); "
        "resolve: only fetch the jars (nothing to do once cached)",
    )
    parser.add_argument(
        "--port",
        type=int,
        metavar="N",
        help="the PLAINTEXT port for `up` (default: a free port)",
    )
    args = parser.parse_args(argv)
    if args.port is not None and args.command != "up":
        parser.error("--port applies to `up` only")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        if args.command == "up":
            broker = start_broker(args.port)
            print(broker.bootstrap)
            return 0
        if args.command == "resolve":
            jars = ensure_jars()
            print(f"Apache Kafka {KAFKA_VERSION}: {len(jars)} jars in {lib_dir()}")
            return 0
        if args.command == "down":
            if not stop_broker():
                log.info("no Kafka broker running for %s", broker_home())
            return 0
        broker = broker_status()
        if broker is None:
            print(f"not running ({broker_home()})")
            return 1
        print(f"running: pid {broker.pid}, bootstrap {broker.bootstrap}, data {broker.data_dir}")
        return 0
    except BrokerError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
