"""Iceberg's partition transforms, on Arrow arrays and on single values.

A partition field is a transform of one column: ``identity``, ``year``, ``month``, ``day``,
``hour``, ``bucket[N]`` or ``truncate[W]``, with the semantics of Iceberg's spec ("Partition
Transforms"), bit for bit, so that an Iceberg export can declare the same spec over the same
files and its readers prune exactly as mvtable does:

* ``year``/``month``/``day``/``hour`` count whole years, months, days and hours since
  1970-01-01 00:00 UTC, flooring before the epoch. A timestamp with a time zone is its UTC
  instant; one without is taken as it is written.
* ``bucket[N]`` is ``(murmur3_x86_32(bytes) & 0x7FFFFFFF) % N`` over Iceberg's byte form of
  the value: integers, dates (as days) and timestamps (as microseconds) are hashed as 8-byte
  little-endian longs, strings as UTF-8, binaries as they are, decimals as their unscaled
  value's shortest big-endian two's complement.
* ``truncate[W]`` floors integers and unscaled decimals to a multiple of ``W`` and keeps the
  first ``W`` code points of a string or bytes of a binary.

Nulls map to null. ``apply`` works on whole arrays (a writer splits every batch it writes by
partition, so it must be vectorised; hashing 8-byte values is done with numpy); ``apply_scalar``
works on the Python values filters carry (pruning transforms a filter's literal once).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import PartitionSpecError

__all__ = ["TEMPORAL", "Transform", "parse_transform"]

TEMPORAL = ("year", "month", "day", "hour")
_NAMES = ("identity", *TEMPORAL, "bucket", "truncate")
# what Spark SQL and Iceberg's Spark DDL call them
_ALIASES = {"years": "year", "months": "month", "days": "day", "hours": "hour", "trunc": "truncate"}
_SUFFIX = {"year": "year", "month": "month", "day": "day", "hour": "hour", "bucket": "bucket", "truncate": "trunc"}
_TEXT = re.compile(r"^\s*([a-z]+)\s*(?:\[\s*(-?\d+)\s*\])?\s*$")
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_US_PER_DAY = 86_400_000_000
_US_PER_HOUR = 3_600_000_000
_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0}  # ns: divided, see _micros


@dataclass(frozen=True)
class Transform:
    """One of Iceberg's transforms; ``param`` is ``bucket``'s N or ``truncate``'s W."""

    name: str
    param: int | None = None

    @property
    def text(self) -> str:
        """Iceberg's text form: ``day``, ``bucket[16]``, ``truncate[4]``."""
        return f"{self.name}[{self.param}]" if self.param is not None else self.name

    @property
    def temporal(self) -> bool:
        return self.name in TEMPORAL

    def default_name(self, column: str) -> str:
        """The partition field's name Iceberg gives it: ``ts_day``, ``id_bucket``; the column itself for identity."""
        return column if self.name == "identity" else f"{column}_{_SUFFIX[self.name]}"

    def check_source(self, source: pa.DataType, column: str) -> None:
        """Refuse a column type this transform does not take (Iceberg's rules).

        Raises:
            PartitionSpecError: names the column, its type and the types the transform takes."""
        if _nested(source):
            raise PartitionSpecError(f"cannot partition by {self.text}({column}): {column} is a {source}, not a primitive column")
        if not _accepts(self.name, source):
            raise PartitionSpecError(
                f"cannot partition by {self.text}({column}): {self.name} does not take a {source} column "
                f"(it takes {_ACCEPTED[self.name]})"
            )

    def result_type(self, source: pa.DataType) -> pa.DataType:
        """The partition value's type: the source's for identity and truncate, a date for day, int32 otherwise."""
        if self.name in ("identity", "truncate"):
            return source
        return pa.date32() if self.name == "day" else pa.int32()

    def apply(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The partition value of every element (nulls stay null), as an array of ``result_type``."""
        array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        if self.name == "identity":
            return array
        if self.name == "truncate":
            return _truncate(array, _param(self))
        if self.name == "bucket":
            return _bucket(array, _param(self))
        return _temporal(self.name, array)

    def apply_scalar(self, value: Any, source: pa.DataType) -> Any:
        """The partition value of one Python value of the source column's type, as ``apply`` gives it.

        For day that is a ``datetime.date``; year, month, hour and bucket give an int."""
        if value is None:
            return None
        return self.apply(pa.array([value], type=source))[0].as_py()


def parse_transform(text: str) -> Transform:
    """A transform from Iceberg's text (``identity``, ``day``, ``bucket[16]``, ``truncate[4]``).

    Raises:
        PartitionSpecError: an unknown transform, or a width or bucket count that is missing or not positive."""
    m = _TEXT.match(text.lower()) if isinstance(text, str) else None
    if m is None:
        raise PartitionSpecError(f"{text!r} is not a partition transform; the transforms are {', '.join(_NAMES)}")
    name = _ALIASES.get(m.group(1), m.group(1))
    param = int(m.group(2)) if m.group(2) is not None else None
    return make_transform(name, param, what=text)


def make_transform(name: str, param: int | None, *, what: str) -> Transform:
    """A checked transform; ``what`` is the text the caller wrote, for the error.

    Raises:
        PartitionSpecError: an unknown name, or a parameter missing, given where none goes, or not positive."""
    name = _ALIASES.get(name, name)
    if name not in _NAMES:
        raise PartitionSpecError(f"unknown partition transform {name!r} in {what!r}; the transforms are {', '.join(_NAMES)}")
    if name in ("bucket", "truncate"):
        if param is None or param <= 0:
            what_param = "number of buckets" if name == "bucket" else "width"
            raise PartitionSpecError(f"{what!r}: {name} needs a positive {what_param}, e.g. {name}(16, column)")
    elif param is not None:
        raise PartitionSpecError(f"{what!r}: {name} takes no parameter")
    return Transform(name, param)


def _param(t: Transform) -> int:
    assert t.param is not None  # make_transform guarantees it
    return t.param


def _nested(t: pa.DataType) -> bool:
    return bool(pa.types.is_nested(t) or pa.types.is_dictionary(t))


def _is_int(t: pa.DataType) -> bool:
    return bool(pa.types.is_signed_integer(t))


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))


_ACCEPTED = {
    "identity": "any primitive column",
    "year": "date and timestamp columns",
    "month": "date and timestamp columns",
    "day": "date and timestamp columns",
    "hour": "timestamp columns",
    "bucket": "integer, decimal, date, timestamp, string and binary columns",
    "truncate": "integer, decimal, string and binary columns",
}


def _accepts(name: str, t: pa.DataType) -> bool:
    if name == "identity":
        return True
    if name in ("year", "month", "day"):
        return bool(pa.types.is_date32(t) or pa.types.is_timestamp(t))
    if name == "hour":
        return bool(pa.types.is_timestamp(t))
    if name == "truncate":
        return _is_int(t) or bool(pa.types.is_decimal(t)) or _is_string(t) or _is_binary(t)
    # bucket
    return (
        _is_int(t)
        or bool(pa.types.is_decimal(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t))
        or _is_string(t)
        or _is_binary(t)
    )


# --- temporal -------------------------------------------------------------------------


def _ints(array: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """The values as int64 numpy (nulls as 0) and the null mask (None without nulls)."""
    ints = array.cast(pa.int64()) if not pa.types.is_int64(array.type) else array
    mask = np.asarray(ints.is_null()) if ints.null_count else None
    return np.asarray(ints.fill_null(0) if mask is not None else ints, dtype=np.int64), mask


def _micros(array: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """A timestamp array as microseconds since the epoch (UTC for zoned ones), floored."""
    t = array.type
    raw, mask = _ints(array.view(pa.int64()) if not pa.types.is_int64(t) else array)
    if t.unit == "ns":
        return np.floor_divide(raw, 1000), mask
    return raw * _US_PER_UNIT[t.unit], mask


def _temporal(name: str, array: pa.Array) -> pa.Array:
    if pa.types.is_date32(array.type):
        days, mask = _ints(array.view(pa.int32()))
        if name == "day":
            return pa.array(days.astype(np.int32), type=pa.int32(), mask=mask).view(pa.date32())
    else:
        micros, mask = _micros(array)
        if name == "hour":
            return pa.array(np.floor_divide(micros, _US_PER_HOUR).astype(np.int32), type=pa.int32(), mask=mask)
        days = np.floor_divide(micros, _US_PER_DAY)
        if name == "day":
            return pa.array(days.astype(np.int32), type=pa.int32(), mask=mask).view(pa.date32())
    # year and month from the civil date of each day
    dates = pa.array(days.astype(np.int32), type=pa.int32()).view(pa.date32())
    years = np.asarray(pc.year(dates), dtype=np.int64) - 1970
    if name == "year":
        return pa.array(years.astype(np.int32), type=pa.int32(), mask=mask)
    months = years * 12 + np.asarray(pc.month(dates), dtype=np.int64) - 1
    return pa.array(months.astype(np.int32), type=pa.int32(), mask=mask)


# --- truncate -------------------------------------------------------------------------


def _truncate(array: pa.Array, width: int) -> pa.Array:
    t = array.type
    if _is_int(t):
        v, mask = _ints(array)
        return pa.array(v - np.mod(v, width), type=pa.int64(), mask=mask).cast(t)
    if pa.types.is_decimal(t):
        out = [None if d is None else _truncate_decimal(d, width, t.scale) for d in array.to_pylist()]
        return pa.array(out, type=t)
    if _is_string(t):
        return pc.utf8_slice_codeunits(array, 0, width)
    if pa.types.is_fixed_size_binary(t):
        return pa.array([None if b is None else b[:width] for b in array.to_pylist()], type=pa.binary())
    return pc.binary_slice(array, 0, width)


def _truncate_decimal(d: Decimal, width: int, scale: int) -> Decimal:
    unscaled = int(d.scaleb(scale))
    return Decimal(unscaled - unscaled % width).scaleb(-scale)


# --- bucket ---------------------------------------------------------------------------

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_M, _N = np.uint32(5), np.uint32(0xE6546B64)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _murmur3_longs(values: np.ndarray) -> np.ndarray:
    """Murmur3 x86 32-bit (seed 0) of each int64 as its 8 little-endian bytes, as signed int32.

    The whole array at once: the two 4-byte blocks of a long are its low and high words."""
    with np.errstate(over="ignore"):
        words = values.astype("<i8").view("<u4").reshape(-1, 2)
        h = np.zeros(len(values), dtype=np.uint32)
        for block in (words[:, 0], words[:, 1]):
            k = block * _C1
            k = _rotl(k, 15) * _C2
            h ^= k
            h = _rotl(h, 13) * _M + _N
        h ^= np.uint32(8)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)


def _bucket(array: pa.Array, n: int) -> pa.Array:
    t = array.type
    if _is_int(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t):
        if pa.types.is_timestamp(t):
            longs, mask = _micros(array)
        else:
            longs, mask = _ints(array.view(pa.int32()) if pa.types.is_date32(t) else array)
        hashes = _murmur3_longs(longs).astype(np.int64)
        return pa.array(((hashes & 0x7FFFFFFF) % n).astype(np.int32), type=pa.int32(), mask=mask)
    out: list[int | None] = []
    for value in array.to_pylist():
        if value is None:
            out.append(None)
            continue
        data = _decimal_bytes(value, t.scale) if pa.types.is_decimal(t) else value.encode() if isinstance(value, str) else value
        out.append((mmh3.hash(data, 0, signed=True) & 0x7FFFFFFF) % n)
    return pa.array(out, type=pa.int32())


def _decimal_bytes(d: Decimal, scale: int) -> bytes:
    """The unscaled value's shortest big-endian two's complement (Java's ``BigInteger.toByteArray``)."""
    unscaled = int(d.scaleb(scale))
    length = unscaled.bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)
