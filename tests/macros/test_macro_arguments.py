"""Macros validate their arguments at compile time, naming the model and the value; and
what macros compute that needs no table (decimal decoding, pseudonyms) is exact. The
fast tier runs this file (tests/tiers.py): compilation and literal queries only."""

from __future__ import annotations

import base64
import hashlib

import pytest


def compile_error(dbt, sql: str) -> str:
    """The messages of the failure and of every exception in its chain."""
    result = dbt("compile", "--inline", sql, expect_fail=True)
    messages, error = [], result.exception
    while error is not None and len(messages) < 10:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(messages)


def compile_sql(expression: str) -> str:
    """The SQL dbt compiles for `expression` (in-process, on the suite's session)."""
    from python_jobs.run_dbt import invoke

    result = invoke(["compile", "--inline", expression])
    assert result.success, result.exception
    return result.result.results[0].node.compiled_code


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "decode_debezium_decimal('x', 19, 2)",
            "precision must be an integer from 1 to 18, got 19",
        ),
        (
            "decode_debezium_decimal('x', 12, 13)",
            "scale must be an integer from 0 to the precision (12), got 13",
        ),
        (
            "decode_debezium_decimal('x', '12', 2)",
            "precision must be an integer from 1 to 18, got 12",
        ),
        (
            "create_layer_schemas('silver')",
            "`schemas` must be a non-empty list, got silver",
        ),
        (
            "register_ingestion_tables('.lakehouse')",
            "must be an absolute path or a URI, got '.lakehouse'",
        ),
        ("register_ingestion_tables('')", "var 'lakehouse_root' is empty"),
        (
            "default__decode_debezium_decimal('x', 12, 2)",
            "decode_debezium_decimal: only the spark adapter is supported, not spark",
        ),
        (
            "default__decode_debezium_timestamp('x')",
            "decode_debezium_timestamp: only the spark adapter is supported, not spark",
        ),
    ],
)
def test_bad_macro_arguments_fail_compilation(dbt, call: str, message: str) -> None:
    error = compile_error(dbt, "select {{ " + call + " }}")
    assert message in error
    assert "inline" in error  # the node being compiled is named


@pytest.mark.parametrize("columns", ["'a'", "none", "[]"])
def test_unique_combination_requires_a_list_of_columns(dbt, columns: str) -> None:
    error = compile_error(
        dbt, "{{ spark__test_unique_combination('some_model', " + columns + ") }}"
    )
    assert "unique_combination on some_model: `columns` must be a non-empty list" in error


def _b64(unscaled: int) -> str:
    return base64.b64encode(
        unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
    ).decode()


def test_decimal_decoding_is_exact_at_the_edges(spark) -> None:
    from dbt.cli.main import dbtRunner  # noqa: F401  (dbt's session is this one)

    cases = {
        "largest": (_b64(10**18 - 1), 18, 2, "9999999999999999.99"),
        "smallest": (_b64(-(10**18) + 1), 18, 2, "-9999999999999999.99"),
        "minus_128": ("gA==", 5, 2, "-1.28"),
        "sign_byte": ("AIA=", 5, 2, "1.28"),
        "zero": ("AA==", 5, 0, "0"),
    }
    got = {}
    for name, (value, precision, scale, _) in cases.items():
        sql = _render_decimal(spark, f"'{value}'", precision, scale)
        got[name] = str(spark.sql(f"select {sql} as v").first().v)
    assert got == {name: case[3] for name, case in cases.items()}


@pytest.mark.parametrize(
    ("value", "precision", "scale"),
    [
        (_b64(10**5), 5, 2),  # one digit more than numeric(5,2) holds
        (_b64(2**63 - 1), 18, 0),  # 19 digits
        (base64.b64encode(b"\x01" * 9).decode(), 18, 0),  # 9 bytes
    ],
)
def test_a_value_beyond_the_declared_precision_fails_loudly(spark, value, precision, scale):
    sql = _render_decimal(spark, f"'{value}'", precision, scale)
    with pytest.raises(Exception, match=f"is not a numeric\\({precision},{scale}\\) value"):
        spark.sql(f"select {sql} as v").collect()


def _render_decimal(spark, column: str, precision: int, scale: int) -> str:
    """The SQL `decode_debezium_decimal` renders, via dbt's own compiler (in-process)."""
    return _render(f'decode_debezium_decimal("{column}", {precision}, {scale})')


