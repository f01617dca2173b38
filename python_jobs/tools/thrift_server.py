"""A Spark Thrift Server with the project's settings, on loopback.

What the `cluster` dbt target talks to, runnable on a laptop: it lets you try the
cluster target (and BI tools that speak HiveServer2) without a cluster. The server owns
the catalog of its `LAKEHOUSE_HOME` (embedded Derby), so run it with a home no other
catalog-bound process is using; the ingestion job can still write Bronze by path. With
the shared catalog (LAKEHOUSE_CATALOG, `make catalog-up`) it shares the catalog with
every other process instead.

    python -m python_jobs.tools.thrift_server --port 10000
    DBT_TARGET=cluster SPARK_THRIFT_PORT=10000 python -m python_jobs.run_dbt build
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pyspark

from python_jobs.spark import ensure_directories, launcher_environment, thrift_server_settings

SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
SPARK_HOME = Path(pyspark.__file__).parent  # pip's pyspark ships bin/spark-submit


def command(
    port: int, host: str = "127.0.0.1", master: str | None = None, ui_port: int | None = None
) -> list[str]:
    """The spark-submit command line that starts the server with every project setting
    (on the cluster at ``master`` if given; with its web UI on ``ui_port`` if given)."""
    args = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER_CLASS]
    for key, value in thrift_server_settings(master, ui_port).items():
        args += ["--conf", f"{key}={value}"]
    args += [
        "spark-internal",
        "--hiveconf",
        f"hive.server2.thrift.port={port}",
        "--hiveconf",
        f"hive.server2.thrift.bind.host={host}",
    ]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.thrift_server",
        description="Start a Spark Thrift Server on loopback with the project's Spark and "
        "Delta settings, for the `cluster` dbt target. Runs until stopped.",
    )
    parser.add_argument("--port", type=int, default=10000, help="port (default 10000)")
    parser.add_argument(
        "--master",
        help="run on this Spark master, e.g. spark://127.0.0.1:7077 (default: "
        "SPARK_MASTER, else local; `make cluster-up` starts one with a server on it)",
    )
    parser.add_argument(
        "--ui-port", type=int, help="serve the web UI and its REST API on this port (default: off)"
    )
    args = parser.parse_args(argv)
    from python_jobs.preflight import check_catalog_usable

    try:
        # The shared catalog (LAKEHOUSE_CATALOG) answers, or the embedded one is free,
        # before the server's JVM starts.
        check_catalog_usable()
        ensure_directories()
        cmd = command(args.port, master=args.master, ui_port=args.ui_port)
    except RuntimeError as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    env = {
        **os.environ,
        **launcher_environment(),
        "SPARK_HOME": str(SPARK_HOME),
    }
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
