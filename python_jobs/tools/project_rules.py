"""The project's rules, checked on dbt's manifest (`target/manifest.json` after `dbt parse`).

Each rule is a function from the manifest (a dict) to a list of violation messages; each
message names the node and what to fix. `tests/project/test_project_rules.py` parses the
project and asserts that every rule returns nothing, and breaks each rule on a copy of
the manifest to prove that it can fail. The rules are listed in the README and described
in docs/contributing.md ("The project rules"); docs/reviewing.md has the house style
they come from.

Only the project's own resources are checked (package `lakehouse`), not dbt's or an
adapter's macros.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath

PROJECT = "lakehouse"
GOLD_SCHEMA = "gold"
# Schemas whose models must enumerate their columns (no `select *` from a ref/source).
ENUMERATED_SCHEMAS = ("silver", "gold")
MART_PREFIXES = ("dim_", "fct_", "agg_")
LAYER_PREFIXES = ("stg_", "int_", *MART_PREFIXES)
ADAPTERS = ("default", "spark")
PSEUDONYMIZE = "pseudonymize"

Manifest = dict
Rule = Callable[[Manifest], list[str]]


# --------------------------------------------------------------------------- helpers


def _own(resources: dict) -> list[dict]:
    return [r for r in resources.values() if r.get("package_name") == PROJECT]


def _models(manifest: Manifest) -> list[dict]:
    return [n for n in _own(manifest["nodes"]) if n["resource_type"] == "model"]


def _models_and_snapshots(manifest: Manifest) -> list[dict]:
    return [n for n in _own(manifest["nodes"]) if n["resource_type"] in ("model", "snapshot")]


def _label(node: dict) -> str:
    return f"{node['resource_type']} {node['name']} ({node['original_file_path']})"


def _is_gold(node: dict) -> bool:
    return node["resource_type"] == "model" and node.get("schema") == GOLD_SCHEMA


def _is_ephemeral(node: dict) -> bool:
    return node.get("config", {}).get("materialized") == "ephemeral"


def _patch_file(node: dict) -> str | None:
    patch = node.get("patch_path")
    return patch.split("://", 1)[1] if patch else None


def _column_meta(column: dict) -> dict:
    return {**(column.get("meta") or {}), **((column.get("config") or {}).get("meta") or {})}


def _column_tags(column: dict) -> set[str]:
    return {*(column.get("tags") or []), *((column.get("config") or {}).get("tags") or [])}


def _is_pii(column: dict) -> bool:
    return bool(_column_meta(column).get("pii")) or "pii" in _column_tags(column)


def pii_columns(node: dict) -> set[str]:
    """The columns a model, snapshot or source declares as PII (`meta: {pii: true}` or
    the tag `pii`, at the column or under its `config`)."""
    return {name for name, column in (node.get("columns") or {}).items() if _is_pii(column)}


# ----------------------------------------------------------------- SQL, approximately

_JINJA_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_REF = re.compile(r"\{\{-?\s*ref\(\s*(?:['\"]\w+['\"]\s*,\s*)?['\"](\w+)['\"]\s*\)\s*-?\}\}")
_SOURCE = re.compile(r"\{\{-?\s*source\(\s*['\"](\w+)['\"]\s*,\s*['\"](\w+)['\"]\s*\)\s*-?\}\}")
_JINJA_EXPR = re.compile(r"\{\{.*?\}\}", re.S)
_JINJA_TAG = re.compile(r"\{%.*?%\}", re.S)
_SQL_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'")
_CTE = re.compile(r"\b(\w+)\s+as\s*\(", re.I)
_CLAUSE_END = re.compile(
    r"\b(where|group|having|order|limit|union|intersect|except|window|cluster|distribute|sort)\b",
    re.I,
)


def _clean_sql(raw: str) -> str:
    """Raw code as plain SQL: refs and sources as placeholders (`__ref__x`,
    `__source__a__b`), other Jinja expressions as `__jinja__`, Jinja tags, comments and
    string contents removed. The text of every `{% if %}` branch stays."""
    sql = _JINJA_COMMENT.sub(" ", raw)
    sql = _REF.sub(lambda m: f"__ref__{m.group(1)}", sql)
    sql = _SOURCE.sub(lambda m: f"__source__{m.group(1)}__{m.group(2)}", sql)
    sql = _JINJA_EXPR.sub("__jinja__", sql)
    sql = _JINJA_TAG.sub(" ", sql)
    sql = _SQL_COMMENT.sub(" ", sql)
    return _STRING.sub("''", sql)


def _depths(sql: str) -> list[int]:
    """The parenthesis depth at each character."""
    depth, out = 0, []
    for ch in sql:
        if ch == ")":
            depth -= 1
        out.append(depth)
        if ch == "(":
            depth += 1
    return out


def _top_level(sql: str, pattern: re.Pattern) -> list[re.Match]:
    depths = _depths(sql)
    return [m for m in pattern.finditer(sql) if depths[m.start()] == 0]


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _balanced(sql: str, open_at: int) -> str:
    """The text inside the parenthesis opened at `open_at`."""
    depth = 0
    for i in range(open_at, len(sql)):
        depth += (sql[i] == "(") - (sql[i] == ")")
        if depth == 0:
            return sql[open_at + 1 : i]
    return sql[open_at + 1 :]


def _ctes(sql: str) -> dict[str, list[str]]:
    """Every `name as (...)` in the text, each name's bodies (an `{% if %}` may define
    a CTE twice)."""
    found: dict[str, list[str]] = defaultdict(list)
    for m in _CTE.finditer(sql):
        found[m.group(1).lower()].append(_balanced(sql, m.end() - 1))
    return found


def _final_select(sql: str) -> str | None:
    """The statement whose rows the model outputs: from its last top-level `select`."""
    selects = _top_level(sql, re.compile(r"\bselect\b", re.I))
    return sql[selects[-1].start() :] if selects else None


class _Select:
    """A select statement, per `union` branch: its items and the relations it reads
    (alias -> relation)."""

    def __init__(self, statement: str):
        cuts = _top_level(statement, re.compile(r"\bunion(?:\s+all|\s+distinct)?\b", re.I))
        bounds = [0, *(i for m in cuts for i in (m.start(), m.end())), len(statement)]
        parts = [statement[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2)]
        self.branches = []
        for part in parts:
            depths = _depths(part)
            froms = [m for m in re.finditer(r"\bfrom\b", part, re.I) if depths[m.start()] == 0]
            items_text = part[: froms[0].start()] if froms else part
            items_text = re.sub(r"^\s*select\s+(distinct\s+)?", "", items_text, flags=re.I)
            if not froms:
                self.branches.append((_split_top(items_text), {}))
                continue
            from_text = part[froms[0].end() :]
            end = _top_level(from_text, _CLAUSE_END)
            if end:
                from_text = from_text[: end[0].start()]
            self.branches.append((_split_top(items_text), _relations(from_text)))


def _relations(from_text: str) -> dict[str, str]:
    """Relations of a from clause, alias (or name) -> name; a subquery as `(...)`."""
    relations: dict[str, str] = {}
    depths = _depths(from_text)
    pattern = re.compile(
        r"(?:^|\bjoin\b|,)\s*(\(|[\w.]+)(?:\s+(?:as\s+)?(?!on\b|using\b|left\b|right\b|"
        r"inner\b|full\b|cross\b|join\b|natural\b|lateral\b)(\w+))?",
        re.I,
    )
    for m in pattern.finditer(from_text):
        if depths[m.start(1)] != 0:
            continue
        name = m.group(1)
        if name == "(":
            name = "(" + _balanced(from_text, m.start(1)) + ")"
        alias = (m.group(2) or name).lower()
        relations[alias] = name
    return relations


def _star_targets(items: list[str], relations: dict[str, str]) -> list[str]:
    targets = []
    for item in items:
        if item == "*":
            targets.extend(relations.values())
        else:
            m = re.fullmatch(r"(\w+)\.\*", item)
            if m and m.group(1).lower() in relations:
                targets.append(relations[m.group(1).lower()])
    return targets


def _output_names(items: list[str]) -> list[str] | None:
    """Column names of an explicit select list; None when an item's name is unknown."""
    names = []
    for item in items:
        m = re.search(r"\bas\s+(\w+)\s*$", item, re.I) or re.fullmatch(r"(?:\w+\.)?(\w+)", item)
        if not m or m.group(1).startswith("__"):
            return None
        names.append(m.group(1).lower())
    return names