def _render(call: str) -> str:
    """The SQL a macro call renders, via dbt's own compiler (in-process)."""
    from python_jobs.run_dbt import invoke

    result = invoke(["compile", "--inline", f"select {{{{ {call} }}}}"])
    assert result.success, result.exception
    return result.result.results[0].node.compiled_code.removeprefix("select ")


DAY_US = 86_400_000_000


def _julian_micros(year: int, month: int, day: int, micros_of_day: int = 0) -> int:
    """What a snapshot sends for a PostgreSQL timestamp before 1582-10-15: its fields
    counted in the Julian calendar (the Julian day number, Fliegel and Van Flandern's
    form), in microseconds since 1970-01-01."""
    a = (14 - month) // 12
    y, m = year + 4800 - a, month + 12 * a - 3
    jdn = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083
    return (jdn - 2_440_588) * DAY_US + micros_of_day


def test_timestamp_decoding_reads_julian_snapshot_values_back(spark) -> None:
    cases = [
        # Snapshot rows before 1582-10-15: Julian, read back into their fields.
        ("r", _julian_micros(1, 1, 1), "0001-01-01 00:00:00.000000"),
        ("r", -62_135_769_600_000_000, "0001-01-01 00:00:00.000000"),  # the connector's
        ("r", _julian_micros(100, 3, 1, 1), "0100-03-01 00:00:00.000001"),
        ("r", _julian_micros(1000, 12, 31, DAY_US - 1), "1000-12-31 23:59:59.999999"),
        ("r", _julian_micros(1500, 2, 28, 43_200_000_000), "1500-02-28 12:00:00.000000"),
        ("r", _julian_micros(1582, 10, 4, DAY_US - 1), "1582-10-04 23:59:59.999999"),
        # From the first Gregorian day on, and every streamed change: as they are.
        ("r", -12_219_292_800_000_000, "1582-10-15 00:00:00.000000"),
        ("r", -1, "1969-12-31 23:59:59.999999"),
        ("c", -62_135_596_800_000_000, "0001-01-01 00:00:00.000000"),
        ("u", -12_219_336_000_000_000, "1582-10-14 12:00:00.000000"),
        ("r", None, None),
    ]
    sql = _render("decode_debezium_timestamp('m', 'op')")
    rows = ", ".join(
        f"({i}, '{op}', cast({'null' if m is None else m} as bigint))"
        for i, (op, m, _) in enumerate(cases)
    )
    got = spark.sql(
        f"select i, date_format({sql}, 'yyyy-MM-dd HH:mm:ss.SSSSSS') as v "
        f"from values {rows} as t(i, op, m) order by i"
    ).collect()
    assert [r.v for r in got] == [expected for _, _, expected in cases]


MODEL = "{'schema': 'silver', 'alias': 'users'}"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{'sequence_by': ['lsn']}", "unique_key is required: a column or a list of columns"),
        ("{'unique_key': 'id', 'sequence_by': []}", "sequence_by is required"),
        ("{'unique_key': ['id', ''], 'sequence_by': 'lsn'}", "unique_key must hold column names"),
        (
            "{'unique_key': 'id', 'sequence_by': 'lsn', 'delete_mode': 'purge'}",
            "delete_mode must be 'hard' or 'soft', got 'purge'",
        ),
        (
            "{'unique_key': 'id', 'sequence_by': 'lsn', 'exclude_columns': 'op'}",
            "exclude_columns must be a list of column names, got 'op'",
        ),
        (
            "{'unique_key': 'id', 'sequence_by': 'lsn', 'exclude_columns': ['op', 'id']}",
            "key column 'id' is in exclude_columns",
        ),
    ],
)
def test_a_misconfigured_cdc_merge_model_fails_naming_it(dbt, config: str, message: str) -> None:
    error = compile_error(dbt, "{{ _cdc_merge_options(" + MODEL + ", " + config + ") }}")
    assert "cdc_merge (model silver.users): " + message in error


