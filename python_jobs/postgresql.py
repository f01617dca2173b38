"""A PostgreSQL cluster of Debian's `postgresql` package, run here, on loopback.

The piece that the shared catalog (``python_jobs/catalog.py``) and the Debezium source
database of the tests (``tests/e2e/test_debezium_postgres.py``) share: a cluster whose
data directory and log live in a directory of the lakehouse, started with ``pg_ctl``
on 127.0.0.1 only (TCP, no Unix socket), password authentication (SCRAM) for every
connection, and settings rewritten at every start into ``lakehouse.conf`` (included
from ``postgresql.conf``)::

    <home>/postgresql/       the data directory
    <home>/postgresql.log    the server's log

The binaries are the newest of ``/usr/lib/postgresql/<version>/bin`` (``make
postgresql`` installs the package). PostgreSQL refuses to run as root: run as root,
the cluster runs as the package's ``postgres`` OS user, and the directories above it
are made enterable (not listable) by that user.
"""

from __future__ import annotations

import os
import pwd
import socket
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
SERVICE_USER = "postgres"  # the package's OS user, which runs the cluster under root
PG_ROOT = Path("/usr/lib/postgresql")
START_TIMEOUT_S = 60
# Our settings, included from postgresql.conf and rewritten at every start.
CONF_FILE = "lakehouse.conf"


class PostgresError(RuntimeError):
    """A PostgreSQL cluster could not be found, initialized, started, reached or stopped."""


def bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries (Debian's layout)."""
    found = sorted(
        (d for d in PG_ROOT.glob("*/bin") if (d / "initdb").exists()),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if not found:
        raise PostgresError(
            f"PostgreSQL is not installed (no {PG_ROOT}/*/bin/initdb): run `make postgresql`, "
            "which installs Debian's postgresql package, or `apt-get install -y postgresql`"
        )
    return found[-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = HOST, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def as_root() -> bool:
    return os.geteuid() == 0


def _service_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresError(
            f"running as root, but there is no {SERVICE_USER!r} user to run PostgreSQL "
            "(it refuses root): install Debian's postgresql package, or run as another user"
        ) from None


def _owner_command(args: list[str]) -> list[str]:
    """`args` as the user that owns the cluster: this one, or `postgres` under root."""
    if as_root():
        return ["runuser", "-u", SERVICE_USER, "--", *args]
    return args


def _reachable_by_service_user(path: Path) -> None:
    """Let the `postgres` user reach `path` (root only).

    Under root the cluster runs as `postgres`, which must be able to traverse every
    directory above its data directory. A lakehouse home in a temporary directory
    (tempfile.mkdtemp, pytest's tmp_path) sits below directories of mode 0700: those
    get o+x (enter, not list) and nothing else.
    """
    user = _service_user()
    for parent in reversed(path.parents):
        mode = parent.stat().st_mode
        if parent.stat().st_uid != user.pw_uid and not mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _chown_tree(path: Path) -> None:
    """Hand `path` (and what it holds) to the `postgres` user (root only)."""
    user = _service_user()
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(Path(root) / name, user.pw_uid, user.pw_gid)
    os.chown(path, user.pw_uid, user.pw_gid)


@dataclass(frozen=True)
class Cluster:
    """The cluster kept in `home`; `settings` are added to its configuration."""

    home: Path
    superuser: str = "lakehouse"
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def data_dir(self) -> Path:
        return self.home / "postgresql"

    @property
    def log_file(self) -> Path:
        return self.home / "postgresql.log"

    def run(
        self,
        args: list[str],
        what: str,
        env: dict[str, str] | None = None,
        stdin: str | None = None,
    ) -> str:
        """Runs a command in `home` (which the cluster's owner can enter); its stdout."""
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            cwd=self.home,  # root's cwd may be closed to the owner
            env={**os.environ, **(env or {})},
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            output = (proc.stdout + proc.stderr).strip().splitlines()[-10:]
            raise PostgresError(f"{what} failed (exit {proc.returncode}): " + " | ".join(output))
        return proc.stdout

    def prepare_home(self) -> None:
        """Creates `home`, owned by the cluster's user (`postgres` under root)."""
        bin_dir()  # PostgreSQL is installed, before anything is written
        self.home.mkdir(parents=True, exist_ok=True)
        if as_root():
            _reachable_by_service_user(self.home)
            _chown_tree(self.home)

    def write_owned(self, path: Path, text: str, mode: int = 0o600) -> None:
        """Write a file the cluster's owner can read (and no one else)."""
        scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        scratch.write_text(text, encoding="utf-8")
        scratch.chmod(mode)
        if as_root():
            user = _service_user()
            os.chown(scratch, user.pw_uid, user.pw_gid)
        scratch.replace(path)

    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def initdb(self, password: str) -> None:
        """A new data directory whose superuser logs in with `password`."""
        data = self.data_dir
        data.mkdir(mode=0o700)
        if as_root():
            _chown_tree(data)
        pwfile = self.home / ".initdb-password"
        self.write_owned(pwfile, password + "\n")
        try:
            self.run(
                _owner_command(
                    [
                        str(bin_dir() / "initdb"),
                        "--pgdata",
                        str(data),
                        "--username",
                        self.superuser,
                        "--pwfile",
                        str(pwfile),
                        # Password (SCRAM) over TCP, which is all the cluster listens on.
                        "--auth-host",
                        "scram-sha-256",
                        "--auth-local",
                        "scram-sha-256",
                        "--encoding",
                        "UTF8",
                        "--locale",
                        "C",
                        "--no-instructions",
                    ]
                ),
                "initdb",
            )
        finally:
            pwfile.unlink(missing_ok=True)
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write(f"\n# The lakehouse's settings.\ninclude '{CONF_FILE}'\n")

    def is_running(self) -> bool:
        """Whether the cluster is running (`pg_ctl status`)."""
        if not self.initialized():
            return False
        proc = subprocess.run(
            _owner_command([str(bin_dir() / "pg_ctl"), "status", "-D", str(self.data_dir)]),
            capture_output=True,
            text=True,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
        )
        return proc.returncode == 0

    def recorded_port(self) -> int | None:
        """The port of the last start."""
        conf = self.data_dir / CONF_FILE
        if not conf.exists():
            return None
        for line in conf.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "port" and value.strip().isdigit():
                return int(value.strip())
        return None

    def _write_conf(self, port: int) -> None:
        settings = {
            "listen_addresses": f"'{HOST}'",
            "port": str(port),
            # TCP only: a Unix socket path under a deep LAKEHOUSE_HOME would exceed the
            # 107-byte limit, and the default directory belongs to the system.
            "unix_socket_directories": "''",
            "timezone": "'UTC'",
            "log_timezone": "'UTC'",
            **dict(self.settings),
        }
        lines = [f"{key} = {value}" for key, value in settings.items()]
        self.write_owned(
            self.data_dir / CONF_FILE,
            "\n".join(["# Written by python_jobs/postgresql.py at every start.", *lines, ""]),
        )

    def start(self, port: int) -> None:
        """Starts the cluster on 127.0.0.1:`port` and waits until it accepts connections."""
        self._write_conf(port)
        self.run(
            _owner_command(
                [
                    str(bin_dir() / "pg_ctl"),
                    "start",
                    "--pgdata",
                    str(self.data_dir),
                    "--log",
                    str(self.log_file),
                    "--wait",
                    "--timeout",
                    str(START_TIMEOUT_S),
                ]
            ),
            f"starting PostgreSQL (log: {self.log_file})",
        )

    def stop(self) -> bool:
        """Stops the cluster (fast shutdown); False if it was not running."""
        if not self.is_running():
            return False
        self.run(
            _owner_command(
                [
                    str(bin_dir() / "pg_ctl"),
                    "stop",
                    "--pgdata",
                    str(self.data_dir),
                    "--mode",
                    "fast",
                    "--wait",
                    "--timeout",
                    str(START_TIMEOUT_S),
                ]
            ),
            "stopping PostgreSQL",
        )
        return True

    def psql(
        self,
        port: int,
        password: str,
        sql: str,
        database: str = "postgres",
        what: str | None = None,
    ) -> str:
        """Runs `sql` with psql as the superuser, as a script (each statement its own
        transaction unless inside begin/commit; the first error stops it); returns its
        output, rows unaligned without headers."""
        return self.run(
            [
                str(bin_dir() / "psql"),
                "--no-psqlrc",
                "--tuples-only",
                "--no-align",
                "--quiet",
                "--set",
                "ON_ERROR_STOP=1",
                "--host",
                HOST,
                "--port",
                str(port),
                "--username",
                self.superuser,
                "--dbname",
                database,
                "--file",
                "-",
            ],
            what or f"psql ({sql.split()[0]})",
            env={"PGPASSWORD": password, "PGCONNECT_TIMEOUT": "5"},
            stdin=sql,
        ).strip()