class SqlModel:
    """What the rules need to know of a model's SQL: which relations its output rows
    reach through `select *` alone, and the column names it outputs (when explicit)."""

    def __init__(self, manifest: Manifest, node: dict):
        self.node = node
        self._by_name = {n["name"]: n for n in _models(manifest)}

    def star_reach(self) -> list[tuple[str, dict | None]]:
        """Every ref/source the output reaches through `select *` only: (`ref(x)` or
        `source(a, b)`, the node or None). CTEs and ephemeral models (which dbt inlines
        as CTEs) are followed; a chain that meets an explicit column list stops there."""
        reached: list[tuple[str, dict | None]] = []
        self._follow_model(self.node, reached, set())
        return reached

    def output_columns(self) -> list[str] | None:
        sql = _clean_sql(self.node.get("raw_code") or "")
        statement = _final_select(sql)
        if statement is None:
            return None
        return self._names(statement, _ctes(sql), set())

    def _names(self, statement: str, ctes: dict, seen: set) -> list[str] | None:
        items, relations = _Select(statement).branches[0]
        if items == ["*"] and len(relations) == 1:
            (name,) = relations.values()
            bodies = ctes.get(name.lower())
            if bodies and name.lower() not in seen and len(bodies) == 1:
                return self._names(bodies[0], ctes, seen | {name.lower()})
            return None
        return _output_names(items)

    def _follow_model(self, node: dict, reached: list, seen: set) -> None:
        sql = _clean_sql(node.get("raw_code") or "")
        statement = _final_select(sql)
        if statement is not None:
            self._follow(statement, _ctes(sql), reached, seen)

    def _follow(self, statement: str, ctes: dict, reached: list, seen: set) -> None:
        for items, relations in _Select(statement).branches:
            for target in _star_targets(items, relations):
                self._follow_relation(target, ctes, reached, seen)

    def _follow_relation(self, target: str, ctes: dict, reached: list, seen: set) -> None:
        if target.startswith("("):
            self._follow(target[1:-1], ctes, reached, seen)
        elif target.startswith("__ref__"):
            name = target[len("__ref__") :]
            node = self._by_name.get(name)
            reached.append((f"ref('{name}')", node))
            if node is not None and _is_ephemeral(node) and name not in seen:
                self._follow_model(node, reached, seen | {name})
        elif target.startswith("__source__"):
            source, table = target[len("__source__") :].split("__", 1)
            reached.append((f"source('{source}', '{table}')", None))
        elif target.lower() in ctes and target.lower() not in seen:
            for body in ctes[target.lower()]:
                self._follow(body, ctes, reached, seen | {target.lower()})


