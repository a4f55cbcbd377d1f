"""Spark's pushed filters → our ``Predicate``s.

Two questions per filter: may we *prune* row groups with it (the statistics comparison is
sound), and may we *claim* it (we apply it exactly as Spark would, so Spark can skip it)?
Floats prune but are never claimed (Spark orders NaN above everything; Arrow does not).

Timestamps prune (row groups by statistics, partitions by ``day(ts)`` and the other time
transforms) but are not claimed. Spark hands a pushed literal over as a variant, which
keeps the kind of time it is: a ``timestamp`` literal arrives as its instant, a datetime in
UTC (whatever the session time zone, which only decided what instant a SQL text like
``'2024-01-05 00:00'`` means, before the push), and a ``timestamp_ntz`` literal as a naive
wall-clock datetime. mvtable stores ``timestamp`` columns as UTC instants (a zoned Arrow
column) and ``timestamp_ntz`` as naive ones, so an aware literal is compared only with a
zoned column and a naive one only with a naive column; any other pairing is not pushed (it
cannot come from Spark's own analysis, which casts a literal to its column's type)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from ..stats import Predicate

_OPS = {EqualTo: "==", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
_STRING_OPS = {StringStartsWith: "starts_with", StringEndsWith: "ends_with", StringContains: "contains"}


def _literal_fits(t: pa.DataType, value: Any) -> bool:
    if value is None:
        return False
    if pa.types.is_integer(t):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_boolean(t):
        return isinstance(value, bool)
    if pa.types.is_floating(t):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return isinstance(value, str)
    if pa.types.is_date32(t):
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if pa.types.is_decimal(t):
        return isinstance(value, (Decimal, int)) and not isinstance(value, bool)
    if pa.types.is_timestamp(t):
        return isinstance(value, dt.datetime) and (value.tzinfo is None) == (t.tz is None)
    return False


def _literal(t: pa.DataType, value: Any) -> Any:
    """The value as the column's type compares it.

    Arrow refuses ``decimal < int`` (it cannot widen ``int64`` into a decimal of enough
    precision), so an integer compared with a decimal column becomes a ``Decimal``."""
    if pa.types.is_decimal(t) and isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)  # the same instant, in the zone the column is stored in
    return value


def pushdown_predicate(f: Filter, schema: pa.Schema) -> tuple[Predicate | None, bool]:
    """``(predicate or None, claimable)`` for one pushed filter."""
    attr = getattr(f, "attribute", None)
    if isinstance(f, Not):
        inner, claim = pushdown_predicate(f.child, schema)
        if inner is not None and inner.op == "==":
            return Predicate(inner.column, "!=", inner.value), claim
        return None, False
    if attr is None or len(attr) != 1 or attr[0] not in schema.names:
        return None, False
    column = attr[0]
    t = schema.field(column).type
    claim_null = not pa.types.is_floating(t)
    claim = claim_null and not pa.types.is_timestamp(t)  # a time compared: pruned by, filtered again by Spark
    if isinstance(f, IsNull):
        return Predicate(column, "is_null"), claim_null
    if isinstance(f, IsNotNull):
        return Predicate(column, "not_null"), claim_null
    if isinstance(f, In):
        values = tuple(f.value)
        if values and all(_literal_fits(t, v) for v in values):
            return Predicate(column, "in", tuple(_literal(t, v) for v in values)), claim
        return None, False
    if isinstance(f, EqualNullSafe):  # `a <=> v`: like == for a value, IS NULL for null
        if f.value is None:
            return Predicate(column, "is_null"), claim_null
        return (Predicate(column, "==", _literal(t, f.value)), claim) if _literal_fits(t, f.value) else (None, False)
    string_op = _STRING_OPS.get(type(f))
    if string_op is not None and isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        is_string = pa.types.is_string(t) or pa.types.is_large_string(t)
        return (Predicate(column, string_op, f.value), True) if is_string and isinstance(f.value, str) else (None, False)
    op = _OPS.get(type(f))
    if (
        op is not None
        and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual))
        and _literal_fits(t, f.value)
    ):
        return Predicate(column, op, _literal(t, f.value)), claim
    return None, False
