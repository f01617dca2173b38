"""The fast tier (`make test-fast`, `pytest -m fast`): test files that need no Spark, or
one quick session and no table builds beyond an empty lakehouse's. tests/conftest.py
marks their tests `fast`; tests/project/test_test_tiers.py checks that these files
exist and that none of their tests is also `slow`."""

FAST_TEST_FILES = (
    "tests/project/test_docs.py",
    "tests/project/test_environments.py",
    "tests/project/test_project_rules.py",
    "tests/project/test_test_tiers.py",
    "tests/python_jobs/test_topics.py",
    "tests/python_jobs/test_kafka_identity.py",
    "tests/python_jobs/test_simulate.py",
    "tests/python_jobs/test_cluster_preflight.py",
    "tests/python_jobs/test_run_dbt.py",
    "tests/macros/test_macro_arguments.py",
    "tests/macros/test_deduplicate.py",
    "tests/models/test_unit_tests.py",
    "tests/bench/test_statement_profile.py",
)

# The slowest test files, slowest first: each file's seconds in a clean-clone `make test`
# with --durations=0 on this machine (2026-11-26, 397 tests in 2,478 s; Airflow 802 s, the
# cluster 374, the shared catalog 372, the demo 365, ... the DMS files 49).
# tests/conftest.py collects them first and `make test` keeps that order
# (--no-loadscope-reorder): the two workers take the files in that order (each keeps
# the next one queued), so the longest start at once instead of ending the run alone (pytest-xdist's
# default order is by number of tests, which put the one-test end-to-end files last).
SLOWEST_FILES = (
    "tests/e2e/test_airflow_dag.py",
    "tests/e2e/test_cluster_target.py",
    "tests/e2e/test_shared_catalog.py",
    "tests/e2e/test_demo.py",
    "tests/macros/test_cdc_history.py",
    "tests/e2e/test_cdc_convergence.py",
    "tests/gold/test_fct_visits.py",
    "tests/macros/test_table_configs.py",
    "tests/silver/test_commit_windows.py",
    "tests/macros/test_cdc_merge_backfill.py",
    "tests/e2e/test_ingest_crash_recovery.py",
    "tests/e2e/test_debezium_postgres.py",
    "tests/e2e/test_thin_slice.py",
    "tests/e2e/test_concurrent_ingest_and_build.py",
    "tests/e2e/test_ingest_large_file.py",
    "tests/macros/test_cdc_merge.py",
    "tests/macros/test_audited_table.py",
    "tests/macros/test_maintain.py",
    "tests/e2e/test_devices_history.py",
    "tests/silver/test_visits.py",
    "tests/e2e/test_environments.py",
    "tests/python_jobs/test_ingest.py",
    "tests/e2e/test_contributing_guide.py",
    "tests/e2e/test_dms_ingest.py",
)