def _without_calls(raw: str, function: str) -> str:
    """The raw code without any `function(...)` call (its arguments included)."""
    out, i = [], 0
    for m in re.finditer(rf"\b{function}\s*\(", raw):
        if m.start() < i:
            continue
        out.append(raw[i : m.start()])
        i = m.end() - 1 + len(_balanced(raw, m.end() - 1)) + 2
    out.append(raw[i:])
    return "".join(out)


# ---------------------------------------------------------------------------- rules


def naming(manifest: Manifest) -> list[str]:
    """Model names follow their folder (README.md, "Layout"): `models/staging/<source>/`
    holds `stg_<source>__<entity>`, `models/intermediate/<source>/` holds
    `int_<source>__<entity>...`, `models/marts/` holds `dim_`/`fct_`/`agg_` models,
    `models/silver/` and `models/ops/` hold tables named as consumers read them (no layer
    prefix). No model lives elsewhere."""
    violations = []
    for node in _models(manifest):
        path = PurePosixPath(node["original_file_path"])
        parts = path.parts
        name = node["name"]
        layer = parts[1] if len(parts) > 2 and parts[0] == "models" else None
        where = f"model {name} ({path})"
        if layer in ("staging", "intermediate"):
            prefix = "stg" if layer == "staging" else "int"
            if len(parts) != 4:
                violations.append(
                    f"{where}: a {layer} model lives in models/{layer}/<source>/: move it "
                    "into its source system's folder"
                )
                continue
            source = parts[2]
            if not re.fullmatch(rf"{prefix}_{source}__[a-z0-9]+(?:_[a-z0-9]+)*", name):
                violations.append(
                    f"{where}: {layer} models of source '{source}' are named "
                    f"{prefix}_{source}__<entity>: rename it"
                )
        elif layer == "marts":
            if not name.startswith(MART_PREFIXES):
                violations.append(
                    f"{where}: a mart (gold) model is named dim_<entity>, fct_<event> or "
                    "agg_<grain>: rename it"
                )
        elif layer in ("silver", "ops"):
            if name.startswith(LAYER_PREFIXES):
                violations.append(
                    f"{where}: a {layer} table is named as consumers read it "
                    f"({layer}.<entity>), without stg_/int_/dim_/fct_/agg_: rename it"
                )
        else:
            violations.append(
                f"{where}: models live in models/staging, models/intermediate, models/silver, "
                "models/marts or models/ops: move it"
            )
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            violations.append(f"{where}: names are lower snake case: rename it")
    return sorted(violations)


