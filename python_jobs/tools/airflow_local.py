"""Airflow for this lakehouse, on this machine: the project's DAG, run by a real Airflow.

Runs the `airflow` command of `.venv-airflow` (`make airflow` installs the pinned
Airflow there, in its own virtualenv so its pins don't fight dbt's) with:

- `AIRFLOW_HOME=$LAKEHOUSE_HOME/airflow`: its configuration, SQLite metadata DB and task
  logs live under the lakehouse home, like everything else;
- the dags folder `orchestration/airflow/dags` (the `lakehouse` DAG), no example DAGs;
- the DAG's Variables as environment variables (`AIRFLOW_VAR_LAKEHOUSE_PROJECT_DIR`,
  `AIRFLOW_VAR_LAKEHOUSE_HOME`) pointing at this repository and this home, unless set.

The metadata DB is created (`airflow db migrate`) before the first command, and again
when the pinned Airflow changes. No Airflow server is started: `airflow dags test` runs
a DAG run in its own process, tasks one after another.

    python -m python_jobs.tools.airflow_local dags test lakehouse 2024-10-07T01:00:00
    python -m python_jobs.tools.airflow_local dags list-import-errors
    make dag-test DAG_DATE=2024-10-07T01:00:00
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from python_jobs.spark import REPO_ROOT, lakehouse_home

AIRFLOW_DIR = REPO_ROOT / "orchestration" / "airflow"
DAGS_FOLDER = AIRFLOW_DIR / "dags"
REQUIREMENTS = AIRFLOW_DIR / "requirements.txt"
VENV = REPO_ROOT / ".venv-airflow"
DAG_ID = "lakehouse"


class AirflowMissing(RuntimeError):
    """`.venv-airflow` is not installed."""


def airflow_command() -> Path:
    command = VENV / "bin" / "airflow"
    if not command.exists():
        raise AirflowMissing(f"Airflow is not installed at {VENV}: run `make airflow` first")
    return command


def airflow_env(home: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an `airflow` command for the lakehouse at `home`."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "AIRFLOW_HOME": str(home / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__USAGE_DATA_COLLECTION__ENABLED": "False",
            "DO_NOT_TRACK": "1",
            "LAKEHOUSE_HOME": str(home),
        }
    )
    env.setdefault("AIRFLOW_VAR_LAKEHOUSE_PROJECT_DIR", str(REPO_ROOT))
    env.setdefault("AIRFLOW_VAR_LAKEHOUSE_HOME", str(home))
    return env


def run_airflow(args: list[str], env: dict[str, str], **kwargs) -> subprocess.CompletedProcess[str]:
    """`airflow ARGS` in `env` (see airflow_env), from the repository."""
    return subprocess.run([str(airflow_command()), *args], cwd=REPO_ROOT, env=env, **kwargs)


def ensure_database(env: dict[str, str]) -> None:
    """`airflow db migrate` once per pinned Airflow (a stamp beside the DB)."""
    airflow_home = Path(env["AIRFLOW_HOME"])
    stamp = airflow_home / ".migrated"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return
    airflow_home.mkdir(parents=True, exist_ok=True)
    proc = run_airflow(["db", "migrate"], env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"airflow db migrate failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    stamp.write_text(wanted)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    env = airflow_env(lakehouse_home())
    try:
        ensure_database(env)
        return run_airflow(args, env).returncode
    except (AirflowMissing, RuntimeError) as error:
        print(f"python -m python_jobs.tools.airflow_local: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
