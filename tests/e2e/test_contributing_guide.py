"""docs/contributing.md followed literally on a copy of the repository, and built.

Every fenced block of the guide carries an HTML comment (invisible once rendered) that
says what a reader does with it: `<!-- apply: new PATH -->` writes the block as a new
file, `<!-- apply: after "LINE" in PATH -->` inserts it after the item that starts at
the line containing LINE (the item's more-indented lines included), `<!-- apply: append
to PATH -->` appends it, `<!-- apply: run -->` runs its commands, `<!-- apply: no (why)
-->` leaves it. The blocks are applied in the guide's order to a copy of the
repository's tracked files (the working tree's, so the test reads the docs as they
are), whose `.lakehouse` is the suite's own home. Commands run in-process on the
suite's session: `make ingest` is `python_jobs.ingest.run` with the copy's topic
registry, `make build DBT_ARGS=...` is dbt on the copy (`--project-dir`), `pytest
tests/project` is the project rules on the copy's manifest; other shell lines (landing
a file) run in bash in the copy. Then the rows the guide promises are checked exactly.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT
from python_jobs.tools import project_rules
from tests.helpers import bronze_records, copy_tracked_files, dbt_on_project, reset_lakehouse

GUIDE = REPO_ROOT / "docs" / "contributing.md"

_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*apply:\s*(?P<action>.*?)\s*-->\n"
    r"(?P=indent)(?P<fence>`{3,})[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
_FENCE = re.compile(r"^[ \t]*(`{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_AFTER = re.compile(r"""after (?P<q>["'])(?P<anchor>.+?)(?P=q) in (?P<path>\S+)""")
# What a `run` block may say, besides the shell lines that land a file.
_COMMAND = re.compile(r"^(make |\.venv/bin/python )")


def guide_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block of the guide as (action, body without the list indent)."""
    blocks = []
    for match in _BLOCK.finditer(text):
        indent = match["indent"]
        lines = [line.removeprefix(indent) for line in match["body"].splitlines(keepends=True)]
        blocks.append((match["action"], "".join(lines)))
    return blocks


def unmarked_blocks(text: str) -> int:
    """Fenced blocks without an `apply` comment (each must say what a reader does)."""
    return len(_FENCE.findall(text)) - len(_BLOCK.findall(text))


def insert_after(text: str, anchor: str, block: str) -> str:
    """`text` with `block` inserted after the item starting at the line holding `anchor`:
    the following lines indented deeper than that line (or blank) belong to the item."""
    lines = text.splitlines(keepends=True)
    (start,) = [i for i, line in enumerate(lines) if anchor in line]
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > depth
    ):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "".join(lines[:end]) + block + "".join(lines[end:])


class Reader:
    """Follows the guide on the copy at `project`, on the suite's session."""

    def __init__(self, project: Path, work: Path, spark) -> None:
        self.project = project
        self.work = work
        self.spark = spark
        self.commands: list[str] = []

    def apply(self, action: str, body: str) -> None:
        if action.startswith("no"):
            return
        if action.startswith("new "):
            path = self.project / action.removeprefix("new ").strip()
            assert not path.exists(), f"the guide's new file {path} exists already"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        elif action.startswith("append to "):
            path = self.project / action.removeprefix("append to ").strip()
            path.write_text(path.read_text().rstrip("\n") + "\n\n" + body)
        elif match := _AFTER.fullmatch(action):
            path = self.project / match["path"]
            path.write_text(insert_after(path.read_text(), match["anchor"], body))
        elif action == "run":
            self.run(body)
        else:
            raise AssertionError(f"unknown apply comment in the guide: {action!r}")

    def run(self, body: str) -> None:
        shell: list[str] = []
        for line in body.splitlines(keepends=True):
            command = line.split("  #", 1)[0].strip()
            if _COMMAND.match(command):
                self.shell(shell)
                shell = []
                self.command(command)
            else:
                shell.append(line)
        self.shell(shell)

    def shell(self, lines: list[str]) -> None:
        if "".join(lines).strip():
            subprocess.run(["bash", "-euc", "".join(lines)], cwd=self.project, check=True)

    def command(self, command: str) -> None:
        self.commands.append(command)
        words = shlex.split(command)
        if words[:2] == ["make", "ingest"]:
            from python_jobs import ingest
            from python_jobs.topics import load_topics

            ingest.run(ingest.IngestOptions(), load_topics(self.project / "topics.yml"))
        elif words[:2] == ["make", "build"]:
            dbt_args = [w.removeprefix("DBT_ARGS=") for w in words[2:] if "DBT_ARGS=" in w]
            self.dbt("build", *shlex.split(dbt_args[0]) if dbt_args else [])
        elif words[:2] == ["make", "docs"]:
            pass  # the lineage site (tests/e2e/test_docs_site.py); one process here
        elif words[1:] == ["-m", "pytest", "-q", "tests/project"]:
            self.check_rules()
        elif words[1] == "-c":
            exec(words[2], {})  # a query on the session, shown
        else:
            raise AssertionError(f"the test does not know how to run {command!r}")

    def dbt(self, *args: str):
        return dbt_on_project(self.project, self.work, *args)

    def check_rules(self) -> None:
        self.dbt("parse", "--no-partial-parse")
        manifest = json.loads((self.work / "target" / "manifest.json").read_text())
        broken = {name: rule(manifest) for name, rule in project_rules.RULES.items()}
        assert {name: v for name, v in broken.items() if v} == {}


@pytest.fixture()
def scratch_project(tmp_path: Path, lakehouse_home: Path) -> Path:
    project = tmp_path / "project"
    copy_tracked_files(project)
    (project / ".lakehouse").symlink_to(lakehouse_home)
    return project


def test_every_block_of_the_guide_says_what_to_do_with_it() -> None:
    text = GUIDE.read_text()
    assert unmarked_blocks(text) == 0
    assert unmarked_blocks(text + "\n```bash\nmake demo\n```\n") == 1


def test_insert_after_keeps_the_item_whole() -> None:
    text = "a:\n  - name: x\n    b: 1\n\n  - name: y\n    c: 2\nd: 3\n"
    assert insert_after(text, "- name: y", "  - name: z\n") == (
        "a:\n  - name: x\n    b: 1\n\n  - name: y\n    c: 2\n  - name: z\nd: 3\n"
    )


def test_the_guide_followed_literally_builds(spark, clean_lakehouse, scratch_project, tmp_path):
    # The guide starts from the demo's lakehouse: what its gold step joins exists.
    reader = Reader(scratch_project, tmp_path / "dbt", spark)
    try:
        reader.dbt("run", "--select", "+dim_articles")
        for action, body in guide_blocks(GUIDE.read_text()):
            reader.apply(action, body)

        assert reader.commands == [
            "make ingest",
            'make build DBT_ARGS="--select stg_blog__comments"',
            ".venv/bin/python -m pytest -q tests/project",
            'make build DBT_ARGS="--select +comments"',
            '.venv/bin/python -c "from python_jobs.spark import get_spark; '
            "get_spark().sql('select comment_id, body from silver.comments').show()\"",
            'make build DBT_ARGS="--select fct_comments"',
            ".venv/bin/python -m pytest -q tests/project",
            "make docs",
            'make build DBT_ARGS="--select stg_blog__comments"',
            'make build DBT_ARGS="--select fct_comments"',
        ]
        assert len(bronze_records(spark, "blog_public_comments")) == 3
        rows = spark.sql("select comment_id, body from silver.comments").collect()
        assert [tuple(r) for r in rows] == [(2, "Thanks")]
        deleted = spark.sql("select comment_id from silver.comments__tombstones").collect()
        assert [tuple(r) for r in deleted] == [(1,)]
        gold = spark.sql(
            "select comment_id, article_id, user_id, cast(created_at as string),"
            " article_version_key, article_category, cast(comment_date as string)"
            " from gold.fct_comments"
        ).collect()
        assert [tuple(r) for r in gold] == [
            (2, 1, 2, "2024-10-01 01:00:00", None, None, "2024-10-01")
        ]
    finally:
        reset_lakehouse(spark)
