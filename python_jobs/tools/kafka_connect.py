"""A Kafka Connect worker on loopback running Debezium's PostgreSQL connector.

Kafka Connect in standalone mode (one JVM, offsets in a file) from the Kafka release of
the project's broker (``python_jobs/tools/kafka_broker.py``), with the Debezium
PostgreSQL connector as Debezium publishes it for Kafka Connect: the plugin archive
``io.debezium:debezium-connector-postgres:<version>:plugin@tar.gz`` from Maven Central,
unpacked into a plugin directory. Both are resolved once by the Ivy that pyspark ships
into the virtualenv (``<venv>/kafka/connect-<kafka version>/lib``,
``<venv>/debezium/<version>/plugins``); later starts resolve nothing. The worker's REST
API listens on 127.0.0.1 only. Everything it writes is under ``$LAKEHOUSE_HOME/connect``::

    worker.properties  log4j.properties  worker.pid  offsets (the source offsets)
    connectors/        one <name>.properties per connector
    logs/              connect.log (warnings, errors, Debezium's progress), worker.out
    tmp/               the JVM's temp dir

    python -m python_jobs.tools.kafka_connect up --bootstrap-servers HOST:PORT \\
        --connector users.properties [--connector ...] [--port N]
    python -m python_jobs.tools.kafka_connect status
    python -m python_jobs.tools.kafka_connect down
    python -m python_jobs.tools.kafka_connect resolve   # only fetch the jars

`up` returns once every connector and its task run (not once a snapshot is done: watch
the topics for that). docs/operations.md ("Your own PostgreSQL and Debezium") has the
connector configuration the project expects.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from python_jobs.spark import paths
from python_jobs.tools.kafka_broker import (
    HOST,
    KAFKA_VERSION,
    BrokerError,
    MavenJars,
    cache_dir,
    free_port,
    is_our_jvm,
    jvm_command,
    log4j_properties,
    port_open,
    read_pid,
    service_files,
    start_jvm,
    stop_jvm,
    tail,
)

log = logging.getLogger("kafka_connect")

# The release built for Kafka 3.9 (its Connect API: version.kafka 3.9.0) and Java 17.
DEBEZIUM_VERSION = "3.1.3.Final"
CONNECT_DEPENDENCIES = (
    ("org.apache.kafka", "connect-runtime", KAFKA_VERSION),
    ("org.apache.kafka", "connect-json", KAFKA_VERSION),
    # As for the broker: Kafka's distribution ships this logging backend.
    ("org.slf4j", "slf4j-reload4j", "1.7.36"),
    ("ch.qos.reload4j", "reload4j", "1.2.25"),
)
PLUGINS = (("io.debezium", "debezium-connector-postgres", DEBEZIUM_VERSION),)
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
HEAP = "-Xmx384m"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


class ConnectError(BrokerError):
    """The worker could not be resolved, started, reached or stopped, or a connector failed."""


@dataclass(frozen=True)
class Worker:
    """A running Connect worker of this ``LAKEHOUSE_HOME``."""

    rest: str  # "http://127.0.0.1:<port>"
    port: int
    pid: int
    home: Path  # $LAKEHOUSE_HOME/connect


def connect_jars() -> MavenJars:
    """Kafka Connect's runtime and the JSON converter, of the broker's Kafka release."""
    return MavenJars(
        f"Kafka Connect {KAFKA_VERSION}",
        "kafka-connect",
        cache_dir() / f"connect-{KAFKA_VERSION}",
        CONNECT_DEPENDENCIES,
    )


def debezium_plugins() -> MavenJars:
    """Debezium's PostgreSQL connector, as its Kafka Connect plugin archive."""
    return MavenJars(
        f"the Debezium {DEBEZIUM_VERSION} PostgreSQL connector",
        "debezium-plugins",
        Path(sys.prefix) / "debezium" / DEBEZIUM_VERSION,
        PLUGINS,
        lib_name="plugins",
        archive="plugin",
    )


