"""The documentation names only what exists: documents, links, make targets, modules, paths.

The documents are README.md, docs/*.md and bench/README.md. README.md links every other
one; every relative link in them resolves to a file or directory of the repository
(anchors are not checked); every `make <target>` in their code (inline or fenced) is a
target of the Makefile; every `python -m <module>` is a module of the repository or one
of the tools the virtualenv installs; every inline-code path into the repository
(`models/...`, `macros/...`, `tests/...`, `python_jobs/...`, `bench/...`, `docs/...`,
`snapshots/...`, `seeds/...`) exists, except a file a guide asks you to create, which it
names as "new file `path`" (fenced code blocks are not read for paths). Pure Python: no
Spark, no dbt.

Each checker is a function from a document's text to the names it gets wrong, so a
fabricated document shows that it can fail.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
DOCUMENTS = [README, *sorted((REPO_ROOT / "docs").glob("*.md")), REPO_ROOT / "bench" / "README.md"]

# Top-level folders whose paths a document may name in inline code.
REPO_PREFIXES = ("models", "macros", "tests", "python_jobs", "bench", "docs", "snapshots", "seeds")
# `python -m` modules that come from the virtualenv or the standard library, not the repo.
EXTERNAL_MODULES = {"pytest", "pip", "venv", "http.server", "sqlfluff", "ruff"}

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
_MAKE = re.compile(r"(?:^|[\s;&|(])make\s+(.+)")
_PYTHON_M = re.compile(r"\bpython(?:3(?:\.\d+)?)?\s+-m\s+([A-Za-z_][\w.]*)")
_PLACEHOLDER = re.compile(r"[<>{}*$]|\.\.\.")
_MAKE_RULE = re.compile(r"^([^\s#:=][^:=]*?)\s*::?(?!=)")
_SHELL_COMMENT = re.compile(r"(?:^|\s)#")
_NEW_FILE = re.compile(r"\bnew files?:?\s*$", re.I)


def fenced_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks."""
    return [m.group(0) for m in _FENCE.finditer(text)]


def inline_code(text: str, new_files: bool = True) -> list[str]:
    """The inline code spans outside fenced blocks; without those a guide introduces as
    "new file `...`" when `new_files` is false."""
    prose = _FENCE.sub("", text)
    return [
        m.group(2).strip()
        for m in _INLINE.finditer(prose)
        if new_files or not _NEW_FILE.search(prose[max(0, m.start() - 20) : m.start()])
    ]


def code_lines(text: str) -> list[str]:
    """Every line of code: the fenced blocks' lines and each inline span."""
    lines = [line for block in fenced_blocks(text) for line in block.splitlines()]
    return lines + inline_code(text)


def link_targets(text: str) -> list[str]:
    """Relative link targets (Markdown inline and reference links outside code), without
    their anchors; external and anchor-only links are left out."""
    prose = _INLINE.sub("", _FENCE.sub("", text))
    targets = [m.group(1) for m in _LINK.finditer(prose)] + _REFERENCE.findall(prose)
    relative = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue
        relative.append(target.split("#", 1)[0])
    return relative


def missing_links(document: Path, text: str) -> list[str]:
    """Relative links of `document` that resolve to nothing in the repository."""
    return [
        target
        for target in link_targets(text)
        if not (document.parent / target).exists()
        or not (document.parent / target).resolve().is_relative_to(REPO_ROOT)
    ]


def make_targets(makefile: str) -> set[str]:
    """The targets the Makefile defines (rule lines, not recipes or assignments)."""
    targets: set[str] = set()
    for line in makefile.splitlines():
        match = _MAKE_RULE.match(line)
        if match:
            targets.update(match.group(1).split())
    return targets


def named_make_targets(text: str) -> list[str]:
    """The first target named after each `make` in the document's code, in order:
    `make build DBT_ARGS="..."` names `build`; variables, options and shell comments are
    skipped."""
    named = []
    for line in code_lines(text):
        for match in _MAKE.finditer(line):
            if _SHELL_COMMENT.search(line[: match.start() + 1]):
                continue  # `make` inside a shell comment
            rest = match.group(1)
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:  # an unbalanced quote in a span: the first word decides
                words = rest.split()[:1]
            for word in words:
                if word in (";", "&&", "||", "|", ")") or word.startswith(("#", "`")):
                    break
                if "=" in word or word.startswith("-"):
                    continue
                if re.fullmatch(r"[A-Za-z0-9_.-]+", word):
                    named.append(word)
                break  # the first target decides (what follows may be prose, as in a picture)
    return named


def missing_make_targets(text: str, targets: set[str]) -> list[str]:
    return [name for name in named_make_targets(text) if name not in targets]