def test_an_empty_list_clears_an_optional_column_config(dbt) -> None:
    """`[]` for an optional config naming columns means none (a model clearing what its
    folder sets): no layout, no deduplication; `track_columns: []` tracks nothing and
    is refused."""
    configs = "_table_configs({'partition_by': [], 'liquid_clustered_by': ['id']}, 'x')"
    assert (
        compile_sql(
            "{% set c = " + configs + " %}{{ c.partition_by }} {{ c.liquid_clustered_by }}"
        ).strip()
        == "[] ['id']"
    )
    configs = "_table_configs({'liquid_clustered_by': []}, 'x').liquid_clustered_by"
    assert compile_sql("{{ " + configs + " }}").strip() == "[]"
    options = (
        "_filtered_append_options(model, {'unique_key': [], "
        "'filters': [{'name': 'f', 'condition': 'true'}]})"
    )
    assert compile_sql("select '{{ " + options + ".unique_key }}'").strip() == "select '[]'"
    history = "_cdc_history_options(" + MODEL + ", {'unique_key': 'id', 'sequence_by': 'lsn', "
    error = compile_error(dbt, "{{ " + history + "'track_columns': []}) }}")
    assert (
        "cdc_history (model silver.users): track_columns [] tracks no column: name the "
        "columns whose change opens a version, or leave it out to track every carried column"
    ) in error
    # A list of names is kept as it is.
    assert (
        compile_sql("{{ " + history + "'track_columns': ['name']}).track_columns }}").strip()
        == "['name']"
    )


def test_a_filter_named_like_the_deduplication_is_refused(dbt) -> None:
    """ops.filter_stats has one row per filter and one for the duplicates removed,
    `duplicate_<key>`: a filter of that name would be counted twice over."""
    config = (
        "{'unique_key': ['visit_id'], 'filters': [{'name': 'duplicate_visit_id', "
        "'condition': 'true'}]}"
    )
    error = compile_error(dbt, "{{ _filtered_append_options(" + MODEL + ", " + config + ") }}")
    assert (
        "filtered_append (model silver.users): filter name 'duplicate_visit_id' is the "
        "deduplication's in ops.filter_stats (the duplicates by visit_id): name the filter "
        "otherwise"
    ) in error
    without_key = "{'filters': [{'name': 'duplicate_visit_id', 'condition': 'true'}]}"
    options = "_filtered_append_options(model, " + without_key + ")"
    assert compile_sql("{{ " + options + ".filters[0].name }}").strip() == "duplicate_visit_id"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            "{'column': 'event_time', 'interval': 'a day'}, ['visit_id']",
            "dedup_lookback must be {column, interval} with an interval such as '1 day' (a "
            "whole number of seconds, minutes, hours, days or weeks), got ",
        ),
        (
            "{'column': 'event_time', 'interval': '1 fortnight'}, ['visit_id']",
            "dedup_lookback must be {column, interval} with an interval such as '1 day'",
        ),
        ("{'interval': '1 day'}, ['visit_id']", "dedup_lookback must be {column, interval}"),
        ("'1 day', ['visit_id']", "dedup_lookback must be {column, interval}"),
        (
            "{'column': 'event_time', 'interval': '1 day'}, []",
            "dedup_lookback bounds the deduplication: it needs unique_key",
        ),
    ],
)
def test_a_bad_dedup_lookback_fails_naming_the_model(dbt, arguments: str, message: str) -> None:
    error = compile_error(
        dbt,
        "{{ _filter_dedup_lookback(" + arguments + ", 'filtered_append (model silver.visits)') }}",
    )
    assert "filtered_append (model silver.visits): " + message in error


def test_a_dedup_lookback_is_normalised(dbt) -> None:
    assert (
        compile_sql(
            "{{ _filter_dedup_lookback({'column': ' event_time ', 'interval': '2  Days'}, "
            "['v'], 'x') }}"
        ).strip()
        == "{'column': 'event_time', 'interval': '2 days'}"
    )