# Infrastructure: the tables the project's macros write (run log, filter stats, quality
# metrics) and the ingestion job's own (dead letters, batch log). Not a source system,
# so not under staging.
OPS_SOURCES = PurePosixPath("models/ops/_ops__sources.yml")


def one_yaml_per_model(manifest: Manifest) -> list[str]:
    """Each model and snapshot has its own properties file `<name>.yml` beside its SQL,
    and no YAML file describes two of them. Sources live in
    `models/staging/<source>/_<source>__sources.yml`, named for their system (source
    `blog` in `models/staging/blog/`), except infrastructure (the run metadata that the
    project's macros write, the ingestion job's own tables), declared in
    `models/ops/_ops__sources.yml`; exposures in
    `models/<folder>/_<folder>__exposures.yml`, macro properties in
    `macros/<folder>/_<folder>__macros.yml` of the macro's folder."""
    violations = []
    described: dict[str, list[str]] = defaultdict(list)
    for node in _models_and_snapshots(manifest):
        sql = PurePosixPath(node["original_file_path"])
        expected = str(sql.with_name(f"{node['name']}.yml"))
        patch = _patch_file(node)
        if patch is None:
            violations.append(f"{_label(node)}: has no properties file: add {expected}")
            continue
        described[patch].append(node["name"])
        if patch != expected:
            violations.append(
                f"{_label(node)}: is described in {patch}: move its properties to {expected}"
            )
    for patch, names in described.items():
        if len(names) > 1:
            violations.append(
                f"{patch} describes {len(names)} models ({', '.join(sorted(names))}): give "
                "each its own <name>.yml"
            )
    for source in _own(manifest["sources"]):
        path = PurePosixPath(source["original_file_path"])
        folder = path.parent.name
        where = f"source {source['source_name']}.{source['name']} ({path})"
        if path == OPS_SOURCES:
            continue
        if path.parent.parent != PurePosixPath("models/staging") or (
            path.name != f"_{folder}__sources.yml"
        ):
            violations.append(
                f"{where}: sources live in models/staging/<source>/_<source>__sources.yml "
                "(infrastructure in models/ops/_ops__sources.yml): move it"
            )
        elif source["source_name"] != folder:
            violations.append(
                f"{where}: a source is named for its system, the folder it lives in: "
                f"name it '{folder}'"
            )
    for exposure in _own(manifest.get("exposures", {})):
        path = PurePosixPath(exposure["original_file_path"])
        if path.name != f"_{path.parent.name}__exposures.yml":
            violations.append(
                f"exposure {exposure['name']} ({path}): exposures live in "
                f"{path.parent}/_{path.parent.name}__exposures.yml: move it"
            )
    for macro in _own(manifest["macros"]):
        patch = _patch_file(macro)
        folder = PurePosixPath(macro["original_file_path"]).parent
        expected = f"{folder}/_{folder.name}__macros.yml"
        if patch is not None and patch != expected:
            violations.append(
                f"macro {macro['name']} ({macro['original_file_path']}): is described in "
                f"{patch}: move it to {expected}"
            )
    return sorted(violations)