def named_modules(text: str) -> list[str]:
    """The modules named by `python -m <module>` anywhere in the document."""
    return [module.rstrip(".") for module in _PYTHON_M.findall(text)]


def module_exists(module: str) -> bool:
    """A module of the repository (a `.py` file, or a package with `__main__.py`), or
    one of the tools the virtualenv installs."""
    if module in EXTERNAL_MODULES:
        return True
    path = REPO_ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__main__.py").is_file()


def missing_modules(text: str) -> list[str]:
    return [module for module in named_modules(text) if not module_exists(module)]


def repo_paths(text: str) -> list[str]:
    """Words of inline code that look like paths into the repository."""
    found = []
    for span in inline_code(text, new_files=False):
        for word in span.split():
            word = word.strip("'\"(),;")
            word = re.sub(r"::.*$|:\d+$", "", word)  # a pytest node id, a line number
            if word.split("/", 1)[0] in REPO_PREFIXES and "/" in word:
                found.append(word)
    return found


def path_exists(path: str) -> bool:
    """The path exists; with a placeholder (`<source>`, `*`, `...`), its fixed folders do
    and, for a glob, something matches."""
    if not _PLACEHOLDER.search(path):
        return (REPO_ROOT / path).exists()
    if "*" in path and not re.search(r"[<>{}$]|\.\.\.", path):
        return any(REPO_ROOT.glob(path.rstrip("/")))
    fixed = path[: _PLACEHOLDER.search(path).start()].rsplit("/", 1)[0]
    return (REPO_ROOT / fixed).is_dir()


def missing_paths(text: str) -> list[str]:
    return [path for path in repo_paths(text) if not path_exists(path)]


def _name(document: Path) -> str:
    return str(document.relative_to(REPO_ROOT))


# ------------------------------------------------------------------ the documents


def test_readme_links_every_document() -> None:
    linked = {(README.parent / target).resolve() for target in link_targets(README.read_text())}
    unlinked = [_name(d) for d in DOCUMENTS[1:] if d.resolve() not in linked]
    assert unlinked == [], f"README.md does not link {unlinked}"


def test_the_readme_stays_a_page() -> None:
    assert len(README.read_text().splitlines()) <= 200


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_relative_links_resolve(document: Path) -> None:
    assert missing_links(document, document.read_text()) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_make_targets_exist(document: Path) -> None:
    targets = make_targets((REPO_ROOT / "Makefile").read_text())
    assert missing_make_targets(document.read_text(), targets) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_python_modules_exist(document: Path) -> None:
    assert missing_modules(document.read_text()) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=_name)
def test_repository_paths_exist(document: Path) -> None:
    assert missing_paths(document.read_text()) == []


# ------------------------------------------------------------- the checkers can fail

FABRICATED = """# A document that names what does not exist

See [the guide](docs/missing-guide.md#steps), [operations](docs/operations.md#settings),
[the site](https://example.com/x.md) and [above](#a-document).

```bash
make build DBT_ARGS="--select users --vars '{a: 1}'"   # exists
make deploy-everything LAKEHOUSE_HOME=/tmp/x
python -m python_jobs.no_such_job --help
.venv/bin/python -m pytest -q tests/project
cat > models/silver/new_model.sql   # a file the guide creates: not checked
```

Run `make frobnicate`, `make demo`, `python -m python_jobs.run` and
`python -m bench.bench_nothing`; read `models/silver/users.sql`,
`macros/cdc/no_such_macro.sql`, `tests/project/test_docs.py::test_x`,
`models/staging/<source>/stg_<source>__<entity>`, `models/nowhere/<x>.sql`,
`docs/*.md` and `seeds/` (`$LAKEHOUSE_HOME/landing` is not in the repository). Add the
new file `models/silver/no_such_model.sql`, then `models/silver/no_such_model.yml`.
"""


def test_the_checkers_return_exactly_the_bad_names() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert missing_links(README, FABRICATED) == ["docs/missing-guide.md"]
    assert missing_make_targets(FABRICATED, make_targets(makefile)) == [
        "deploy-everything",
        "frobnicate",
    ]
    assert missing_modules(FABRICATED) == ["python_jobs.no_such_job", "bench.bench_nothing"]
    assert missing_paths(FABRICATED) == [
        "macros/cdc/no_such_macro.sql",
        "models/nowhere/<x>.sql",
        "seeds/",
        "models/silver/no_such_model.yml",
    ]


def test_the_makefile_parser_reads_rules_not_assignments() -> None:
    makefile = "A := 1\nB ?= $(shell x)\n.PHONY: a b\na b: c | d\n\techo $(A): done\n$(X): y\n"
    assert make_targets(makefile) == {".PHONY", "a", "b", "$(X)"}
    assert {"demo", "test", "build", "maintain"} <= make_targets(
        (REPO_ROOT / "Makefile").read_text()
    )
