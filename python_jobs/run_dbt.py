"""Run dbt in-process on the project's SparkSession.

dbt-spark's `session` method picks up the active SparkSession of the process, so this
entry point builds it first with :func:`python_jobs.spark.get_spark` (every Spark and
Delta setting in one place), makes sure every Bronze table exists, then hands the
command line to dbt:

    python -m python_jobs.run_dbt build --vars '{execution_time: "2024-10-07T00:00:00"}'

With the `cluster` target (`DBT_TARGET=cluster` or `--target cluster`) no local session
is started: dbt talks to the Thrift server. dbt's target and log directories go under
``$LAKEHOUSE_HOME/dbt`` so that nothing is written outside the lakehouse home.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

from python_jobs.spark import REPO_ROOT, lakehouse_home, paths, pii_salt


def configure_environment() -> None:
    """Point dbt at this project and keep everything it writes under LAKEHOUSE_HOME."""
    home = lakehouse_home()
    os.environ["LAKEHOUSE_HOME"] = str(home)  # absolute: dbt stores Bronze locations
    # This project and its profiles, whatever a user's ~/.dbt or environment says.
    os.environ["DBT_PROJECT_DIR"] = str(REPO_ROOT)
    os.environ["DBT_PROFILES_DIR"] = str(REPO_ROOT)
    os.environ.setdefault("DBT_TARGET_PATH", str(home / "dbt" / "target"))
    os.environ.setdefault("DBT_LOG_PATH", str(home / "dbt" / "logs"))
    os.environ["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    os.environ["DO_NOT_TRACK"] = "1"
    # The landing directories dbt reads in place (full loads): present, even empty.
    paths()["devices_loads"].mkdir(parents=True, exist_ok=True)
    # pseudonymize checks at compile time that a salt is configured (the SQL reads it
    # from the session's conf, python_jobs/spark.py).
    os.environ["LAKEHOUSE_PII_SALT"] = pii_salt()


def named_target(args: list[str]) -> str | None:
    """The dbt target a command line names (`--target X`, `-t X`), else None."""
    for i, arg in enumerate(args):
        if arg in ("--target", "-t") and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--target="):
            return arg.split("=", 1)[1]
    return None


def target_of(args: list[str]) -> str:
    """The dbt target a command line selects (`--target X`, `-t X`, or DBT_TARGET)."""
    return named_target(args) or os.environ.get("DBT_TARGET", "local")


# Targets that run dbt in this process on the embedded session (profiles.yml); any
# other (`cluster`) talks to a Thrift server.
SESSION_TARGETS = ("local", "dev", "ci")

# dbt commands that run no query: no session to start (a parse takes seconds, not a
# JVM start; tests/project/test_project_rules.py parses this way).
SESSIONLESS_COMMANDS = ("parse", "ls", "list")


def check_target(target: str, command: str | None = None) -> None:
    """Before anything is written: the `cluster` target's Thrift server must answer
    (dbt would retry for half a minute before failing)."""
    if target == "cluster" and command not in SESSIONLESS_COMMANDS:
        from python_jobs.preflight import check_thrift

        check_thrift(
            os.environ.get("SPARK_THRIFT_HOST", "localhost"),
            int(os.environ.get("SPARK_THRIFT_PORT", "10000")),
        )


def prepare_session(target: str, command: str | None = None) -> None:
    """For the embedded targets: start the catalog-bound session and create any Bronze
    table not yet ingested (a topic with no files yet still has its empty table); with
    the shared catalog also registered there, since dbt's on-run-start then leaves the
    registration to the ingestion job (macros/utils/register_ingestion_tables.sql)."""
    if target not in SESSION_TARGETS or command in SESSIONLESS_COMMANDS:
        return
    from python_jobs import bronze
    from python_jobs.spark import get_spark
    from python_jobs.topics import load_topics

    bronze.ensure_tables(get_spark(), load_topics())


_dbt_import: threading.Thread | None = None


def start_dbt_import() -> None:
    """Import dbt on a thread of its own while this process starts its JVM.

    Importing dbt is about 4 s of Python on this project's machine, and starting the
    session about 4 s of mostly waiting for the JVM: side by side, a new process that
    runs dbt starts about 3 s sooner (docs/operations.md). Call it before the session
    starts; `invoke` waits for the import. The modules the session's start imports are
    imported first, so the two threads never wait on each other's modules.
    """
    global _dbt_import
    if _dbt_import is not None or "dbt.cli.main" in sys.modules:
        return
    from python_jobs import bronze, topics  # noqa: F401 (imported before the thread)

    _dbt_import = threading.Thread(target=_import_dbt, name="import-dbt", daemon=True)
    _dbt_import.start()


def _import_dbt() -> None:
    try:
        importlib.import_module("dbt.cli.main")
    except BaseException:  # noqa: BLE001 (the caller's own import raises it again)
        pass


# Vars that change from one run to the next, and the environment variables that carry
# them instead: `execution_time` (the windowed materializations, macros/windows/
# _window_runs.sql, read it at run time only) and the devices load a snapshot takes
# (python_jobs/snapshot_loads.py; snapshots/devices_history.sql reads it while dbt
# parses too, and dbt re-parses just that file when the variable changes).
ENV_VARS = {
    "execution_time": "LAKEHOUSE_EXECUTION_TIME",
    "devices_load_date": "LAKEHOUSE_DEVICES_LOAD_DATE",
    "snapshot_time": "LAKEHOUSE_SNAPSHOT_TIME",
}


def split_env_vars(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`args` without the vars of ENV_VARS, and their values by environment variable.

    dbt parses the whole project again whenever its `--vars` change (about 3 s here,
    5-6 s in a new process), and every run has a new execution time (every snapshot of
    a load, a new load day). So `invoke` hands those vars over in environment
    variables, and dbt keeps its parse from one run to the next. Any other var stays.
    An empty value is passed as empty, which the macros read as the var absent.
    """
    import yaml

    for i, arg in enumerate(args):
        if arg == "--vars" and i + 1 < len(args):
            text, rest = args[i + 1], args[:i] + args[i + 2 :]
        elif arg.startswith("--vars="):
            text, rest = arg.split("=", 1)[1], args[:i] + args[i + 1 :]
        else:
            continue
        try:
            variables = yaml.safe_load(text)
        except yaml.YAMLError:
            return args, {}  # dbt says what is wrong with it
        if not isinstance(variables, dict) or not set(variables) & set(ENV_VARS):
            return args, {}
        values = {
            ENV_VARS[name]: "" if value is None else str(value)
            for name in ENV_VARS
            if name in variables
            for value in [variables.pop(name)]
        }
        if variables:
            rest = [*rest, "--vars", yaml.safe_dump(variables, default_flow_style=True)]
        return rest, values
    return args, {}


def invoke(args: list[str]):
    """Run one dbt command in this process; returns dbt's `dbtRunnerResult`."""
    start_dbt_import()
    check_target(target_of(args), args[0] if args else None)
    configure_environment()
    prepare_session(target_of(args), args[0] if args else None)
    if _dbt_import is not None:
        _dbt_import.join()
    from dbt.cli.main import dbtRunner

    args, values = split_env_vars(args)
    # Only this command's: a variable set by hand or left by an earlier command is not.
    before = {name: os.environ.pop(name, None) for name in ENV_VARS.values()}
    os.environ.update(values)
    try:
        return dbtRunner().invoke(args)
    finally:
        for name, value in before.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    from python_jobs.preflight import PreflightError

    try:
        result = invoke(args)
    except PreflightError as error:
        print(f"python -m python_jobs.run_dbt: error: {error}", file=sys.stderr)
        return 1
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