def _key_tests(manifest: Manifest) -> dict[str, list[str]]:
    """For each node, the primary keys its tests establish (`unique` + `not_null` on a
    column, or `unique_combination`), as text; tests with a `where` do not count."""
    unique, not_null = defaultdict(set), defaultdict(set)
    keys: dict[str, list[str]] = defaultdict(list)
    for test in _own(manifest["nodes"]):
        if test["resource_type"] != "test" or not test.get("test_metadata"):
            continue
        if (test.get("config") or {}).get("where"):
            continue
        attached = test.get("attached_node")
        name = test["test_metadata"]["name"]
        kwargs = test["test_metadata"].get("kwargs") or {}
        if name == "unique" and test.get("column_name"):
            unique[attached].add(test["column_name"])
        elif name == "not_null" and test.get("column_name"):
            not_null[attached].add(test["column_name"])
        elif name == "unique_combination" and kwargs.get("columns"):
            keys[attached].append(f"unique_combination({', '.join(kwargs['columns'])})")
    for attached, columns in unique.items():
        for column in sorted(columns & not_null[attached]):
            keys[attached].append(f"unique+not_null({column})")
    return keys


def primary_key_tested(manifest: Manifest) -> list[str]:
    """Every model and snapshot has a primary-key test: `unique` and `not_null` on one
    column, or `unique_combination` on its key columns (null parts group together), with
    no `where`. Ephemeral models too (dbt inlines them into the test): a change stream's
    rows are keyed by the event's delivery position (`_source_file`, `_line_number`,
    `_partition`, `_offset`, with `_topic` where several topics meet) and its business
    key (an AWS DMS record that moves the key is two changes)."""
    keys = _key_tests(manifest)
    return sorted(
        f"{_label(node)}: has no primary-key test: add `unique` + `not_null` on its key "
        "column, or `unique_combination` on its key columns, in its YAML"
        for node in _models_and_snapshots(manifest)
        if not keys.get(node["unique_id"])
    )


