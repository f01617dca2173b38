"""Run `sqlfluff` on the project's SQL with the dbt templater, in-process.

sqlfluff's dbt templater compiles models through dbt-spark, which needs a SparkSession:
this entry point builds one with :func:`python_jobs.spark.get_spark` first (otherwise
dbt-spark would start a bare session with default settings and write a Derby catalog
into the working directory). Linting only compiles, so the session is catalog-free:
it never touches, or waits for, the lakehouse's catalog.

    python -m python_jobs.tools.lint [sqlfluff lint arguments]   # default: models snapshots tests
"""

from __future__ import annotations

import sys

from python_jobs.run_dbt import configure_environment
from python_jobs.spark import REPO_ROOT

DEFAULT_PATHS = ("models", "snapshots", "tests/data_tests")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if not args:
        args = [p for p in DEFAULT_PATHS if (REPO_ROOT / p).is_dir()]
    configure_environment()
    from sqlfluff.cli.commands import cli

    from python_jobs.spark import get_spark

    get_spark(catalog=False)
    try:
        cli.main(args=["lint", *args], prog_name="sqlfluff", standalone_mode=False)
    except SystemExit as exc:  # click exits with the lint result
        return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
