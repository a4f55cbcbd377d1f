"""What a segment's metadata proves about a scoped push's predicate, without reading it.

For each segment visible at a push's read snapshot, its partition values (identity
partitions give a column's one value, time partitions its range) and its row groups'
statistics (min, max, null count, in the log) decide whether none of its rows can match the
predicate (kept), every row must (replaced whole: a change of metadata), or it cannot tell
(``scoped_push.probe`` reads the predicate's columns). Only a conjunction of
``column op literal`` conditions (``partitions.conjuncts``) is decided here; a wrong
"none" or "all" would replace rows the push was not asked to, or keep rows it was, so every
proof errs toward "cannot tell".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from mvtable.lineage.descriptors import RowGroupDescriptor
from mvtable.lineage.partitioning import UNPARTITIONED
from mvtable.lineage.push_scopes import ScopeValue
from mvtable.lineage.snapshot import SegmentState, Snapshot

from .partitions.scope_labels import partition_specs, segment_partition
from .partitions.spec import spec_columns
from .partitions.values import decode_value
from .scan import stats_apply
from .stats import COMPARISONS, Predicate, decode, row_groups_to_read

__all__ = ["KEEP", "PROBE", "REPLACE", "classify"]

KEEP, REPLACE, PROBE = "keep", "replace", "probe"
_PartitionKey = tuple[ScopeValue, ...]


def classify(
    snapshot: Snapshot,
    seg: SegmentState,
    predicates: Sequence[Predicate] | None,
    schema: pa.Schema,
    *,
    cache: dict[tuple[int, _PartitionKey | None], Any] | None = None,
) -> str:
    """``KEEP``, ``REPLACE`` or ``PROBE`` for one segment, from its partition values and row-group statistics only.

    ``predicates``: the ``replace_where`` as a conjunction (None: not one, nothing is
    decided here). ``cache`` keeps what each partition says across the segments of one
    plan (a table of thousands of partitions decodes each once)."""
    if predicates is None:
        return PROBE
    key = segment_partition(seg)
    facts = cache.get(key) if cache is not None else None
    if facts is None:
        columns = cache.get((key[0], None)) if cache is not None else None  # the spec's fields, parsed once
        if columns is None:
            columns = _spec_fields(snapshot, key[0])
            if cache is not None:
                cache[(key[0], None)] = columns
        facts = _partition_facts(columns, key[1], schema)
        if cache is not None:
            cache[key] = facts
    if any(_never(p, facts.get(p.column)) for p in predicates):
        return KEEP
    groups = seg.file.row_groups
    if predicates and all(_always(p, facts.get(p.column), None, schema) for p in predicates):
        return REPLACE  # the partition alone proves it: no statistic is looked at
    if not stats_apply(snapshot, seg) or not groups:
        return PROBE
    if not row_groups_to_read(groups, predicates, schema):
        return KEEP
    if all(all(_always(p, facts.get(p.column), rg, schema) for p in predicates) for rg in groups):
        return REPLACE
    return PROBE


@dataclass(frozen=True)
class _Range:
    """What a segment's partition says about a column: every row's value is in ``[lo, hi]`` (or null when ``null``)."""

    lo: Any
    hi: Any
    null: bool = False
    exact: bool = False  # lo == hi is every row's value (an identity partition)


def _spec_fields(snapshot: Snapshot, spec_id: int) -> list[tuple[Any, str | None, Any]]:
    """Each field of spec ``spec_id`` with its source column's current name and its transform."""
    spec = partition_specs(snapshot).get(spec_id, UNPARTITIONED)
    return spec_columns(spec, snapshot.table_schema)


def _partition_facts(
    fields: Sequence[tuple[Any, str | None, Any]], partition: _PartitionKey, schema: pa.Schema
) -> dict[str, _Range]:
    """Column → the range a partition's values allow, for identity and time partitions."""
    if not fields or len(partition) != len(fields):
        return {}
    out: dict[str, _Range] = {}
    for (_, column, transform), stored in zip(fields, partition):
        if column is None or column not in schema.names:
            continue
        source = schema.field(column).type
        try:
            value = decode_value(stored, transform, source)
        except Exception:
            continue
        if value is None:
            out[column] = _Range(None, None, null=True)
        elif transform.name == "identity":
            out[column] = _Range(value, value, exact=True)
        elif transform.temporal:
            bounds = _time_bounds(transform.name, value, source)
            if bounds is not None:
                out[column] = _Range(*bounds)
    return out


