"""Per-row-group column statistics.

Computed when a segment is written, kept in the log, and used to skip row groups that a pushed
filter cannot match.

Values are stored in a JSON-friendly form chosen per Arrow type (dates as ISO strings,
timestamps as integer microseconds, decimals as strings) and decoded back with the
column's type, so comparisons with filter literals are exact. Anything we cannot encode
exactly (binary, NaN, nested) simply has no statistics, and a row group without
statistics is never skipped.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.lineage.actions import ColumnStats, RowGroupInfo
from mvtable.lineage.descriptors import RowGroupDescriptor

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_DATE_EPOCH = dt.date(1970, 1, 1)


def statable(t: pa.DataType) -> bool:
    """Whether row groups keep exact min/max statistics of a column of type ``t``."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    )


def date_bound(days: int | None) -> str | None:
    """A ``date32`` min or max (days since the epoch) as the log stores it, or ``None`` for a day Python cannot hold.

    ``date32`` spans millions of years, ISO dates (and the filter literals Spark hands over) only
    years 1 to 9999. A row group with such a bound keeps no min/max for the column, so it is never
    skipped by it."""
    if days is None:
        return None
    try:
        return (_DATE_EPOCH + dt.timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def encode_stat(value: Any, t: pa.DataType) -> Any:
    """A min or max as the log stores it (see the module docstring)."""
    if value is None:
        return None
    if pa.types.is_floating(t):
        return float(value) if math.isfinite(value) else None
    if pa.types.is_date32(t):
        return value.isoformat()
    if pa.types.is_decimal(t):
        return str(value)
    return value


def column_stats(chunk: pa.Table) -> dict[str, ColumnStats]:
    out: dict[str, ColumnStats] = {}
    for field in chunk.schema:
        if not statable(field.type):
            continue
        col = chunk.column(field.name)
        nulls = col.null_count
        if pa.types.is_timestamp(field.type):
            ints = pc.cast(col, pa.timestamp("us", tz=field.type.tz)).cast(pa.int64())
            mm = pc.min_max(ints).as_py()
        elif pa.types.is_floating(field.type) and pc.any(pc.is_nan(col)).as_py():
            out[field.name] = ColumnStats(null_count=nulls)
            continue
        elif pa.types.is_date32(field.type):  # as days: a Python date cannot hold every date32
            days = pc.min_max(col.cast(pa.int32())).as_py()
            lo, hi = date_bound(days["min"]), date_bound(days["max"])
            out[field.name] = ColumnStats(min=lo, max=hi, null_count=nulls) if lo and hi else ColumnStats(null_count=nulls)
            continue
        else:
            mm = pc.min_max(col).as_py()
        out[field.name] = ColumnStats(
            min=encode_stat(mm["min"], field.type), max=encode_stat(mm["max"], field.type), null_count=nulls
        )
    return out


def decode(value: Any, t: pa.DataType) -> Any:
    """Stored value → the Python value Spark hands us in filters for this type."""
    if value is None:
        return None
    if pa.types.is_date32(t):
        return dt.date.fromisoformat(value)
    if pa.types.is_timestamp(t):
        ts = _EPOCH + dt.timedelta(microseconds=int(value))
        return ts if t.tz is not None else ts.replace(tzinfo=None)
    if pa.types.is_decimal(t):
        return Decimal(value)
    return value


COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
STRING_OPS = ("starts_with", "ends_with", "contains")
OPS = (*COMPARISONS, "in", "is_null", "not_null", *STRING_OPS)


@dataclass(frozen=True)
class Predicate:
    """One conjunct a reader can evaluate exactly: ``column op value``.

    ``op`` is one of ``== != < <= > >= in is_null not_null starts_with ends_with contains``;
    ``value`` holds a tuple for ``in``. Used for pruning by statistics and as an exact Arrow filter
    (``predicates.check_predicates`` checks one against the table's schema when a scan is planned)."""

    column: str
    op: str
    value: Any = None

    def expression(self) -> pc.Expression:
        f = pc.field(self.column)
        if self.op == "is_null":
            return f.is_null()
        if self.op == "not_null":
            return f.is_valid()
        if self.op == "in":
            return f.isin(list(self.value))
        if self.op in ("starts_with", "ends_with", "contains"):
            # Spark's StringStartsWith/EndsWith/Contains: case-sensitive, null stays null
            fn = {"starts_with": "starts_with", "ends_with": "ends_with", "contains": "match_substring"}[self.op]
            return pc.Expression._call(fn, [f], pc.MatchSubstringOptions(self.value))
        return {
            "==": f == self.value,
            "!=": f != self.value,
            "<": f < self.value,
            "<=": f <= self.value,
            ">": f > self.value,
            ">=": f >= self.value,
        }[self.op]


def may_match(rg: RowGroupInfo | RowGroupDescriptor, predicates: Sequence[Predicate], schema: pa.Schema) -> bool:
    """False only when the statistics prove that no row of ``rg`` satisfies all predicates."""
    for p in predicates:
        stats = rg.stats.get(p.column)
        if stats is None:
            continue
        t = schema.field(p.column).type
        lo, hi = decode(stats.min, t), decode(stats.max, t)
        nulls = stats.null_count
        try:
            if not _may_match_one(p, lo, hi, nulls, rg.num_rows):
                return False
        except TypeError:
            continue  # incomparable literal: keep the row group, Spark filters exactly
    return True


def _may_match_one(p: Predicate, lo: Any, hi: Any, nulls: int | None, rows: int) -> bool:
    if p.op == "is_null":
        return nulls is None or nulls > 0
    if p.op == "not_null":
        return nulls is None or nulls < rows
    if lo is None or hi is None:
        # all-null row group (min/max absent with every row null) matches no comparison
        return not (nulls is not None and nulls == rows)
    if p.op == "==":
        return lo <= p.value <= hi
    if p.op == "in":
        return any(v is not None and lo <= v <= hi for v in p.value)
    if p.op == "<":
        return lo < p.value
    if p.op == "<=":
        return lo <= p.value
    if p.op == ">":
        return hi > p.value
    if p.op == ">=":
        return hi >= p.value
    if p.op == "!=":
        return not (lo == hi == p.value)  # nulls never satisfy != either
    if p.op == "starts_with" and isinstance(lo, str) and isinstance(hi, str):
        # every matching value lies in [prefix, prefix + U+10FFFF…); code-point order as stored
        return hi >= p.value and lo[: len(p.value)] <= p.value
    return True


def row_groups_to_read(
    row_groups: Iterable[RowGroupInfo | RowGroupDescriptor], predicates: Sequence[Predicate], schema: pa.Schema
) -> list[int]:
    return [i for i, rg in enumerate(row_groups) if not predicates or may_match(rg, predicates, schema)]