def sources_fresh_and_owned(manifest: Manifest) -> list[str]:
    """Every source table declares `freshness` (with a `loaded_at_field` or
    `loaded_at_query`) and an owner (`meta.owner`, at the source or the table, plain or
    under `config`). A table where freshness cannot apply says why in
    `meta.freshness_exempt` (e.g. dead letters: no rows is the healthy state)."""
    violations = []
    for source in _own(manifest["sources"]):
        label = f"source {source['source_name']}.{source['name']} ({source['original_file_path']})"
        config = source.get("config") or {}
        meta = {**(source.get("source_meta") or {}), **(source.get("meta") or {})}
        meta.update(config.get("meta") or {})
        if not meta.get("owner"):
            violations.append(f"{label}: has no owner: add meta.owner to the source or table")
        freshness = source.get("freshness") or config.get("freshness") or {}
        has_freshness = bool(freshness.get("warn_after", {}).get("count")) or bool(
            freshness.get("error_after", {}).get("count")
        )
        loaded_at = (
            source.get("loaded_at_field")
            or source.get("loaded_at_query")
            or config.get("loaded_at_field")
            or config.get("loaded_at_query")
        )
        if meta.get("freshness_exempt"):
            continue
        if not has_freshness:
            violations.append(
                f"{label}: has no freshness: add freshness (warn_after/error_after), or "
                "meta.freshness_exempt with the reason it cannot apply"
            )
        elif not loaded_at:
            violations.append(
                f"{label}: has freshness but no loaded_at_field or loaded_at_query: add one"
            )
    return sorted(violations)


def no_select_star(manifest: Manifest) -> list[str]:
    """A model built in the silver or gold schema (views included) does not output
    `select *` straight from a `ref()` or `source()`: its output rows, followed through
    `select *` and CTEs, meet an explicit column list first. Import CTEs
    (`x as (select * from {{ ref('y') }})`) followed by an explicit list are fine. An
    ephemeral model is followed like a CTE (dbt inlines it as one): `select * from
    {{ ref('int_blog__user_changes') }}` is fine because that model lists its columns."""
    violations = []
    for node in _models_and_snapshots(manifest):
        if node.get("schema") not in ENUMERATED_SCHEMAS or _is_ephemeral(node):
            continue
        for relation, target in SqlModel(manifest, node).star_reach():
            if target is not None and _is_ephemeral(target):
                continue
            violations.append(
                f"{_label(node)}: outputs `select *` from {relation}: list its columns (an "
                "import CTE, then an explicit select list)"
            )
    return sorted(set(violations))


def macro_file_names(manifest: Manifest) -> list[str]:
    """Every file under macros/ is named after the one public macro it defines:
    `x.sql` defines `x` (its dispatch implementations `default__x`, `spark__x` beside
    it), a generic test file `test_x.sql` defines `test_x`, a materialization file
    `x.sql` defines `materialization_x_<adapter>`. Any other macro in the file is a
    private helper, named `_...`. Files whose name starts with `_` hold private helpers
    only. Private helpers are called by macros only, never by a model, snapshot or test."""
    violations = []
    by_file: dict[str, list[str]] = defaultdict(list)
    for macro in _own(manifest["macros"]):
        by_file[macro["original_file_path"]].append(macro["name"])
    for path, names in sorted(by_file.items()):
        stem = PurePosixPath(path).stem
        if stem.startswith("_"):
            for name in sorted(n for n in names if not n.startswith("_")):
                violations.append(
                    f"macro {name} ({path}): a file named _... holds private helpers only: "
                    f"rename it _{name}, or move it to {PurePosixPath(path).parent}/{name}.sql"
                )
            continue
        allowed = {stem, *(f"{adapter}__{stem}" for adapter in ADAPTERS)}
        materializations = [n for n in names if re.fullmatch(rf"materialization_{stem}_\w+", n)]
        if stem not in names and not materializations:
            violations.append(
                f"macro file {path}: defines no macro named {stem} (nor the materialization "
                f"{stem}): name the file after its public macro"
            )
        for name in sorted(names):
            if name in allowed or name in materializations or name.startswith("_"):
                continue
            violations.append(
                f"macro {name} ({path}): one public macro per file, named as the file: move "
                f"it to {PurePosixPath(path).parent}/{name}.sql, or make it private (_{name})"
            )
    private = {m["unique_id"] for m in _own(manifest["macros"]) if m["name"].startswith("_")}
    for node in _own(manifest["nodes"]):
        # dbt records the macros a node calls by rendering it at parse time, so a call
        # under `{% if execute %}` is missing there: its code is read as well.
        code = re.sub(r"\{#.*?#\}", "", node.get("raw_code") or "", flags=re.S)
        called = set((node.get("depends_on") or {}).get("macros") or [])
        called |= {
            macro
            for macro in private
            if re.search(rf"(?<![\w.]){re.escape(macro.split('.')[-1])}\s*\(", code)
        }
        for macro in sorted(called):
            if macro in private:
                violations.append(
                    f"{_label(node)}: calls the private helper {macro.split('.')[-1]}: call "
                    "a public macro (or make the helper public, in its own file, documented)"
                )
    return sorted(violations)


