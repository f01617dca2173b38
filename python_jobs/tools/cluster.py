"""A Spark standalone cluster on loopback, with a Spark Thrift Server running on it.

Spark's own daemons from the pyspark install (``<pyspark>/bin/spark-class``): one
master and two workers of one core each, bound to 127.0.0.1 only, and a Thrift server
(HiveServer2, what the `cluster` dbt target talks to) that runs *on* that cluster: its
driver is a local process, its executors run on the workers. Every setting of the
applications is in ``python_jobs/spark.py``; everything these processes write is under
``$LAKEHOUSE_HOME/cluster``::

    cluster.env   SPARK_MASTER, CLUSTER_UI_URL, SPARK_THRIFT_HOST/PORT, THRIFT_UI_URL
    pids/         master.pid, worker-1.pid, worker-2.pid, thrift-server.pid
    logs/         each process's output (<name>.out)
    work/         the workers' directories: each executor's stdout/stderr, its jars
    local/        the workers' (and their executors') scratch space
    tmp/          the daemons' temp dir (java.io.tmpdir)
    conf/         an empty SPARK_CONF_DIR (nothing outside the project configures them)

    python -m python_jobs.tools.cluster up       # prints the master URL and thrift host:port
    python -m python_jobs.tools.cluster status   # exit 1 if not (all) running
    python -m python_jobs.tools.cluster down      # stops everything (nothing to do if down)

Ports, each also an option of `up` (0 picks a free port): CLUSTER_PORT (master, 7077),
CLUSTER_UI_PORT (master web UI, 8080), THRIFT_PORT (10000), THRIFT_UI_PORT (the Thrift
server's web UI and REST API, 4040). CLUSTER_WORKER_MEMORY sizes each worker (1g).

Jobs run on the cluster with ``SPARK_MASTER=spark://127.0.0.1:7077`` (see cluster.env),
e.g. ``SPARK_MASTER=spark://127.0.0.1:7077 python -m python_jobs.ingest --once``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from python_jobs import preflight
from python_jobs.spark import (
    cluster_daemon_java_options,
    ensure_directories,
    launcher_environment,
    paths,
)
from python_jobs.tools import thrift_server

log = logging.getLogger("cluster")

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKERS = 2
WORKER_CORES = 1
DAEMON_MEMORY = "512m"  # the master's and workers' own heaps (executors are separate)
DEFAULT_PORTS = {"port": 7077, "ui_port": 8080, "thrift_port": 10000, "thrift_ui_port": 4040}
PORT_VARIABLES = {
    "port": "CLUSTER_PORT",
    "ui_port": "CLUSTER_UI_PORT",
    "thrift_port": "THRIFT_PORT",
    "thrift_ui_port": "THRIFT_UI_PORT",
}
START_TIMEOUT_S = 120.0
THRIFT_START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 60.0

# Processes this interpreter started, so that stopping one also reaps it.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ClusterError(RuntimeError):
    """The cluster could not be started, reached or stopped."""


@dataclass(frozen=True)
class Cluster:
    """The running cluster of this ``LAKEHOUSE_HOME``, as recorded in cluster.env."""

    master_url: str  # spark://127.0.0.1:<port>
    ui_url: str  # http://127.0.0.1:<ui port>
    thrift_host: str
    thrift_port: int
    thrift_ui_url: str

    def environment(self) -> dict[str, str]:
        return {
            "SPARK_MASTER": self.master_url,
            "CLUSTER_UI_URL": self.ui_url,
            "SPARK_THRIFT_HOST": self.thrift_host,
            "SPARK_THRIFT_PORT": str(self.thrift_port),
            "THRIFT_UI_URL": self.thrift_ui_url,
        }


# --- files and processes ---------------------------------------------------------------


def cluster_home() -> Path:
    return paths()["home"] / "cluster"


def _files() -> dict[str, Path]:
    home = cluster_home()
    return {name: home / name for name in ("pids", "logs", "work", "local", "tmp", "conf")} | {
        "home": home,
        "env": home / "cluster.env",
    }


def process_names() -> list[str]:
    return ["master", *(f"worker-{n}" for n in range(1, WORKERS + 1)), "thrift-server"]


def _main_class(name: str) -> str:
    if name == "master":
        return MASTER_CLASS
    if name == "thrift-server":
        return thrift_server.SERVER_CLASS
    return WORKER_CLASS


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _cmdline(pid: int) -> list[bytes] | None:
    """The command line of a live (not zombie) process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
        return None
    return cmdline


