"""Each planned file's partition as bounds on its source columns, for the JVM to skip files by Spark's own filters.

The native scan (``native_plan``) is planned in the one planner call Spark makes before it
knows the query's filters, so it names every file of the version. Spark hands the filters
to the file index of the scan instead (``FileIndex.listFiles(…, dataFilters)``, the hook
Delta's data skipping uses), and ``PlannedFileIndex.java`` drops there every file whose
bounds no filter row can meet: a ``WHERE ts >= …`` on a ``day(ts)`` table reads only those
days' files, as a filter on a Hive partition column would.

A partition tells, per field, what every row of the file satisfies about its column:

* ``{"kind": "null"}``: the column is null in every row (a null partition value);
* ``{"kind": "eq", "value": v}``: it equals ``v`` (identity);
* ``{"kind": "range", "lo": a, "hi": b}``: ``a <= value < b`` (time transforms, ``truncate``;
  no ``hi``: unbounded);
* ``{"kind": "bucket", "n": n, "value": b}``: Iceberg's ``bucket[n]`` of the value is ``b``
  (integers, dates and timestamps, which Iceberg hashes as the long Spark holds them as);
* ``{"kind": "notNull"}``: only that it is not null (other buckets, and what has no order
  Spark compares the same way: binaries, booleans, floats that are not finite).

Where every file of a scan fixes a column to one value (``eq``, ``null``, or a ``range`` one
unit wide on a date or an integer: a ``day`` of a date), ``PartitionValues.java`` serves it
as a Spark partition column: not read from the files, and filtered once per partition.

Values are Spark's internal ones: a date as days, a timestamp as microseconds, numbers as
JSON numbers, a decimal as text (``"type": "dec"``), a string as text (``"type": "str"``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mvtable.lineage.snapshot import Snapshot

from ..partitions.spec import spec_columns
from ..partitions.transforms import Transform
from ..partitions.values import decode_value
from ..schema import schema_from_json

__all__ = ["file_bounds"]

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_US_PER_DAY = 86_400_000_000
_US_PER_HOUR = 3_600_000_000


def file_bounds(snapshot: Snapshot, segments: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """Segment id → the bounds its partition puts on its columns (unpartitioned segments have none).

    Each distinct partition is worked out once."""
    specs = {sid: spec_columns(spec, snapshot.table_schema) for sid, spec in snapshot.partition_specs.items() if spec.fields}
    if not specs:
        return {}
    arrow = schema_from_json(snapshot.table_schema)
    known: dict[tuple[int, tuple[Any, ...]], list[dict[str, Any]]] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    for seg in segments:
        spec_id, partition = seg.file.spec_id, seg.file.partition
        if spec_id is None or partition is None or spec_id not in specs:
            continue
        key = (spec_id, tuple(partition))
        if key not in known:
            known[key] = _bounds(specs[spec_id], key[1], arrow)
        if known[key]:
            out[seg.id] = known[key]
    return out


def _bounds(
    columns: list[tuple[Any, str | None, Transform]], partition: tuple[Any, ...], arrow: pa.Schema
) -> list[dict[str, Any]]:
    out = []
    for (_, column, transform), stored in zip(columns, partition):
        if column is None:  # its column was dropped: nothing to say
            continue
        source = arrow.field(column).type
        value = decode_value(stored, transform, source)
        bound = {"kind": "null"} if value is None else _bound(transform, source, value)
        out.append({"column": column, **bound})
    return out


def _bound(transform: Transform, source: pa.DataType, value: Any) -> dict[str, Any]:
    if transform.name == "identity":
        physical = _physical(value, source)
        return {"kind": "notNull"} if physical is None else {"kind": "eq", "value": physical[1], "type": physical[0]}
    if transform.temporal:
        lo, hi = _time_range(transform.name, value, date=pa.types.is_date32(source))
        return {"kind": "range", "lo": lo, "hi": hi, "type": "num"}
    if transform.name == "truncate":
        width = transform.param or 1
        if pa.types.is_integer(source):
            return {"kind": "range", "lo": value, "hi": value + width, "type": "num"}
        if pa.types.is_decimal(source):
            step = Decimal(width).scaleb(-source.scale)
            return {"kind": "range", "lo": str(value), "hi": str(value + step), "type": "dec"}
        if pa.types.is_string(source) or pa.types.is_large_string(source):
            if len(value) < width:
                return {"kind": "eq", "value": value, "type": "str"}
            return {"kind": "range", "lo": value, "hi": _after_prefix(value), "type": "str"}
    if transform.name == "bucket" and (
        pa.types.is_integer(source) or pa.types.is_date32(source) or pa.types.is_timestamp(source)
    ):
        # Iceberg hashes these as the 8-byte long Spark holds them as (days, microseconds)
        return {"kind": "bucket", "n": transform.param, "value": value}
    return {"kind": "notNull"}


def _physical(value: Any, source: pa.DataType) -> tuple[str, Any] | None:
    """(type tag, Spark's internal value) of an identity value; None where only "not null" is safe to say."""
    if isinstance(value, (bool, bytes)):
        return None
    if isinstance(value, dt.datetime):
        stamp = value.replace(tzinfo=None) - (value.utcoffset() or dt.timedelta()) if value.tzinfo else value
        return "num", (stamp - _EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return "num", (value - _EPOCH_DATE).days
    if isinstance(value, Decimal):
        return "dec", str(value)
    if isinstance(value, float):
        return ("num", value) if math.isfinite(value) else None
    if isinstance(value, int):
        return "num", value
    if isinstance(value, str):
        return "str", value
    return None


def _time_range(name: str, value: Any, *, date: bool) -> tuple[int, int]:
    """[start, end) of a year/month/day/hour partition as days (a date column) or microseconds."""
    if name == "hour":
        return value * _US_PER_HOUR, (value + 1) * _US_PER_HOUR
    if name == "day":
        first = (value - _EPOCH_DATE).days
        days = (first, first + 1)
    else:
        months = value * 12 if name == "year" else value
        span = 12 if name == "year" else 1
        days = (_month_start(months), _month_start(months + span))
    return days if date else (days[0] * _US_PER_DAY, days[1] * _US_PER_DAY)


def _month_start(months: int) -> int:
    year, month = divmod(months, 12)
    return (dt.date(1970 + year, month + 1, 1) - _EPOCH_DATE).days


def _after_prefix(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` (None: there is none)."""
    last = ord(prefix[-1])
    if last >= 0x10FFFF:
        return None
    nxt = last + 1 if not 0xD800 <= last + 1 < 0xE000 else 0xE000
    return prefix[:-1] + chr(nxt)
