"""The project's rules (python_jobs/tools/project_rules.py) on the real manifest, and each
rule broken on purpose in a copy of it.

`dbt parse` runs in a subprocess (`python -m python_jobs.run_dbt parse`, which starts
no Spark session) into this module's own target directory, once; every case reads or
deep-copies that manifest. No Spark, no tables: a few seconds.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from python_jobs.spark import REPO_ROOT
from python_jobs.tools import project_rules as rules


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """The project's manifest and dbt's output, from a fresh parse (no partial parse:
    every deprecation is reported)."""
    work = tmp_path_factory.mktemp("project-rules")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "python_jobs.run_dbt",
            "parse",
            "--no-partial-parse",
            "--target-path",
            str(work / "target"),
            "--log-path",
            str(work / "logs"),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    return manifest, proc.stdout + proc.stderr


@pytest.fixture()
def manifest(parsed: tuple[dict, str]) -> dict:
    """A copy of the real manifest, for a case to break."""
    return copy.deepcopy(parsed[0])


@pytest.mark.parametrize("rule", sorted(rules.RULES))
def test_the_project_follows_the_rule(parsed: tuple[dict, str], rule: str) -> None:
    assert rules.RULES[rule](parsed[0]) == []


def test_the_parse_reports_no_deprecation(parsed: tuple[dict, str]) -> None:
    # Generic tests take their arguments under `arguments:` (dbt 1.11 deprecates
    # top-level arguments: MissingArgumentsPropertyInGenericTestDeprecation), and
    # nothing else the project writes is deprecated either.
    output = parsed[1]
    assert "MissingArgumentsPropertyInGenericTestDeprecation" not in output, output
    assert "DeprecationsSummary" not in output, output


def test_migrated_test_arguments_reach_the_audits_unchanged(parsed: tuple[dict, str]) -> None:
    # audited_table runs a gold model's tests from their test_metadata.kwargs: with
    # `arguments:` they arrive as before, keyword by keyword, beside `model`.
    nodes = parsed[0]["nodes"]
    (test,) = [
        n
        for n in nodes.values()
        if n["resource_type"] == "test"
        and n.get("attached_node") == "model.lakehouse.dim_users"
        and n["test_metadata"]["name"] == "scd2_one_current"
    ]
    assert test["test_metadata"]["kwargs"] == {
        "unique_key": ["user_id"],
        "is_current": "is_current",
        "model": "{{ get_where_subquery(ref('dim_users')) }}",
    }


# ------------------------------------------------------------------ failing fixtures


def _node(manifest: dict, name: str, kind: str = "model") -> dict:
    (node,) = [
        n for n in manifest["nodes"].values() if n["resource_type"] == kind and n["name"] == name
    ]
    return node


def _rename(manifest: dict, name: str, new_name: str) -> dict:
    node = _node(manifest, name)
    node["name"] = new_name
    return node


def test_naming_fails_on_a_model_named_against_its_folder(manifest: dict) -> None:
    _rename(manifest, "stg_blog__users", "stg_users")
    _rename(manifest, "fct_visits", "visits_enriched")
    _rename(manifest, "users_history", "dim_users_history")
    _rename(manifest, "int_blog__user_changes", "int_reference__user_changes")
    assert rules.naming(manifest) == [
        "model dim_users_history (models/silver/users_history.sql): a silver table is named"
        " as consumers read it (silver.<entity>), without stg_/int_/dim_/fct_/agg_: rename it",
        "model int_reference__user_changes (models/intermediate/blog/int_blog__user_changes"
        ".sql): intermediate models of source 'blog' are named int_blog__<entity>: rename it",
        "model stg_users (models/staging/blog/stg_blog__users.sql): staging models of source"
        " 'blog' are named stg_blog__<entity>: rename it",
        "model visits_enriched (models/marts/core/fct_visits.sql): a mart (gold) model is "
        "named dim_<entity>, fct_<event> or agg_<grain>: rename it",
    ]


def test_naming_fails_on_a_model_outside_the_layer_folders(manifest: dict) -> None:
    _node(manifest, "visits")["original_file_path"] = "models/visits.sql"
    assert rules.naming(manifest) == [
        "model visits (models/visits.sql): models live in models/staging, "
        "models/intermediate, models/silver, models/marts or models/ops: move it"
    ]


def test_one_yaml_per_model_fails_on_a_shared_or_missing_yaml(manifest: dict) -> None:
    shared = "lakehouse://models/marts/core/_core__models.yml"
    _node(manifest, "dim_users")["patch_path"] = shared
    _node(manifest, "dim_articles")["patch_path"] = shared
    _node(manifest, "devices_history", "snapshot")["patch_path"] = None
    manifest["sources"]["source.lakehouse.blog.blog_visits"]["original_file_path"] = (
        "models/staging/blog/sources.yml"
    )
    users = manifest["sources"]["source.lakehouse.blog.blog_public_users"]
    users["source_name"] = "bronze"
    assert rules.one_yaml_per_model(manifest) == [
        "model dim_articles (models/marts/core/dim_articles.sql): is described in "
        "models/marts/core/_core__models.yml: move its properties to "
        "models/marts/core/dim_articles.yml",
        "model dim_users (models/marts/core/dim_users.sql): is described in "
        "models/marts/core/_core__models.yml: move its properties to "
        "models/marts/core/dim_users.yml",
        "models/marts/core/_core__models.yml describes 2 models (dim_articles, dim_users): "
        "give each its own <name>.yml",
        "snapshot devices_history (snapshots/devices_history.sql): has no properties file: "
        "add snapshots/devices_history.yml",
        "source blog.blog_visits (models/staging/blog/sources.yml): sources live in "
        "models/staging/<source>/_<source>__sources.yml (infrastructure in "
        "models/ops/_ops__sources.yml): move it",
        "source bronze.blog_public_users (models/staging/blog/_blog__sources.yml): a "
        "source is named for its system, the folder it lives in: name it 'blog'",
    ]


def test_one_yaml_per_model_fails_on_misplaced_macro_properties(manifest: dict) -> None:
    manifest["macros"]["macro.lakehouse.pseudonymize"]["patch_path"] = (
        "lakehouse://macros/utils/_utils__macros.yml"
    )
    assert rules.one_yaml_per_model(manifest) == [
        "macro pseudonymize (macros/pii/pseudonymize.sql): is described in "
        "macros/utils/_utils__macros.yml: move it to macros/pii/_pii__macros.yml"
    ]


def _drop_tests(manifest: dict, attached: str, test_name: str) -> None:
    for key in [
        k
        for k, n in manifest["nodes"].items()
        if n["resource_type"] == "test"
        and n.get("attached_node") == attached
        and n["test_metadata"]["name"] == test_name
    ]:
        del manifest["nodes"][key]


def test_primary_key_tested_fails_without_a_key_test(manifest: dict) -> None:
    _drop_tests(manifest, "model.lakehouse.visits", "unique")
    _drop_tests(manifest, "model.lakehouse.int_blog__user_changes", "unique_combination")
    # A conditional not_null is no key: the articles' unique + not_null with a where.
    _drop_tests(manifest, "model.lakehouse.articles", "not_null")
    (not_null,) = [
        n
        for n in manifest["nodes"].values()
        if n["resource_type"] == "test"
        and n.get("attached_node") == "model.lakehouse.users"
        and n["test_metadata"]["name"] == "not_null"
    ]
    not_null["config"]["where"] = "user_id > 0"
    message = (
        ": has no primary-key test: add `unique` + `not_null` on its key column, or "
        "`unique_combination` on its key columns, in its YAML"
    )
    assert rules.primary_key_tested(manifest) == [
        "model articles (models/silver/articles.sql)" + message,
        "model int_blog__user_changes (models/intermediate/blog/int_blog__user_changes.sql)"
        + message,
        "model users (models/silver/users.sql)" + message,
        "model visits (models/silver/visits.sql)" + message,
    ]


def test_sources_fresh_and_owned_fails_without_owner_or_freshness(manifest: dict) -> None:
    visits = manifest["sources"]["source.lakehouse.blog.blog_visits"]
    visits["freshness"] = visits["config"]["freshness"] = None
    devices = manifest["sources"]["source.lakehouse.reference.devices"]
    for meta in (devices["meta"], devices["source_meta"], devices["config"]["meta"]):
        meta.pop("owner")
    dead_letter = manifest["sources"]["source.lakehouse.dead_letters.dead_letter"]
    dead_letter["config"]["meta"].pop("freshness_exempt")
    dead_letter["meta"].pop("freshness_exempt")
    batches = manifest["sources"]["source.lakehouse.ingestion.ingestion_batches"]
    batches["loaded_at_field"] = batches["config"]["loaded_at_field"] = None
    no_freshness = (
        ": has no freshness: add freshness (warn_after/error_after), or "
        "meta.freshness_exempt with the reason it cannot apply"
    )
    assert rules.sources_fresh_and_owned(manifest) == [
        "source blog.blog_visits (models/staging/blog/_blog__sources.yml)" + no_freshness,
        "source dead_letters.dead_letter (models/ops/_ops__sources.yml)" + no_freshness,
        "source ingestion.ingestion_batches (models/ops/_ops__sources.yml): has "
        "freshness but no loaded_at_field or loaded_at_query: add one",
        "source reference.devices (models/staging/reference/_reference__sources.yml): has no "
        "owner: add meta.owner to the source or table",
    ]


def test_no_select_star_fails_on_star_from_a_ref_or_source(manifest: dict) -> None:
    _node(manifest, "fct_visits")["raw_code"] = "select * from {{ ref('visits') }}"
    # Through an import CTE and a CTE that adds a column: still every column of the ref.
    _node(manifest, "visits")["raw_code"] = (
        "with source as (select * from {{ source('blog', 'blog_visits') }}),\n"
        "typed as (select s.*, 1 as one from source as s)\n"
        "select * from typed -- noqa"
    )
    message = ": list its columns (an import CTE, then an explicit select list)"
    assert rules.no_select_star(manifest) == [
        "model fct_visits (models/marts/core/fct_visits.sql): outputs `select *` from "
        "ref('visits')" + message,
        "model visits (models/silver/visits.sql): outputs `select *` from "
        "source('blog', 'blog_visits')" + message,
    ]


def test_no_select_star_follows_ephemeral_models(manifest: dict) -> None:
    # silver.users selects * from an ephemeral model: fine while that model lists its
    # columns, a violation once it selects * itself.
    _node(manifest, "int_blog__user_changes")["raw_code"] = (
        "{{ config(materialized='ephemeral') }}\n"
        "with changes as (select * from {{ ref('stg_blog__users') }})\n"
        "select * from changes"
    )
    message = (
        ": outputs `select *` from ref('stg_blog__users'): list its columns (an import "
        "CTE, then an explicit select list)"
    )
    assert rules.no_select_star(manifest) == [
        "model users (models/silver/users.sql)" + message,
        "model users_history (models/silver/users_history.sql)" + message,
    ]


def _add_macro(manifest: dict, name: str, path: str) -> None:
    manifest["macros"][f"macro.lakehouse.{name}"] = {
        "name": name,
        "unique_id": f"macro.lakehouse.{name}",
        "package_name": "lakehouse",
        "original_file_path": path,
        "description": "",
        "patch_path": None,
    }


def test_macro_file_names_fails_on_misnamed_macros(manifest: dict) -> None:
    _add_macro(manifest, "cdc_columns", "macros/cdc/cdc_merge.sql")
    _add_macro(manifest, "cdc_helper", "macros/cdc/_cdc_merge_sql.sql")
    _add_macro(manifest, "dedupe", "macros/dedup/deduplicate_rows.sql")
    manifest["nodes"]["model.lakehouse.visits"]["depends_on"]["macros"].append(
        "macro.lakehouse._cdc_as_list"
    )
    # A call that dbt's parse does not record (under `{% if execute %}`), read from the
    # code; a helper named in a comment is no call.
    manifest["nodes"]["model.lakehouse.fct_visits"]["raw_code"] += (
        "{# see _delta_version(...) #}{% if execute %}{% set v = _delta_version(this) %}{% endif %}"
    )
    assert rules.macro_file_names(manifest) == [
        "macro cdc_columns (macros/cdc/cdc_merge.sql): one public macro per file, named as "
        "the file: move it to macros/cdc/cdc_columns.sql, or make it private (_cdc_columns)",
        "macro cdc_helper (macros/cdc/_cdc_merge_sql.sql): a file named _... holds private "
        "helpers only: rename it _cdc_helper, or move it to macros/cdc/cdc_helper.sql",
        "macro dedupe (macros/dedup/deduplicate_rows.sql): one public macro per file, named "
        "as the file: move it to macros/dedup/dedupe.sql, or make it private (_dedupe)",
        "macro file macros/dedup/deduplicate_rows.sql: defines no macro named "
        "deduplicate_rows (nor the materialization deduplicate_rows): name the file after "
        "its public macro",
        "model fct_visits (models/marts/core/fct_visits.sql): calls the private helper "
        "_delta_version: call a public macro (or make the helper public, in its own file, "
        "documented)",
        "model visits (models/silver/visits.sql): calls the private helper _cdc_as_list: "
        "call a public macro (or make the helper public, in its own file, documented)",
    ]


def test_pii_pseudonymized_fails_on_raw_pii_in_gold(manifest: dict) -> None:
    dim_users = _node(manifest, "dim_users")
    dim_users["columns"]["email"] = {"name": "email", "description": "Email."}
    dim_users["raw_code"] = dim_users["raw_code"].replace(
        "country,", "country,\n        upper(full_name) as display_name,"
    )
    assert rules.pii_pseudonymized(manifest) == [
        "model dim_users (models/marts/core/dim_users.sql): gold column email is PII "
        "(tagged upstream in int_blog__user_changes, stg_blog__users, users_history): "
        "publish pseudonymize(email) under another name, or leave it out",
        "model dim_users (models/marts/core/dim_users.sql): reads it raw: PII column "
        "full_name of users_history: wrap it in pseudonymize(...) "
        "(macros/pii/pseudonymize.sql)",
    ]


def test_pii_pseudonymized_fails_on_star_into_gold_and_on_a_lost_tag(manifest: dict) -> None:
    _node(manifest, "dim_users")["raw_code"] = "select * from {{ ref('users_history') }}"
    users = _node(manifest, "users")
    users["columns"]["email"]["config"]["meta"] = users["columns"]["email"]["meta"] = {}
    assert rules.pii_pseudonymized(manifest) == [
        "model dim_users (models/marts/core/dim_users.sql): outputs it by select *: PII "
        "column email of users_history: wrap it in pseudonymize(...) "
        "(macros/pii/pseudonymize.sql)",
        "model dim_users (models/marts/core/dim_users.sql): outputs it by select *: PII "
        "column full_name of users_history: wrap it in pseudonymize(...) "
        "(macros/pii/pseudonymize.sql)",
        "model users (models/silver/users.sql): passes on PII column email of "
        "int_blog__user_changes: declare it in the model's YAML with "
        "`config: {meta: {pii: true}}`",
    ]


def test_documented_fails_on_missing_descriptions(manifest: dict) -> None:
    fct_visits = _node(manifest, "fct_visits")
    fct_visits["columns"]["user_plan"]["description"] = ""
    fct_visits["raw_code"] = fct_visits["raw_code"].replace(
        "        _bronze_version\n    from joined",
        "        _bronze_version,\n        1 as one\n    from joined",
    )
    _node(manifest, "visits")["description"] = " "
    _node(manifest, "devices_history", "snapshot")["description"] = ""
    manifest["sources"]["source.lakehouse.reference.devices"]["description"] = ""
    manifest["macros"]["macro.lakehouse.pseudonymize"]["description"] = ""
    # Covered by pseudonymize's description, and a private helper: neither is reported.
    manifest["macros"]["macro.lakehouse.spark__pseudonymize"]["description"] = ""
    manifest["macros"]["macro.lakehouse.materialization_cdc_merge_spark"]["description"] = ""
    assert rules.documented(manifest) == [
        "macro pseudonymize (macros/pii/pseudonymize.sql): has no description: describe it "
        "in macros/pii/_pii__macros.yml",
        "materialization cdc_merge (macros/cdc/cdc_merge.sql): has no description: describe "
        "materialization_cdc_merge_spark in macros/cdc/_cdc__macros.yml",
        "model fct_visits (models/marts/core/fct_visits.sql): gold column one is not "
        "declared: add it, described, to fct_visits.yml",
        "model fct_visits (models/marts/core/fct_visits.sql): gold column user_plan has no "
        "description: add one",
        "model visits (models/silver/visits.sql): has no description: add one to visits.yml",
        "snapshot devices_history (snapshots/devices_history.sql): has no description: add "
        "one to devices_history.yml",
        "source reference.devices (models/staging/reference/_reference__sources.yml): has "
        "no description: add one",
    ]


def test_exposures_read_gold_and_are_owned(parsed: tuple[dict, str]) -> None:
    # The dashboards (models/marts/_marts__exposures.yml) read gold models only, and say
    # who owns them.
    manifest = parsed[0]
    exposures = manifest["exposures"].values()
    assert len(exposures) >= 2
    for exposure in exposures:
        assert exposure["type"] == "dashboard" and exposure["owner"]["email"], exposure
        for parent in exposure["depends_on"]["nodes"]:
            assert manifest["nodes"][parent]["schema"] == "gold", (exposure["name"], parent)


def test_the_rules_module_names_every_rule_in_the_readme() -> None:
    readme = (Path(REPO_ROOT) / "README.md").read_text()
    section = readme.split("## Project rules", 1)[1].split("\n## ", 1)[0]
    for name in rules.RULES:
        assert f"`{name}`" in section, name