def ensure_jars() -> tuple[list[Path], Path]:
    """The worker's class path and its plugin path, resolved on first use."""
    jars = connect_jars().ensure()
    plugins = debezium_plugins()
    plugins.ensure()
    return jars, plugins.lib


# --- files and processes ---------------------------------------------------------------


def connect_home() -> Path:
    return paths()["home"] / "connect"


def _files() -> dict[str, Path]:
    home = connect_home()
    return service_files(
        home, "worker.properties", "worker.pid", connectors="connectors", offsets="offsets"
    )


def properties(settings: Mapping[str, str]) -> str:
    """A Java properties file of `settings` (values are written as given)."""
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _worker_properties(bootstrap: str, port: int, plugin_path: Path, offsets: Path) -> str:
    return properties(
        {
            "bootstrap.servers": bootstrap,
            # Each connector names its converters (docs/operations.md); these are the
            # defaults for one that does not.
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "offset.storage.file.filename": str(offsets),
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(plugin_path),
            # Plugins are found by their ServiceLoader manifests (Debezium's jars and
            # Kafka's have them), not by scanning every class: a faster start.
            "plugin.discovery": "service_load",
            "listeners": f"http://{HOST}:{port}",
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(port),
        }
    )


def _log4j_properties(logs: Path) -> str:
    return log4j_properties(
        logs / "connect.log",
        "python_jobs.tools.kafka_connect: warnings and errors, and Debezium's\n"
        "# progress (snapshot, streaming), into one file.",
        {"io.debezium": "INFO"},
    )


def _config_port(config: Path) -> int:
    for line in config.read_text().splitlines():
        if line.startswith("rest.advertised.port="):
            return int(line.partition("=")[2])
    raise ConnectError(f"no rest.advertised.port in {config}")


def worker_status() -> Worker | None:
    """The worker running for this ``LAKEHOUSE_HOME``, or None."""
    files = _files()
    pid = read_pid(files["pid"])
    if pid is None or not is_our_jvm(pid, MAIN_CLASS, files["config"]):
        return None
    port = _config_port(files["config"])
    return Worker(f"http://{HOST}:{port}", port, pid, files["home"])


def log_tail(lines: int = 40) -> str:
    """The last lines of the worker's log files (for error messages)."""
    logs = _files()["logs"]
    return tail([logs / "connect.log", logs / "worker.out"], lines, "(the worker wrote no log)")


def startup_errors(log: Path, since: int = 0) -> list[str]:
    """Why a standalone worker refused its connectors at start-up, from its log after
    byte `since`: each `Failed to create connector for .../<name>.properties` with the
    configuration errors Connect lists after it (a refused login, a missing table)."""
    if not log.exists():
        return []
    with log.open("rb") as handle:
        handle.seek(since)
        text = handle.read().decode(errors="replace")
    found: list[str] = []
    name, listing = None, False
    for line in text.splitlines():
        if "Failed to create connector for " in line:
            name = Path(line.split("Failed to create connector for ")[1].split()[0]).stem
        elif "contains the following" in line and "error(s):" in line:
            listing = True
        elif listing and (line.startswith("You can also find") or line.startswith("\tat ")):
            listing = False
        elif listing and line.strip():
            error = f"connector {name}: {line.strip()}"
            if error not in found:
                found.append(error)
    return found


def rest(worker: Worker, path: str, timeout: float = 5.0) -> object:
    """GET `path` of the worker's REST API, decoded from JSON."""
    with urllib.request.urlopen(worker.rest + path, timeout=timeout) as response:
        return json.loads(response.read().decode())


def connector_states(worker: Worker) -> dict[str, dict]:
    """Each connector's status as the REST API gives it (`connector`, `tasks`)."""
    expanded = rest(worker, "/connectors?expand=status")
    assert isinstance(expanded, dict)
    return {name: entry["status"] for name, entry in expanded.items()}