LABEL = "'audited_table (model gold.fct_visits)'"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            "'visit_id', none",
            "unique_key and incremental_inputs go together (an incremental audited_table "
            "recomputes rows by key), got unique_key visit_id, incremental_inputs None",
        ),
        (
            "none, {'visits': 'visit_id'}",
            "unique_key and incremental_inputs go together",
        ),
        (
            "'visit_id', ['visits']",
            "incremental_inputs must map input models to the column linking their rows to "
            "this model's, e.g. {users_history: user_id}, got ['visits']",
        ),
        ("'visit_id', {}", "incremental_inputs must map input models"),
        (
            "'visit_id', {'visits': ' '}",
            "incremental_inputs.visits must be a column name, got  ",
        ),
        (
            "'visit_id', {'visits': 'visit_id'}, ['model.lakehouse.visits', "
            "'model.lakehouse.dim_users']",
            "the model reads model.lakehouse.dim_users, which incremental_inputs does not "
            "list: its changes would never be recomputed",
        ),
        (
            "'visit_id', {'visits': 'visit_id'}, ['source.lakehouse.blog.visits']",
            "the model reads source.lakehouse.blog.visits, which incremental_inputs",
        ),
        (
            "none, none, [], 'visits'",
            "incremental_driver needs unique_key and incremental_inputs, got "
            "incremental_driver visits",
        ),
        (
            "'visit_id', {'visits': 'visit_id', 'dim_users': 'user_id'}, [], 'users'",
            "incremental_driver must name one of incremental_inputs (visits, dim_users), got users",
        ),
        (
            "'visit_id', {'visits': 'visit_id', 'dim_users': 'user_id'}, [], 'dim_users'",
            "incremental_driver dim_users must be linked by the unique key, a single column "
            "(one output row per row of it), got unique_key visit_id and dim_users: user_id",
        ),
        (
            "['visit_id', 'day'], {'visits': 'visit_id'}, [], 'visits'",
            "incremental_driver visits must be linked by the unique key, a single column",
        ),
        (
            "'visit_id', {'visits': 'visit_id', 'dim_users': 3}",
            "incremental_inputs.dim_users must be a column name or {column, at, valid_from, "
            "valid_to, current_flag}, got 3",
        ),
        (
            "'visit_id', {'dim_users': {'column': 'user_id', 'when': 'event_time'}}",
            "incremental_inputs.dim_users: unknown setting 'when' (known: column, at, "
            "valid_from, valid_to, current_flag)",
        ),
        (
            "'visit_id', {'dim_users': {'column': 'user_id', 'valid_to': 'ends'}}",
            "incremental_inputs.dim_users: valid_to is for a point-in-time input and needs "
            "`at` (the model's column the input is joined at)",
        ),
        (
            "'visit_id', {'dim_users': {'at': 'event_time'}}",
            "incremental_inputs.dim_users.column must be a column name, got None",
        ),
        (
            "'visit_id', {'dim_users': {'column': 'user_id', 'at': ' '}}",
            "incremental_inputs.dim_users.at must be a column name, got  ",
        ),
        (
            "'visit_id', {'visits': {'column': 'visit_id', 'at': 'event_time'}}, [], 'visits'",
            "incremental_inputs.visits is the incremental_driver, linked by the key: it has "
            "no `at`",
        ),
    ],
)
def test_a_misconfigured_incremental_audited_table_fails_naming_it(
    dbt, arguments: str, message: str
) -> None:
    error = compile_error(dbt, "{{ _awap_incremental_options(" + LABEL + ", " + arguments + ") }}")
    assert "audited_table (model gold.fct_visits): " + message in error


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "spark__test_filter_rejected_share(api.Relation.create(schema='silver', "
            "identifier='m'), 1.5, none)",
            "max_share must be a share between 0 and 1, got 1.5",
        ),
        (
            "spark__test_filter_rejected_share_jump(api.Relation.create(schema='silver', "
            "identifier='m'), 0.5, none, 0.01)",
            "factor must be a number of at least 1, got 0.5",
        ),
        (
            "mark_superseded_runs('ops.filter_stats', none)",
            "mark_superseded_runs (ops.filter_stats): partition_by is required",
        ),
    ],
)
def test_bad_filter_statistics_arguments_fail_compilation(dbt, call: str, message: str) -> None:
    assert message in compile_error(dbt, "{{ " + call + " }}")


@pytest.mark.parametrize("unique_key", ["none", "[]"])
def test_an_scd2_test_without_a_key_fails_compilation(dbt, unique_key: str) -> None:
    error = compile_error(
        dbt, "{{ spark__test_scd2_no_overlap('m', " + unique_key + ", 'valid_from', 'valid_to') }}"
    )
    assert "scd2_no_overlap on m: `unique_key` must be a column" in error


def test_point_in_time_join_needs_a_key_mapping(dbt) -> None:
    error = compile_error(dbt, "{{ point_in_time_join('d', 'u', 'f.t', ['user_id']) }}")
    assert "point_in_time_join on d: `keys` must map fact columns" in error


def test_pseudonymize_is_a_salted_hash_the_sql_never_spells(spark) -> None:
    from python_jobs.spark import pii_salt

    sql = compile_sql("select {{ pseudonymize(\"lower(trim(' Ann@Example.com '))\") }} as p")
    salt = pii_salt()
    assert salt not in sql and "${spark.lakehouse.pii_salt}" in sql
    expected = hashlib.sha256(f"{salt}|ann@example.com".encode()).hexdigest()
    assert spark.sql(sql).first().p == expected
    assert (
        spark.sql(compile_sql("select {{ pseudonymize('cast(null as string)') }} as p")).first().p
        is None
    )
