"""Partition values between Python and the log's JSON.

The log keeps each segment's partition as a tuple of JSON scalars, one per spec field, in the
form column statistics use (``connector.stats``) so that one reading of the log serves both:
time transforms and buckets are plain integers (``day`` as days since 1970-01-01), an
identity or truncate value is its column's statistic form (a date as ISO text, a timestamp as
integer microseconds, a decimal as text), a binary value is base64 text and a float that is
not finite is ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``. Null is null.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mvtable.errors import CorruptMetadataError

from .transforms import Transform

__all__ = ["decode_value", "encode_value"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_value(value: Any, transform: Transform, source: pa.DataType) -> Any:
    """The JSON scalar the log stores for partition value ``value`` (as ``Transform.apply`` gives it)."""
    if value is None:
        return None
    if transform.name == "day":
        return (value - _EPOCH_DATE).days
    if transform.name in ("year", "month", "hour", "bucket"):
        return int(value)
    if pa.types.is_date32(source):
        return value.isoformat()
    if pa.types.is_timestamp(source):
        stamp = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        return (stamp - _EPOCH) // dt.timedelta(microseconds=1)
    if pa.types.is_decimal(source):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def decode_value(stored: Any, transform: Transform, source: pa.DataType, *, where: str = "the log") -> Any:
    """The Python partition value of a stored JSON scalar: what ``Transform.apply(...).as_py()`` gives.

    Raises:
        CorruptMetadataError: the stored value does not fit the field (``where`` names the file)."""
    if stored is None:
        return None
    try:
        return _decode(stored, transform, source)
    except (TypeError, ValueError, ArithmeticError, OverflowError) as exc:
        raise CorruptMetadataError(
            where, f"partition value {stored!r} does not fit {transform.text} of a {source} column ({exc})"
        ) from None


def _decode(stored: Any, transform: Transform, source: pa.DataType) -> Any:
    if transform.name == "day":
        return _EPOCH_DATE + dt.timedelta(days=_int(stored))
    if transform.name in ("year", "month", "hour", "bucket"):
        return _int(stored)
    if pa.types.is_date32(source):
        return dt.date.fromisoformat(stored)
    if pa.types.is_timestamp(source):
        stamp = _EPOCH + dt.timedelta(microseconds=_int(stored))
        return stamp if source.tz is not None else stamp.replace(tzinfo=None)
    if pa.types.is_decimal(source):
        if not isinstance(stored, str):
            raise TypeError("a decimal is stored as text")
        return Decimal(stored)
    if pa.types.is_binary(source) or pa.types.is_large_binary(source) or pa.types.is_fixed_size_binary(source):
        return base64.b64decode(stored, validate=True)
    if pa.types.is_floating(source):
        return _NON_FINITE[stored] if isinstance(stored, str) else float(stored)
    if pa.types.is_boolean(source) and not isinstance(stored, bool):
        raise TypeError("a boolean is stored as true or false")
    if (pa.types.is_string(source) or pa.types.is_large_string(source)) and not isinstance(stored, str):
        raise TypeError("a string is stored as text")
    if pa.types.is_integer(source):
        return _int(stored)
    return stored


def _int(stored: Any) -> int:
    if isinstance(stored, bool) or not isinstance(stored, int):
        raise TypeError("an integer is expected")
    return stored