def _failures(states: Mapping[str, dict]) -> list[str]:
    failed = []
    for name, status in states.items():
        for part in [status["connector"], *status["tasks"]]:
            if part["state"] == "FAILED":
                trace = (part.get("trace") or "").strip().splitlines()[:15]
                failed.append(f"{name} ({part.get('id', 'connector')}): " + "\n".join(trace))
    return failed


def _running(states: Mapping[str, dict], names: list[str]) -> bool:
    return all(
        name in states
        and states[name]["connector"]["state"] == "RUNNING"
        and states[name]["tasks"]
        and all(task["state"] == "RUNNING" for task in states[name]["tasks"])
        for name in names
    )


def _wait_until_running(worker: Worker, names: list[str], timeout: float, since: int) -> None:
    """Until the REST API answers and every connector and each of its tasks runs; a
    connector or task that fails, or a worker that exits, fails at once with why (the
    worker's log read from byte `since`, where this start began)."""
    files = _files()
    deadline = time.monotonic() + timeout
    states: dict[str, dict] = {}
    while True:
        if not is_our_jvm(worker.pid, MAIN_CLASS, files["config"]):
            files["pid"].unlink(missing_ok=True)
            refused = startup_errors(files["logs"] / "connect.log", since)
            if refused:
                raise ConnectError(
                    "the Kafka Connect worker exited during start-up: "
                    + "; ".join(refused)
                    + f" (log: {files['logs'] / 'connect.log'})"
                )
            raise ConnectError(f"the Kafka Connect worker exited during start-up\n{log_tail()}")
        if port_open(worker.port):
            try:
                states = connector_states(worker)
            except (OSError, urllib.error.URLError, ValueError):
                states = {}  # not serving yet; the deadline decides
            failed = _failures(states)
            if failed:
                stop_worker()
                raise ConnectError("connectors failed:\n" + "\n".join(failed))
            if _running(states, names):
                return
        if time.monotonic() > deadline:
            stop_worker()
            raise ConnectError(
                f"the connectors {names} were not running within {timeout:.0f} s "
                f"(last states: {states})\n{log_tail()}"
            )
        time.sleep(0.5)


def start_worker(
    bootstrap: str,
    connectors: Mapping[str, Mapping[str, str]],
    port: int | None = None,
    timeout: float = START_TIMEOUT_S,
) -> Worker:
    """Start a standalone worker for this ``LAKEHOUSE_HOME`` (detached) with
    `connectors` (name -> configuration, `name` added), and wait until they all run.

    The offsets file is kept across starts, so a connector that ran before resumes
    where it stopped. A worker already running is refused: stop it first.
    """
    files = _files()
    running = worker_status()
    if running is not None:
        raise ConnectError(
            f"a Kafka Connect worker already runs for {files['home']} (pid {running.pid}, "
            f"{running.rest}): stop it first"
        )
    if not connectors:
        raise ConnectError("no connector to run")
    files["pid"].unlink(missing_ok=True)
    jars, plugin_path = ensure_jars()
    if port is not None and port_open(port):
        raise ConnectError(f"port {port} on {HOST} is already in use")
    port = port if port is not None else free_port()
    for name in ("home", "connectors", "logs", "tmp"):
        files[name].mkdir(parents=True, exist_ok=True)
    files["config"].write_text(_worker_properties(bootstrap, port, plugin_path, files["offsets"]))
    files["log4j"].write_text(_log4j_properties(files["logs"]))
    connector_files = []
    for name, settings in connectors.items():
        path = files["connectors"] / f"{name}.properties"
        path.write_text(properties({"name": name, **settings}))
        path.chmod(0o600)  # it holds the database password
        connector_files.append(str(path))
    log_file = files["logs"] / "connect.log"
    since = log_file.stat().st_size if log_file.exists() else 0
    started = time.monotonic()
    cmd = [
        *jvm_command(jars, HEAP, files["logs"], files["tmp"], files["log4j"]),
        MAIN_CLASS,
        str(files["config"]),
        *connector_files,
    ]
    pid = start_jvm(cmd, files["home"], files["logs"] / "worker.out", files["pid"])
    worker = Worker(f"http://{HOST}:{port}", port, pid, files["home"])
    _wait_until_running(worker, list(connectors), timeout, since)
    log.info(
        "Kafka Connect %s worker started in %.1f s: pid %d, %s, connectors %s",
        KAFKA_VERSION,
        time.monotonic() - started,
        pid,
        worker.rest,
        ", ".join(connectors),
    )
    return worker


