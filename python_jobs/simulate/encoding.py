"""Value encodings shared by the simulator's writers and its ground truth.

Debezium's PostgreSQL defaults (contract section 2) on the wire, plain text in the truth:

- ``numeric(p, s)``: base64 of the big-endian two's-complement *minimal-length* unscaled
  value (Java ``BigInteger.toByteArray``), e.g. ``1.28`` -> 128 -> ``00 80`` -> ``AIA=``.
  In the truth: a string with exactly ``s`` decimals (``"123.40"``).
- ``timestamp``: epoch microseconds (``io.debezium.time.MicroTimestamp``). In the truth:
  ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC).
- Visit ``event_time``: ISO-8601 UTC with milliseconds (``2024-10-01T08:15:30.123Z``).

Internally the simulator keeps decimals as unscaled ints and times as ints (micros or
millis), so no float ever touches a value.
"""

from __future__ import annotations

import base64
from datetime import date, timedelta
from functools import lru_cache

DAY_MS = 86_400_000
DAY_US = 86_400_000_000
_EPOCH_DATE = date(1970, 1, 1)


def encode_decimal(unscaled: int) -> str:
    """Base64 of ``unscaled`` as Java's ``BigInteger.toByteArray()`` would give it."""
    magnitude = unscaled if unscaled >= 0 else ~unscaled
    length = magnitude.bit_length() // 8 + 1
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode("ascii")


def decode_decimal(text: str) -> int:
    """The unscaled value of a base64 Connect ``Decimal``."""
    return int.from_bytes(base64.b64decode(text), "big", signed=True)


def format_decimal(unscaled: int, scale: int = 2) -> str:
    """``12340, 2`` -> ``"123.40"``; ``-5, 2`` -> ``"-0.05"``."""
    sign = "-" if unscaled < 0 else ""
    whole, frac = divmod(abs(unscaled), 10**scale)
    return f"{sign}{whole}.{frac:0{scale}d}"


@lru_cache(maxsize=8192)
def day_text(day: int) -> str:
    """Days since the epoch -> ``YYYY-MM-DD``."""
    return (_EPOCH_DATE + timedelta(days=day)).isoformat()


@lru_cache(maxsize=65536)
def _hour_text(hour: int) -> str:
    """Hours since the epoch -> ``YYYY-MM-DD HH:``."""
    day, hours = divmod(hour, 24)
    return f"{day_text(day)} {hours:02d}:"


def format_micros(micros: int) -> str:
    """Epoch microseconds -> ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC)."""
    hour, rest = divmod(micros, 3_600_000_000)
    seconds, frac = divmod(rest, 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    return f"{_hour_text(hour)}{minutes:02d}:{seconds:02d}.{frac:06d}"


def format_millis(millis: int) -> str:
    """Epoch milliseconds -> ``YYYY-MM-DD HH:MM:SS.ffffff`` (UTC)."""
    return format_micros(millis * 1000)


def iso_millis(millis: int) -> str:
    """Epoch milliseconds -> ``2024-10-01T08:15:30.123Z``."""
    day, rest = divmod(millis, DAY_MS)
    seconds, frac = divmod(rest, 1000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{day_text(day)}T{hours:02d}:{minutes:02d}:{seconds:02d}.{frac:03d}Z"


def date_to_millis(day: date) -> int:
    """Midnight UTC of ``day`` in epoch milliseconds."""
    return (day - _EPOCH_DATE).days * DAY_MS


def millis_to_date_text(millis: int) -> str:
    """The UTC date of an epoch-milliseconds instant, ``YYYY-MM-DD``."""
    return day_text(millis // DAY_MS)