def _ancestors(manifest: Manifest, unique_id: str) -> set[str]:
    parents = manifest.get("parent_map") or {}
    seen: set[str] = set()
    pending = list(parents.get(unique_id, []))
    while pending:
        parent = pending.pop()
        if parent not in seen:
            seen.add(parent)
            pending.extend(parents.get(parent, []))
    return seen


def pii_pseudonymized(manifest: Manifest) -> list[str]:
    """Columns tagged PII (`meta: {pii: true}`) never reach gold raw. A gold model
    declares no column named like a PII column upstream of it, and every PII column of a
    model it reads appears in its SQL only inside `pseudonymize(...)`, never passed on by
    `select *`. Outside gold, a model
    that passes on a PII column of a model it reads (names it, or outputs it by
    `select *`) declares that column tagged PII too, so the tag follows the data."""
    violations = []
    nodes = {**manifest["nodes"], **manifest["sources"]}
    for node in _models(manifest):
        pii_names: dict[str, list[str]] = defaultdict(list)
        for ancestor in sorted(_ancestors(manifest, node["unique_id"]) & set(nodes)):
            for column in pii_columns(nodes[ancestor]):
                pii_names[column].append(nodes[ancestor]["name"])
        own_pii = pii_columns(node)
        declared = set(node.get("columns") or {})
        raw = _SQL_COMMENT.sub(" ", _JINJA_COMMENT.sub(" ", node.get("raw_code") or ""))
        mentioned_text = _without_calls(raw, PSEUDONYMIZE)
        starred = {
            target["unique_id"]
            for _, target in SqlModel(manifest, node).star_reach()
            if target is not None
        }
        if _is_gold(node):
            for column in sorted(declared & set(pii_names)):
                violations.append(
                    f"{_label(node)}: gold column {column} is PII (tagged upstream in "
                    f"{', '.join(sorted(pii_names[column]))}): publish "
                    f"{PSEUDONYMIZE}({column}) under another name, or leave it out"
                )
        for parent_id in (node.get("depends_on") or {}).get("nodes") or []:
            parent = nodes.get(parent_id)
            if parent is None:
                continue
            for column in sorted(pii_columns(parent)):
                named = re.search(rf"\b{column}\b", mentioned_text) is not None
                passed = parent_id in starred
                if not (named or passed):
                    continue
                how = "outputs it by select *" if passed and not named else "reads it raw"
                if _is_gold(node):
                    violations.append(
                        f"{_label(node)}: {how}: PII column {column} of {parent['name']}: "
                        f"wrap it in {PSEUDONYMIZE}(...) (macros/pii/pseudonymize.sql)"
                    )
                elif column not in own_pii and (passed or column in declared):
                    violations.append(
                        f"{_label(node)}: passes on PII column {column} of {parent['name']}: "
                        "declare it in the model's YAML with `config: {meta: {pii: true}}`"
                    )
    return sorted(violations)


def _undescribed(resource: dict) -> bool:
    return not (resource.get("description") or "").strip()


