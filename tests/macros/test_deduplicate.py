"""deduplicate: one row per key, the first by the order, null-safe, deterministic ties."""

from __future__ import annotations

from tests.macros.test_macro_arguments import compile_error

ROWS = [  # (a, b, seen, payload)
    (1, "x", 2, "second"),
    (1, "x", 1, "first"),  # kept: first by seen
    (1, None, 5, "null part, later"),
    (1, None, 3, "null part"),  # kept: null parts match each other
    (None, None, 9, "all null"),  # kept alone
    (2, "y", 1, "tie b"),
    (2, "y", 1, "tie a"),  # kept: the tie goes to the smaller row as JSON
]


def none_first(row: tuple) -> tuple:
    """A sort key for rows with NULLs: NULL before any value."""
    return tuple((value is not None, 0 if value is None else value) for value in row)


def test_keeps_the_first_row_per_null_safe_key(spark) -> None:
    from python_jobs.run_dbt import invoke

    spark.createDataFrame(
        ROWS, "a int, b string, seen int, payload string"
    ).createOrReplaceTempView("dedup_input")
    result = invoke(
        ["compile", "--inline", "{{ deduplicate('dedup_input', ['a', 'b'], ['seen asc']) }}"]
    )
    assert result.success, result.exception
    sql = result.result.results[0].node.compiled_code
    got = sorted((tuple(r) for r in spark.sql(sql).collect()), key=none_first)
    assert got == [
        (None, None, 9, "all null"),
        (1, None, 3, "null part"),
        (1, "x", 1, "first"),
        (2, "y", 1, "tie a"),
    ]


def test_a_missing_order_fails_compilation(dbt) -> None:
    error = compile_error(dbt, "{{ deduplicate('t', ['id'], []) }}")
    assert "deduplicate: order_by is required" in error
