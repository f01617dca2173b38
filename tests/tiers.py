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
    "tests/python_jobs/test_simulate.py",
    "tests/python_jobs/test_cluster_preflight.py",
    "tests/macros/test_macro_arguments.py",
    "tests/macros/test_deduplicate.py",
    "tests/models/test_unit_tests.py",
)
