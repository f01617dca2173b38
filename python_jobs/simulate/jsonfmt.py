"""Compiled JSON formatters for flat rows: the simulator's hot path.

``json.dumps`` costs 2-4 µs for a small dict (its C encoder emits one chunk per token
and joins them). A formatter compiled for one fixed list of fields builds the same text
with a single f-string, about three times faster; with two formatted rows per CDC event
(the landing line and the truth version) that is most of the difference between a
million events in half a minute and in a quarter of one.

The output is byte-identical to ``json.dumps(converted_row, separators=(",", ":"),
ensure_ascii=False)`` where ``converted_row`` has the fields in the given order, each
value converted by its kind (tests check this):

- ``int``: a JSON number (ints only).
- ``str``: a JSON string (escaped like ``json.dumps`` with ``ensure_ascii=False``).
- ``decimal_b64``: an unscaled int as a Connect ``Decimal``: base64 in a string.
- ``timestamp_text``: epoch microseconds as ``"YYYY-MM-DD HH:MM:SS.ffffff"``.
- ``decimal_text:<scale>``: an unscaled int as ``"123.40"``.

``None`` and missing keys become ``null``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from python_jobs.simulate.encoding import encode_decimal, format_decimal, format_micros

Formatter = Callable[[Mapping[str, Any]], str]

_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_NAMESPACE: dict[str, Any] = {
    "esc": encode_basestring,
    "b64": encode_decimal,
    "ts": format_micros,
    "dec": format_decimal,
    "Q": '"',
}


def _value_expr(var: str, kind: str) -> str:
    if kind == "int":
        return var
    if kind == "str":
        return f"esc({var})"
    if kind == "decimal_b64":
        return f"Q + b64({var}) + Q"
    if kind == "timestamp_text":
        return f"Q + ts({var}) + Q"
    if kind.startswith("decimal_text:"):
        scale = int(kind.split(":", 1)[1])
        return f"Q + dec({var}, {scale}) + Q"
    raise ValueError(f"unknown field kind {kind!r}")


def compile_formatter(fields: Sequence[tuple[str, str]]) -> Formatter:
    """A function ``row -> JSON object text`` for these ``(name, kind)`` fields."""
    if not fields:
        raise ValueError("no fields")
    loads = []
    pieces = []
    for i, (name, kind) in enumerate(fields):
        if not _NAME.match(name):
            raise ValueError(f"unsupported field name {name!r}")
        var = f"v{i}"
        loads.append(f"    {var} = r.get({name!r})")
        separator = "{{" if i == 0 else ","
        pieces.append(
            f'{separator}"{name}":{{"null" if {var} is None else {_value_expr(var, kind)}}}'
        )
    source = (
        "def format_row(r):\n" + "\n".join(loads) + "\n    return f'" + "".join(pieces) + "}}'\n"
    )
    namespace = dict(_NAMESPACE)
    exec(compile(source, f"<jsonfmt {[n for n, _ in fields]}>", "exec"), namespace)  # noqa: S102
    formatter: Formatter = namespace["format_row"]
    formatter.__doc__ = f"JSON text of a row with fields {list(fields)}."
    return formatter