def _macro_families(macros: list[dict]) -> dict[str, list[dict]]:
    """Public macros grouped by what they implement: `x` with its `default__x` and
    `spark__x`; a materialization `x` with its `materialization_x_<adapter>`."""
    names = {m["name"] for m in macros}
    families: dict[str, list[dict]] = defaultdict(list)
    for macro in macros:
        name = macro["name"]
        if name.startswith("_"):
            continue
        m = re.fullmatch(rf"(?:{'|'.join(ADAPTERS)})__(\w+)", name)
        if m and m.group(1) in names:
            families[m.group(1)].append(macro)
            continue
        m = re.fullmatch(rf"materialization_(\w+)_(?:{'|'.join(ADAPTERS)})", name)
        families[f"materialization {m.group(1)}" if m else name].append(macro)
    return families


def documented(manifest: Manifest) -> list[str]:
    """Every model, snapshot, source (and each of its tables), exposure and public
    macro has a description, and every column of a gold model has one (the columns its
    SQL outputs, when they can be read from it, are all declared). A public macro's
    dispatch implementations (`default__x`, `spark__x`) are covered by `x`'s
    description; a materialization needs one described adapter implementation
    (`materialization_x_spark`; `_default` only raises). Private helpers (`_...`) are
    documented by a comment beside their code, not in YAML: they are no interface."""
    violations = []
    for node in _models_and_snapshots(manifest):
        if _undescribed(node):
            violations.append(f"{_label(node)}: has no description: add one to {node['name']}.yml")
        if not _is_gold(node):
            continue
        columns = node.get("columns") or {}
        for name, column in sorted(columns.items()):
            if _undescribed(column):
                violations.append(f"{_label(node)}: gold column {name} has no description: add one")
        output = SqlModel(manifest, node).output_columns() or []
        for name in output:
            if name not in {c.lower() for c in columns}:
                violations.append(
                    f"{_label(node)}: gold column {name} is not declared: add it, described, "
                    f"to {node['name']}.yml"
                )
    sources_seen = set()
    for source in _own(manifest["sources"]):
        label = f"source {source['source_name']}.{source['name']} ({source['original_file_path']})"
        if _undescribed(source):
            violations.append(f"{label}: has no description: add one")
        if source["source_name"] not in sources_seen:
            sources_seen.add(source["source_name"])
            if not (source.get("source_description") or "").strip():
                violations.append(
                    f"source {source['source_name']} ({source['original_file_path']}): has "
                    "no description: add one"
                )
    for exposure in _own(manifest.get("exposures", {})):
        if _undescribed(exposure):
            violations.append(
                f"exposure {exposure['name']} ({exposure['original_file_path']}): has no "
                "description: add one"
            )
    for family, macros in sorted(_macro_families(_own(manifest["macros"])).items()):
        if family.startswith("materialization "):
            if all(_undescribed(m) for m in macros):
                path = macros[0]["original_file_path"]
                folder = PurePosixPath(path).parent
                violations.append(
                    f"{family} ({path}): has no description: describe "
                    f"materialization_{family.split()[1]}_spark in "
                    f"{folder}/_{folder.name}__macros.yml"
                )
            continue
        head = next((m for m in macros if m["name"] == family), macros[0])
        if _undescribed(head):
            folder = PurePosixPath(head["original_file_path"]).parent
            violations.append(
                f"macro {head['name']} ({head['original_file_path']}): has no description: "
                f"describe it in {folder}/_{folder.name}__macros.yml"
            )
    return sorted(violations)


RULES: dict[str, Rule] = {
    "naming": naming,
    "one_yaml_per_model": one_yaml_per_model,
    "primary_key_tested": primary_key_tested,
    "sources_fresh_and_owned": sources_fresh_and_owned,
    "no_select_star": no_select_star,
    "macro_file_names": macro_file_names,
    "pii_pseudonymized": pii_pseudonymized,
    "documented": documented,
}


def check(manifest: Manifest, rules: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Every rule's violations (only the rules that have some)."""
    results = {name: RULES[name](manifest) for name in (rules or RULES)}
    return {name: found for name, found in results.items() if found}
