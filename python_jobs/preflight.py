"""Checks that run before a JVM starts: what a job needs is there, or one line says what
to start or set.

Each check takes a second at most and writes nothing, so a job that cannot start fails
fast and leaves the lakehouse as it was. :func:`python_jobs.spark.get_spark` runs
:func:`check_session`; the entry points catch :class:`PreflightError` and print its
message as their one line of output.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path


class PreflightError(RuntimeError):
    """A service or lock a job needs is missing; the message says what to do."""


# The lock file Derby holds (a POSIX record lock, as Java's FileChannel.tryLock takes
# on Linux) while a JVM has the embedded database booted.
DERBY_LOCK = "dbex.lck"


def derby_holder(metastore: Path) -> bool:
    """Whether another process has the embedded Derby catalog at `metastore` booted."""
    lock = metastore / DERBY_LOCK
    if not lock.exists():
        return False
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def check_derby(metastore: Path) -> None:
    """The embedded catalog admits one process: refuse to start a second one."""
    if derby_holder(metastore):
        raise PreflightError(
            f"the embedded catalog {metastore} is in use by another process (dbt, the "
            "Thrift server, docs or the report): wait for it to finish, or use a shared "
            "catalog (make catalog-up, then set LAKEHOUSE_CATALOG)"
        )


CATALOG_ENV = "LAKEHOUSE_CATALOG"


def check_session(catalog: bool) -> None:
    """Every check a new SparkSession needs (called by get_spark before the JVM starts)."""
    check_master(os.environ.get("SPARK_MASTER", "local[*]"))
    if catalog:
        check_catalog_usable()
    else:
        check_catalog(probe=False)


def check_catalog_usable() -> None:
    """The catalog a process is about to bind: the shared one answers, or the embedded
    one is not held by another process."""
    from python_jobs.spark import paths, shared_catalog

    check_catalog(probe=True)
    if not shared_catalog():
        check_derby(paths()["metastore"])


def check_catalog(probe: bool = True) -> None:
    """The shared catalog (LAKEHOUSE_CATALOG, python_jobs/catalog.py), if one is set: a
    well-formed URL, the JDBC driver cached and, with ``probe``, a PostgreSQL that
    answers, accepts the login and has the database (a login over PostgreSQL's own
    protocol, in a second at most: Spark's metastore client retries for minutes)."""
    from python_jobs import catalog as shared
    from python_jobs.spark import (
        POSTGRESQL_JAR_PREFIX,
        CatalogSettingError,
        cached_jars,
        catalog_url,
        parse_catalog_url,
    )

    url = catalog_url()
    if url is None:
        return
    try:
        target = parse_catalog_url(url)
    except CatalogSettingError as error:
        raise PreflightError(str(error)) from None
    if not probe:
        return
    if not any(Path(j).name.startswith(POSTGRESQL_JAR_PREFIX) for j in cached_jars() or []):
        raise PreflightError(
            "the PostgreSQL JDBC driver of the shared catalog is not cached yet: run "
            "`make setup` (or unset LAKEHOUSE_CATALOG for the embedded catalog)"
        )
    try:
        shared.probe(target, timeout=CONNECT_TIMEOUT_S)
    except shared.ProbeError as error:
        where = f"the catalog {target.redacted} ({CATALOG_ENV})"
        if error.reason == "unreachable":
            todo = "start it with `make catalog-up`, or fix LAKEHOUSE_CATALOG"
        elif error.reason == "database":
            todo = "fix DBNAME in LAKEHOUSE_CATALOG (`make catalog-up` prints the URL)"
        elif error.reason == "login":
            todo = "fix USER:PASSWORD in LAKEHOUSE_CATALOG (`make catalog-up` prints the URL)"
        else:
            todo = "point LAKEHOUSE_CATALOG at a PostgreSQL (`make catalog-up` starts one)"
        raise PreflightError(f"{where}: {error}: {todo}") from None


# How long a check waits for a service to accept a TCP connection.
CONNECT_TIMEOUT_S = 2.0


def answers(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (within ``timeout``)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """``spark://h:p`` (or ``spark://h1:p1,h2:p2``, masters with standby) as addresses."""
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise PreflightError(
                f"SPARK_MASTER={master} is not a Spark master URL: set it to "
                "spark://host:port, or unset it to run locally"
            )
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def check_master(master: str) -> None:
    """A Spark standalone master (``spark://...``) must answer before a driver starts
    (Spark itself would retry for a minute). Local masters need nothing."""
    if not master.startswith("spark://"):
        return
    if not any(answers(host, port) for host, port in _master_addresses(master)):
        raise PreflightError(
            f"the Spark master at {master} does not answer: start it with "
            "`make cluster-up`, or unset SPARK_MASTER to run locally"
        )


def check_thrift(host: str, port: int) -> None:
    """The Thrift server of the `cluster` dbt target must answer before dbt connects."""
    if not answers(host, port):
        raise PreflightError(
            f"the Thrift server at {host}:{port} does not answer: start it with "
            "`make cluster-up` or set SPARK_THRIFT_HOST/SPARK_THRIFT_PORT"
        )
