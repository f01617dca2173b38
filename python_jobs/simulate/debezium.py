"""Debezium 2.x PostgreSQL change events as Kafka Connect's JSON converter writes them.

A *bare* line is the envelope itself (``schemas.enable=false``)::

    {"before":…,"after":…,"source":{…},"op":"u","ts_ms":…,"transaction":null}

a *wrapped* line carries the Connect schema beside it (``schemas.enable=true``)::

    {"schema":{"type":"struct","name":"blog.public.users.Envelope",…},"payload":{…}}

Lines are assembled from pre-serialised pieces (the schema of each table version is
serialised once; ``source`` is formatted from a template), which keeps a million events
well within a minute.
"""

from __future__ import annotations

import json
from typing import Any

from python_jobs.simulate.jsonfmt import Formatter, compile_formatter
from python_jobs.simulate.model import Column, Row, TableSpec

CONNECTOR_VERSION = "2.7.3.Final"
SERVER_NAME = "blog"  # the connector's topic.prefix
DATABASE = "blog"
SCHEMA = "public"
TOMBSTONE = "null"

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def dumps(value: Any) -> str:
    """Compact JSON, UTF-8 characters kept as they are (like the JSON converter)."""
    return _dumps(value)


# --- Connect schemas -------------------------------------------------------------------


def field_schema(column: Column, optional: bool) -> dict[str, Any]:
    """The Connect schema of one column, as Debezium's PostgreSQL connector derives it."""
    if column.kind == "int64":
        schema: dict[str, Any] = {"type": "int64", "optional": optional}
    elif column.kind == "string":
        schema = {"type": "string", "optional": optional}
    elif column.kind == "timestamp":
        schema = {
            "type": "int64",
            "optional": optional,
            "name": "io.debezium.time.MicroTimestamp",
            "version": 1,
        }
    elif column.kind == "decimal":
        schema = {
            "type": "bytes",
            "optional": optional,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {
                "scale": str(column.scale),
                "connect.decimal.precision": str(column.precision),
            },
        }
    else:
        raise ValueError(f"unknown column kind {column.kind!r}")
    schema["field"] = column.name
    return schema


SOURCE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {
                "allowed": "true,first,first_in_data_collection,"
                "last_in_data_collection,last,false,incremental"
            },
            "default": "false",
            "field": "snapshot",
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "field": "source",
}

TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


def envelope_schema(table: TableSpec, columns: tuple[str, ...]) -> dict[str, Any]:
    """The Connect schema of ``<server>.<schema>.<table>.Envelope`` for these columns.

    Non-key columns are optional: with the default replica identity a delete's
    ``before`` holds only the key, the other columns null.
    """
    by_name = {c.name: c for c in table.all_columns}
    value_name = f"{SERVER_NAME}.{SCHEMA}.{table.name}.Value"
    fields = [field_schema(by_name[name], name != table.key) for name in columns]

    def value(field_name: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": fields,
            "optional": True,
            "name": value_name,
            "field": field_name,
        }

    return {
        "type": "struct",
        "fields": [
            value("before"),
            value("after"),
            SOURCE_SCHEMA,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            TRANSACTION_SCHEMA,
        ],
        "optional": False,
        "name": f"{SERVER_NAME}.{SCHEMA}.{table.name}.Envelope",
        "version": 1,
    }


_SCHEMA_JSON: dict[tuple[str, tuple[str, ...]], str] = {}


def envelope_schema_json(table: TableSpec, columns: tuple[str, ...]) -> str:
    """``envelope_schema`` serialised, once per table version."""
    cache_key = (table.name, columns)
    text = _SCHEMA_JSON.get(cache_key)
    if text is None:
        text = _SCHEMA_JSON[cache_key] = dumps(envelope_schema(table, columns))
    return text


# --- payloads --------------------------------------------------------------------------

_SOURCE_TEMPLATE = (
    '{"version":"' + CONNECTOR_VERSION + '","connector":"postgresql","name":"'
    + SERVER_NAME + '","ts_ms":%d,"snapshot":"%s","db":"' + DATABASE
    + '","sequence":"[%s,\\"%d\\"]","schema":"' + SCHEMA
    + '","table":"%s","txId":%d,"lsn":%d,"xmin":null}'
)  # fmt: skip


def source_json(
    table: str,
    commit_ms: int,
    snapshot: str,
    tx_id: int,
    lsn: int,
    last_commit_lsn: int | None,
) -> str:
    """The ``source`` block; ``sequence`` is the JSON string ``["<lastCommitLsn>","<lsn>"]``."""
    last = "null" if last_commit_lsn is None else f'\\"{last_commit_lsn}\\"'
    return _SOURCE_TEMPLATE % (commit_ms, snapshot, last, lsn, table, tx_id, lsn)


WIRE_KINDS = {"int64": "int", "string": "str", "timestamp": "int", "decimal": "decimal_b64"}
_ROW_FORMATTERS: dict[tuple[str, tuple[str, ...]], Formatter] = {}
_KEY_ONLY: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}


def row_formatter(table: TableSpec, columns: tuple[str, ...]) -> Formatter:
    """``row -> JSON`` of a row image with Debezium's value encodings, for these columns.

    ``timestamp`` stays epoch microseconds; ``numeric`` becomes base64 unscaled bytes.
    """
    cache_key = (table.name, columns)
    formatter = _ROW_FORMATTERS.get(cache_key)
    if formatter is None:
        kinds = {c.name: WIRE_KINDS[c.kind] for c in table.all_columns}
        formatter = compile_formatter([(name, kinds[name]) for name in columns])
        _ROW_FORMATTERS[cache_key] = formatter
    return formatter


def row_json(table: TableSpec, row: Row, columns: tuple[str, ...]) -> str:
    """An after image as the JSON converter writes it."""
    return row_formatter(table, columns)(row)


def key_only_json(table: TableSpec, key: int, columns: tuple[str, ...]) -> str:
    """A delete's ``before`` under the default replica identity: the key, others null."""
    cache_key = (table.name, columns)
    parts = _KEY_ONLY.get(cache_key)
    if parts is None:
        marker = -987654321
        text = _dumps({name: (marker if name == table.key else None) for name in columns})
        head, _, tail = text.partition(str(marker))
        parts = _KEY_ONLY[cache_key] = (head, tail)
    return f"{parts[0]}{key}{parts[1]}"


def envelope(op: str, before: str, after: str, source: str, ts_ms: int) -> str:
    """A bare envelope line from pre-serialised parts."""
    return (
        f'{{"before":{before},"after":{after},"source":{source},'
        f'"op":"{op}","ts_ms":{ts_ms},"transaction":null}}'
    )


def wrap(schema_json: str, payload: str) -> str:
    """The ``{"schema":…,"payload":…}`` form of an envelope."""
    return f'{{"schema":{schema_json},"payload":{payload}}}'