def _is_ours(pid: int, name: str) -> bool:
    """Whether ``pid`` is this home's process ``name`` (not a reused pid)."""
    child = _CHILDREN.get(pid)
    if child is not None:  # started by this process (still a launcher script, maybe)
        if child.poll() is None:
            return True
        _CHILDREN.pop(pid, None)
        return False
    cmdline = _cmdline(pid)
    if cmdline is None:
        return False
    home = str(paths()["home"]).encode()
    return _main_class(name).encode() in cmdline and any(home in arg for arg in cmdline)


def _pid(name: str) -> int | None:
    """The pid of this home's process ``name`` if it runs."""
    try:
        pid = int((_files()["pids"] / f"{name}.pid").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_ours(pid, name) else None


def executor_pids() -> list[int]:
    """Executors the workers of this home started (normally stopped with their worker)."""
    marker = str(paths()["home"]).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        cmdline = _cmdline(int(entry.name))
        if (
            cmdline
            and b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline
            and any(marker in arg for arg in cmdline)
        ):
            found.append(int(entry.name))
    return found


def _spawn(name: str, cmd: list[str], env: dict[str, str]) -> int:
    files = _files()
    with open(files["logs"] / f"{name}.out", "ab") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=files["home"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the command that started it
        )
    _CHILDREN[proc.pid] = proc
    (files["pids"] / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def _stop(name: str, timeout: float = STOP_TIMEOUT_S) -> bool:
    """SIGTERM, then SIGKILL after ``timeout``; whether the process was running."""
    pid = _pid(name)
    (_files()["pids"] / f"{name}.pid").unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _is_ours(pid, name) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _is_ours(pid, name):
        log.warning("%s (pid %d) ignored SIGTERM for %.0f s: killing it", name, pid, timeout)
        os.kill(pid, signal.SIGKILL)
        while _is_ours(pid, name):
            time.sleep(0.05)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()
    log.info("%s stopped (pid %d)", name, pid)
    return True


def log_tail(name: str, lines: int = 30) -> str:
    path = _files()["logs"] / f"{name}.out"
    if not path.exists():
        return f"({path} does not exist)"
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return f"--- {path} (last {len(text)} lines)\n" + "\n".join(text)


# --- status ----------------------------------------------------------------------------


def get_json(url: str, timeout: float = 5.0) -> dict | list:
    """A JSON document from a web UI on loopback."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def master_state(ui_url: str) -> dict | None:
    """The master's own status (``/json/``): workers, applications; None if unreachable."""
    try:
        state = get_json(f"{ui_url}/json/")
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return state if isinstance(state, dict) else None


def _read_env() -> dict[str, str]:
    env_file = _files()["env"]
    if not env_file.exists():
        return {}
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def _cluster_from_env(values: dict[str, str]) -> Cluster:
    return Cluster(
        master_url=values["SPARK_MASTER"],
        ui_url=values["CLUSTER_UI_URL"],
        thrift_host=values["SPARK_THRIFT_HOST"],
        thrift_port=int(values["SPARK_THRIFT_PORT"]),
        thrift_ui_url=values["THRIFT_UI_URL"],
    )


def running() -> dict[str, int]:
    """This home's cluster processes that run, by name."""
    pids = {name: _pid(name) for name in process_names()}
    return {name: pid for name, pid in pids.items() if pid is not None}


def cluster_status() -> Cluster | None:
    """The cluster of this ``LAKEHOUSE_HOME`` if every process runs, else None."""
    values = _read_env()
    if set(running()) != set(process_names()) or not values:
        return None
    return _cluster_from_env(values)


# --- up and down -----------------------------------------------------------------------


def _choose_port(name: str, value: int | None) -> int:
    """The port for ``name``: the option, else its variable, else the default; 0 = free."""
    variable = PORT_VARIABLES[name]
    if value is None:
        raw = os.environ.get(variable, "")
        if raw and not raw.isdigit():
            raise ClusterError(f"{variable}={raw} is not a port number: set it to a number")
        value = int(raw) if raw else DEFAULT_PORTS[name]
    if value == 0:
        return free_port()
    if preflight.answers(HOST, value, timeout=0.5):
        raise ClusterError(
            f"port {value} on {HOST} is already in use: set {variable} to another port "
            "(0 picks a free one)"
        )
    return value


@contextmanager
def _without(variable: str) -> Iterator[None]:
    saved = os.environ.pop(variable, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[variable] = saved


def _daemon_environment(files: dict[str, Path]) -> dict[str, str]:
    env = {
        **os.environ,
        **launcher_environment(),
        "SPARK_HOME": str(thrift_server.SPARK_HOME),
        "SPARK_CONF_DIR": str(files["conf"]),
        "SPARK_LOG_DIR": str(files["logs"]),
        "SPARK_PID_DIR": str(files["pids"]),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_JAVA_OPTS": cluster_daemon_java_options(),
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        # The executors' Python workers (PySpark) are this virtualenv's.
        "PYSPARK_PYTHON": sys.executable,
        "TZ": "UTC",
    }
    env.pop("SPARK_MASTER", None)
    return env


def _wait(what: str, name: str, ready, timeout: float) -> None:
    """Until ``ready()``; fails with the process's log if it exits or time runs out."""
    deadline = time.monotonic() + timeout
    while not ready():
        if _pid(name) is None:
            raise ClusterError(f"the {what} exited during start-up\n{log_tail(name)}")
        if time.monotonic() > deadline:
            raise ClusterError(f"the {what} was not ready within {timeout:.0f} s\n{log_tail(name)}")
        time.sleep(0.5)


def _alive_workers(ui_url: str) -> int:
    state = master_state(ui_url)
    if state is None:
        return 0
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def start_cluster(
    port: int | None = None,
    ui_port: int | None = None,
    thrift_port: int | None = None,
    thrift_ui_port: int | None = None,
) -> Cluster:
    """Start the master, the workers and the Thrift server of this ``LAKEHOUSE_HOME``
    (detached), wait until each serves, and record the addresses in cluster.env.

    A cluster already running for this home is returned as it is; a partly running one
    is stopped first.
    """
    current = cluster_status()
    if current is not None:
        log.info("the cluster already runs: %s", current.master_url)
        return current
    if running():
        log.info("a partly running cluster: stopping it first")
        stop_cluster()
    # The Thrift server takes the catalog: fail now, in one line, if it cannot.
    with _without("SPARK_MASTER"):
        preflight.check_session(catalog=True)
    ports = {
        "port": _choose_port("port", port),
        "ui_port": _choose_port("ui_port", ui_port),
        "thrift_port": _choose_port("thrift_port", thrift_port),
        "thrift_ui_port": _choose_port("thrift_ui_port", thrift_ui_port),
    }
    if len(set(ports.values())) != len(ports):
        raise ClusterError(f"the cluster's ports must differ: {ports}")
    files = _files()
    ensure_directories()
    for name in ("home", "pids", "logs", "work", "local", "tmp", "conf"):
        files[name].mkdir(parents=True, exist_ok=True)
    files["env"].unlink(missing_ok=True)
    started = time.monotonic()
    spark_class = str(thrift_server.SPARK_HOME / "bin" / "spark-class")
    env = _daemon_environment(files)
    master_url = f"spark://{HOST}:{ports['port']}"
    ui_url = f"http://{HOST}:{ports['ui_port']}"
    try:
        _spawn(
            "master",
            [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(ports["port"]),
             "--webui-port", str(ports["ui_port"])],
            env,
        )  # fmt: skip
        _wait("Spark master", "master", lambda: master_state(ui_url) is not None, START_TIMEOUT_S)
        for number in range(1, WORKERS + 1):
            name = f"worker-{number}"
            work, local = files["work"] / name, files["local"] / name
            work.mkdir(exist_ok=True)
            local.mkdir(exist_ok=True)
            worker_env = {**env, "SPARK_WORKER_DIR": str(work), "SPARK_LOCAL_DIRS": str(local)}
            _spawn(
                name,
                [spark_class, WORKER_CLASS, master_url, "--host", HOST, "--port", "0",
                 "--webui-port", str(free_port()), "--cores", str(WORKER_CORES),
                 "--memory", os.environ.get("CLUSTER_WORKER_MEMORY", "1g"),
                 "--work-dir", str(work)],
                worker_env,
            )  # fmt: skip
        _wait(
            f"{WORKERS} Spark workers",
            "worker-1",
            lambda: _alive_workers(ui_url) >= WORKERS,
            START_TIMEOUT_S,
        )
        thrift_cmd = thrift_server.command(
            ports["thrift_port"], HOST, master=master_url, ui_port=ports["thrift_ui_port"]
        )
        _spawn("thrift-server", thrift_cmd, env)
        _wait(
            "Thrift server",
            "thrift-server",
            lambda: preflight.answers(HOST, ports["thrift_port"], timeout=0.5),
            THRIFT_START_TIMEOUT_S,
        )
    except BaseException:
        stop_cluster()
        raise
    cluster = Cluster(
        master_url=master_url,
        ui_url=ui_url,
        thrift_host=HOST,
        thrift_port=ports["thrift_port"],
        thrift_ui_url=f"http://{HOST}:{ports['thrift_ui_port']}",
    )
    scratch = files["env"].with_suffix(".tmp")
    scratch.write_text("".join(f"{k}={v}\n" for k, v in cluster.environment().items()))
    scratch.replace(files["env"])
    log.info("cluster up in %.1f s", time.monotonic() - started)
    return cluster


def stop_cluster() -> bool:
    """Stop the Thrift server, the workers (and their executors) and the master of this
    ``LAKEHOUSE_HOME``. Returns whether anything was running; stopping twice is fine."""
    stopped = False
    for name in reversed(process_names()):  # the server, then the workers, the master
        stopped = _stop(name) or stopped
    for pid in executor_pids():  # a worker that was killed leaves its executors behind
        log.warning("stopping an executor left behind (pid %d)", pid)
        os.kill(pid, signal.SIGKILL)
        stopped = True
    _files()["env"].unlink(missing_ok=True)
    return stopped


# --- command line ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.cluster",
        description=(
            f"A Spark standalone cluster on {HOST}: a master, {WORKERS} workers of "
            f"{WORKER_CORES} core each, and a Spark Thrift Server running on it (the "
            "`cluster` dbt target), their state under $LAKEHOUSE_HOME/cluster."
        ),
    )
    parser.add_argument(
        "command",
        choices=("up", "down", "status"),
        help="up: start it detached, print the master URL and the Thrift host:port (a "
        "running cluster is kept); down: stop it; status: print it (exit 1 if not running)",
    )
    for name, variable in PORT_VARIABLES.items():
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            metavar="N",
            help=f"for `up`: default ${variable}, else {DEFAULT_PORTS[name]}; 0: a free port",
        )
    args = parser.parse_args(argv)
    ports = {name: getattr(args, name) for name in PORT_VARIABLES}
    if args.command != "up" and any(value is not None for value in ports.values()):
        parser.error("the port options apply to `up` only")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    try:
        if args.command == "up":
            cluster = start_cluster(**ports)
            print(f"master: {cluster.master_url} (web UI {cluster.ui_url})")
            print(f"thrift: {cluster.thrift_host}:{cluster.thrift_port}")
            print(f"settings: {_files()['env']}")
            return 0
        if args.command == "down":
            if not stop_cluster():
                log.info("no cluster running for %s", cluster_home())
            return 0
        cluster = cluster_status()
        if cluster is None:
            print(f"not running ({cluster_home()}; running: {sorted(running()) or 'nothing'})")
            return 1
        print(
            f"running: master {cluster.master_url}, web UI {cluster.ui_url}, "
            f"thrift {cluster.thrift_host}:{cluster.thrift_port}, "
            f"alive workers {_alive_workers(cluster.ui_url)}"
        )
        return 0
    except (ClusterError, preflight.PreflightError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