def _time_bounds(name: str, value: Any, source: pa.DataType) -> tuple[Any, Any] | None:
    """The first and last source values of one year/month/day/hour partition, as statistics decode them."""
    if name == "day":
        start = dt.datetime.combine(value, dt.time())
        end = start + dt.timedelta(days=1)
    elif name == "hour":
        start = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value)
        end = start + dt.timedelta(hours=1)
    elif name == "month":
        start = dt.datetime(1970 + value // 12, value % 12 + 1, 1)
        end = dt.datetime(start.year + (start.month == 12), start.month % 12 + 1, 1)
    else:
        start, end = dt.datetime(1970 + value, 1, 1), dt.datetime(1971 + value, 1, 1)
    if pa.types.is_date32(source):
        return start.date(), (end - dt.timedelta(days=1)).date()
    if pa.types.is_timestamp(source):
        last = end - dt.timedelta(microseconds=1)
        if source.tz is not None:
            return start.replace(tzinfo=dt.timezone.utc), last.replace(tzinfo=dt.timezone.utc)
        return start, last
    return None


def _never(p: Predicate, r: _Range | None) -> bool:
    """Whether the partition proves no row satisfies ``p``."""
    if r is None:
        return False
    if r.null:
        return p.op != "is_null"
    if p.op == "is_null":
        return True
    return _compare(p, r.lo, r.hi, none=True)


def _always(p: Predicate, r: _Range | None, rg: RowGroupDescriptor | Any | None, schema: pa.Schema) -> bool:
    """Whether the partition, else row group ``rg``'s statistics, prove every row satisfies ``p``."""
    if r is not None:
        if r.null:
            return p.op == "is_null"
        if p.op == "not_null":
            return True
        if p.op in (*COMPARISONS, "in") and _compare(p, r.lo, r.hi, none=False):
            return True
    if rg is None:
        return False
    if rg.num_rows == 0:
        return True
    stats = rg.stats.get(p.column)
    if stats is None or stats.null_count is None:
        return False
    if p.op == "is_null":
        return stats.null_count == rg.num_rows
    if p.op == "not_null":
        return stats.null_count == 0
    if stats.null_count or stats.min is None or stats.max is None or p.op not in (*COMPARISONS, "in"):
        return False
    t = schema.field(p.column).type
    return _compare(p, decode(stats.min, t), decode(stats.max, t), none=False)


def _compare(p: Predicate, lo: Any, hi: Any, *, none: bool) -> bool:
    """For values in ``[lo, hi]``: whether none (``none=True``) or all of them satisfy ``p``; False when unsure."""
    try:
        if none:
            if p.op == "==":
                return bool(p.value < lo or p.value > hi)
            if p.op == "in":
                return all(v < lo or v > hi for v in p.value)
            if p.op == "<":
                return bool(lo >= p.value)
            if p.op == "<=":
                return bool(lo > p.value)
            if p.op == ">":
                return bool(hi <= p.value)
            if p.op == ">=":
                return bool(hi < p.value)
            if p.op == "!=":
                return bool(lo == hi == p.value)
            return False
        if p.op == "==":
            return bool(lo == hi == p.value)
        if p.op == "in":
            return bool(lo == hi and lo in p.value)
        if p.op == "<":
            return bool(hi < p.value)
        if p.op == "<=":
            return bool(hi <= p.value)
        if p.op == ">":
            return bool(lo > p.value)
        if p.op == ">=":
            return bool(lo >= p.value)
        if p.op == "!=":
            return bool(p.value < lo or p.value > hi)
    except TypeError:  # a literal of another type than the column's: not decided here
        return False
    return False
