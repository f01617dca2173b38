"""Check a pull request's SQL: lint what changed, then build what changed on production.

    python -m python_jobs.tools.pr_check --base origin/main        # make pr-check BASE=...

1. The SQL files under models/, snapshots/ and tests/data_tests/ that were added or
   modified between BASE and the working tree are linted with sqlfluff (the dbt
   templater, through python_jobs.tools.lint), as GitHub annotations
   (`::error title=SQLFluff,file=...,line=...`). A violation fails the check; nothing
   is built.
2. `dbt build --select state:modified+ --defer --state <production artifacts>` on the
   `ci` target under a schema prefix of its own (`--prefix`, default `pr_<short sha>`,
   `pr_local` with uncommitted changes): the changed nodes and their children are
   built in `<prefix>_silver`, `<prefix>_gold`, `<prefix>_ops`; unmodified parents are
   read from production (silver, gold, ops). The production artifacts are the manifest
   of BASE for the `local` target: BASE is exported with `git archive` into
   $LAKEHOUSE_HOME/tmp and parsed there, unless `--state DIR` names existing ones (the
   target directory of a production run, e.g. $LAKEHOUSE_HOME/dbt/target).

Nothing changed between BASE and the working tree: says so and exits 0. The build's
artifacts (run_results.json) are under $LAKEHOUSE_HOME/dbt/pr-check/<prefix>/target.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from python_jobs.spark import REPO_ROOT, environment, lakehouse_home

# What is linted: the folders the project's lint covers (python_jobs.tools.lint).
SQL_FOLDERS = ("models/", "snapshots/", "tests/data_tests/")

LINT_FORMAT = ["--format", "github-annotation-native", "--annotation-level", "error"]


def git(project_dir: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=project_dir, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise PrCheckError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


class PrCheckError(Exception):
    pass


def default_base(project_dir: Path) -> str:
    """origin/main if the repository has it, else main."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "origin/main"], cwd=project_dir, capture_output=True
    )
    return "origin/main" if found.returncode == 0 else "main"


def changed_files(project_dir: Path, base_sha: str) -> list[str]:
    """Files added or modified (not deleted) between `base_sha` and the working tree,
    untracked ones included; paths relative to the repository."""
    tracked = git(project_dir, "diff", "--name-only", "--no-renames", "--diff-filter=d", base_sha)
    untracked = git(project_dir, "ls-files", "--others", "--exclude-standard")
    return sorted(set(tracked.split()) | set(untracked.split()))


def changed_sql(files: list[str]) -> list[str]:
    return [f for f in files if f.endswith(".sql") and f.startswith(SQL_FOLDERS)]


def default_prefix(project_dir: Path) -> str:
    """`pr_<short sha of HEAD>`, or `pr_local` when the working tree has changes."""
    if git(project_dir, "status", "--porcelain").strip():
        return "pr_local"
    return "pr_" + git(project_dir, "rev-parse", "--short", "HEAD").strip()


def lint(project_dir: Path, files: list[str]) -> int:
    """sqlfluff on `files` (relative to `project_dir`) as annotations; its exit code."""
    from python_jobs.tools import lint as lint_tool

    # The templater resolves the project's `.sqlfluff` (project_dir = .) from the
    # working directory.
    with contextlib.chdir(project_dir):
        return lint_tool.main([*LINT_FORMAT, *files])


def production_state(project_dir: Path, base_sha: str, scratch: Path) -> Path:
    """BASE's manifest for the production target: BASE exported into `scratch` and
    parsed there with `--target local`; returns the directory holding manifest.json."""
    from python_jobs.run_dbt import invoke

    source, state = scratch / "project", scratch / "state"
    shutil.rmtree(scratch, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", base_sha], cwd=project_dir, capture_output=True
    )
    if archive.returncode != 0:
        raise PrCheckError(f"git archive {base_sha}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(source, filter="data")
    print(f"pr-check: parsing {base_sha[:12]} for the production target (local) in {source}")
    result = invoke(
        [
            "parse",
            "--project-dir",
            str(source),
            "--profiles-dir",
            str(source),
            "--target",
            "local",
            "--target-path",
            str(state),
        ]
    )
    shutil.rmtree(source, ignore_errors=True)
    if not result.success:
        raise PrCheckError(f"dbt parse of {base_sha[:12]} failed: {result.exception or ''}")
    return state


def build(project_dir: Path, state: Path, prefix: str, target_path: Path):
    """`dbt build --select state:modified+ --defer` on the `ci` target under `prefix`."""
    from python_jobs.run_dbt import invoke

    with environment(LAKEHOUSE_SCHEMA_PREFIX=prefix):
        return invoke(
            [
                "build",
                "--project-dir",
                str(project_dir),
                "--profiles-dir",
                str(project_dir),
                "--target",
                "ci",
                "--select",
                "state:modified+",
                "--defer",
                "--state",
                str(state),
                "--target-path",
                str(target_path),
            ]
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m python_jobs.tools.pr_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--base", help="the ref the pull request merges into (origin/main, else main)"
    )
    parser.add_argument(
        "--state", type=Path, help="existing production artifacts (a dbt target directory)"
    )
    parser.add_argument("--prefix", help="schema prefix of the build (pr_<short sha>)")
    parser.add_argument(
        "--project-dir", type=Path, default=REPO_ROOT, help="the repository (this one)"
    )
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    project_dir = args.project_dir.resolve()
    base = args.base or default_base(project_dir)
    base_sha = git(project_dir, "rev-parse", "--verify", f"{base}^{{commit}}").strip()
    files = changed_files(project_dir, base_sha)
    if not files:
        print(f"pr-check: nothing changed since {base} ({base_sha[:12]}): nothing to lint or build")
        return 0
    prefix = (args.prefix or default_prefix(project_dir)).lower()
    home = lakehouse_home()
    work = home / "dbt" / "pr-check" / prefix
    # Lint, parse and build keep their artifacts here, never in a production run's
    # target directory (which --state may name).
    with environment(DBT_TARGET_PATH=str(work / "lint"), DBT_LOG_PATH=str(work / "logs")):
        from python_jobs.spark import get_spark

        get_spark()  # the catalog-bound session the build needs; the lint runs on it too
        sql = changed_sql(files)
        if sql:
            print(f"pr-check: linting {len(sql)} changed SQL file(s): {' '.join(sql)}")
            if lint(project_dir, sql) != 0:
                print("pr-check: lint violations (above): nothing built", file=sys.stderr)
                return 1
        else:
            print("pr-check: no changed SQL to lint")
        state = args.state or production_state(
            project_dir, base_sha, home / "tmp" / "pr-check" / base_sha[:12]
        )
        if not (state / "manifest.json").is_file():
            raise PrCheckError(f"--state {state}: no manifest.json there")
        target_path = work / "target"
        shutil.rmtree(target_path, ignore_errors=True)
        print(
            f"pr-check: dbt build --select state:modified+ --defer --state {state} "
            f"(target ci, schemas {prefix}_silver, {prefix}_gold, {prefix}_ops)"
        )
        result = build(project_dir, state, prefix, target_path)
    print(f"pr-check: {'passed' if result.success else 'failed'}; artifacts in {target_path}")
    return 0 if result.success else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from python_jobs.preflight import PreflightError

    try:
        return run(args)
    except (PrCheckError, PreflightError) as error:
        print(f"python -m python_jobs.tools.pr_check: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