def stop_worker(timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop the worker of this ``LAKEHOUSE_HOME`` (SIGTERM: its connectors stop and
    commit their offsets; SIGKILL after ``timeout``). Returns whether one was running."""
    files = _files()
    return stop_jvm(files["pid"], MAIN_CLASS, files["config"], "the Kafka Connect worker", timeout)


def parse_properties(text: str) -> dict[str, str]:
    """A connector's properties (`key=value` lines; `#` and `!` start comments)."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConnectError(f"not a key=value line: {line!r}")
        settings[key.strip()] = value.strip()
    return settings


def read_properties(path: Path) -> dict[str, str]:
    """A connector's `.properties` file."""
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except ConnectError as error:
        raise ConnectError(f"{path}: {error}") from None


# --- command line ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.kafka_connect",
        description=(
            f"A Kafka Connect {KAFKA_VERSION} worker (standalone) on 127.0.0.1 with the "
            f"Debezium {DEBEZIUM_VERSION} PostgreSQL connector, its state under "
            "$LAKEHOUSE_HOME/connect. The first start resolves the jars from Maven "
            "Central into the virtualenv."
        ),
    )
    parser.add_argument(
        "command",
        choices=("up", "down", "status", "resolve"),
        help="up: start it detached with the --connector files, wait until they run; "
        "down: stop it; status: each connector's state (exit 1 if no worker runs); "
        "resolve: only fetch the jars (nothing to do once cached)",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="up: the Kafka brokers (default: $KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--connector",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="up: a connector's .properties (its `name` inside); repeatable",
    )
    parser.add_argument("--port", type=int, metavar="N", help="up: the REST port (default: free)")
    args = parser.parse_args(argv)
    if args.command != "up" and (args.connector or args.port is not None):
        parser.error("--connector and --port apply to `up` only")
    if args.command == "up" and not (args.bootstrap_servers and args.connector):
        parser.error("up needs --bootstrap-servers (or $KAFKA_BOOTSTRAP_SERVERS) and --connector")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        if args.command == "resolve":
            jars, plugin_path = ensure_jars()
            print(
                f"Kafka Connect {KAFKA_VERSION}: {len(jars)} jars; Debezium "
                f"{DEBEZIUM_VERSION} PostgreSQL connector in {plugin_path}"
            )
        elif args.command == "up":
            connectors = {}
            for path in args.connector:
                settings = read_properties(path)
                if "name" not in settings:
                    raise ConnectError(f"{path}: no `name`")
                connectors[settings.pop("name")] = settings
            worker = start_worker(args.bootstrap_servers, connectors, args.port)
            print(worker.rest)
        elif args.command == "down":
            if not stop_worker():
                log.info("no Kafka Connect worker running for %s", connect_home())
        else:
            worker = worker_status()
            if worker is None:
                print(f"not running ({connect_home()})")
                return 1
            print(f"running: pid {worker.pid}, {worker.rest}")
            for name, status in connector_states(worker).items():
                tasks = ", ".join(f"task {t['id']} {t['state']}" for t in status["tasks"])
                print(f"  {name}: {status['connector']['state']}; {tasks or 'no task'}")
        return 0
    except BrokerError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
