"""Partition pruning: which partitions a scan's filter cannot match, decided from the log alone.

Each segment records its partition tuple, so a scan drops whole segments before it reads a
statistic or opens a file. Two ways in, both cached per distinct partition tuple (a table of
thousands of partitions has that many verdicts to make, not one per segment):

* ``Predicate``s (``Table.scan(predicates=…)``, the Spark reader's pushed filters,
  ``read_native``/``create_view`` filters) are projected through each field's transform,
  as Iceberg's inclusive projection does: a row matching the predicate has a partition
  value matching the projection, so a partition failing the projection holds no such row.
  ``identity`` projects every operator; ``year``/``month``/``day``/``hour`` and ``truncate``
  (order-preserving) project ``==``, ``in``, ``<``, ``<=``, ``>``, ``>=`` (``ts < X`` becomes
  ``part <= part(X)``: rows just before ``X`` share its partition, unless ``X`` starts it),
  and ``truncate`` of a string also ``starts_with``; ``bucket`` projects ``==`` and ``in``;
  every transform projects ``is_null``/``not_null`` (only a null value has a null
  partition). Any other predicate keeps every partition but the null one.
* A ``pyarrow.compute`` expression (``Table.scan(filter=…)``, ``Table.delete``,
  ``Table.changes(filter=…)``): its parts that are simple comparisons become clauses of
  predicates (``filter_clauses``), decided as above (``ClausePruner``). What is left is
  checked by Arrow's own simplification against what the partition guarantees about its
  source columns (``ts >= day start and ts < next day``; ``region == 'eu'``): a partition
  whose guarantee makes the filter false is dropped. This handles any expression Arrow can
  simplify, and keeps a partition whenever it cannot decide.

The projection of ``<`` is exact at a partition's start (``ts < midnight`` keeps none of the
day that starts at midnight), so both ways keep the partitions Arrow's simplification keeps,
except that a predicate also sees through ``bucket``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from mvtable.lineage.partitioning import PartitionSpec, PartitionValue
from mvtable.lineage.snapshot import SegmentState

from ..stats import Predicate
from .filter_clauses import AllOf, AnyOf, Clause, Leaf, leaves, parse_filter
from .spec import spec_columns
from .transforms import Transform
from .values import decode_value

__all__ = ["ClausePruner", "ExpressionPruner", "PredicatePruner", "partitioned_columns", "prune_segments"]

Partition = tuple[PartitionValue, ...]
_Test = Callable[[Any], bool]  # decoded partition value -> whether a matching row may have it
_ORDERED = ("year", "month", "day", "hour", "truncate")
_EPOCH = dt.datetime(1970, 1, 1)
_MISSING = object()


class PredicatePruner:
    """Whether a partition may hold rows matching ``predicates``, by inclusive projection (module docstring)."""

    def __init__(
        self,
        specs: dict[int, PartitionSpec],
        table_schema: dict[str, Any],
        arrow: pa.Schema,
        predicates: Sequence[Predicate],
        *,
        decoded: dict[tuple[int, int, PartitionValue], Any] | None = None,
    ) -> None:
        self._tests: dict[int, list[tuple[int, Transform, pa.DataType, _Test]]] = {}
        for spec_id, spec in specs.items():
            tests = []
            for i, (_, column, transform) in enumerate(spec_columns(spec, table_schema)):
                if column is None:
                    continue
                source = arrow.field(column).type
                for p in predicates:
                    if p.column == column:
                        test = project(p, transform, source)
                        if test is not None:
                            tests.append((i, transform, source, test))
            if tests:
                self._tests[spec_id] = tests
        self._verdicts: dict[tuple[int, Partition], bool] = {}
        self._decoded: dict[tuple[int, int, PartitionValue], Any] = {} if decoded is None else decoded

    @property
    def active(self) -> bool:
        """Whether any predicate projects onto any spec (else nothing can be pruned)."""
        return bool(self._tests)

    def may_match(self, spec_id: int | None, partition: Partition | None) -> bool:
        if spec_id is None or partition is None:
            return True
        tests = self._tests.get(spec_id)
        if tests is None:
            return True
        key = (spec_id, partition)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = True
            decoded = self._decoded
            for i, transform, source, test in tests:  # a plain loop: this runs once per partition of a plan
                stored = partition[i]
                at = (spec_id, i, stored)
                value = decoded.get(at, _MISSING)
                if value is _MISSING:
                    value = decoded[at] = decode_value(stored, transform, source)
                if not test(value):
                    verdict = False
                    break
            self._verdicts[key] = verdict
        return verdict


def project(p: Predicate, transform: Transform, source: pa.DataType) -> _Test | None:
    """The test a partition value of ``transform`` must pass for a row matching ``p`` to be in it; None: no projection.

    A predicate the transform does not project (``bucket`` and ``<``, ``day`` and ``!=``) still
    matches only rows with a value, so it rules out the null partition; ``in`` with a null among
    its values matches null too (Arrow's ``isin``), so that keeps it."""
    test = _projection(p, transform, source)
    if p.op == "in" and any(v is None for v in p.value):
        return None if test is None else _or_null(test)
    if test is None and p.op not in ("is_null", "not_null"):
        return _not_null
    return test


def _not_null(part: Any) -> bool:
    return part is not None


def _or_null(test: _Test) -> _Test:
    return lambda part: part is None or test(part)


def _projection(p: Predicate, transform: Transform, source: pa.DataType) -> _Test | None:
    if p.op == "is_null":
        return lambda part: part is None
    if p.op == "not_null":
        return lambda part: part is not None
    values = p.value if p.op == "in" else (p.value,)
    if any(_ambiguous_time(v, source) for v in values):
        return None  # a naive time for a zoned column (or the reverse): what instant it means is not ours to guess
    try:
        if transform.name == "identity":
            return _exact(p)
        if p.op == "==":
            target = transform.apply_scalar(p.value, source)
            return _safe(lambda part: part is not None and part == target)
        if p.op == "in":
            targets = [transform.apply_scalar(v, source) for v in p.value if v is not None]
            return _safe(lambda part: part is not None and part in targets)
        if transform.name not in _ORDERED:
            return None
        if p.op in ("<", "<="):
            bound = transform.apply_scalar(p.value, source)
            if p.op == "<" and _starts_at(transform, bound, source, p.value):
                return _safe(lambda part: part is not None and part < bound)  # X opens its partition: none of it is < X
            return _safe(lambda part: part is not None and part <= bound)
        if p.op in (">", ">="):
            bound = transform.apply_scalar(p.value, source)
            return _safe(lambda part: part is not None and part >= bound)
        if p.op == "starts_with" and transform.name == "truncate" and isinstance(p.value, str) and _is_string(source):
            width = transform.param or 0
            prefix = p.value
            if len(prefix) >= width:
                head = prefix[:width]
                return _safe(lambda part: part is not None and part == head)
            return _safe(lambda part: part is not None and part.startswith(prefix))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None  # a literal the column's type cannot hold: no projection, the rows are filtered exactly
    return None


def _starts_at(transform: Transform, part: Any, source: pa.DataType, value: Any) -> bool:
    """Whether ``value`` is the smallest value of its partition ``part`` (False when that cannot be told)."""
    try:
        if transform.name == "truncate":
            start = part
        else:
            start = _time_range(transform.name, part, source)[0]
        return type(start) is type(value) and bool(start == value)
    except (TypeError, ValueError, ArithmeticError, OverflowError):
        return False


def _ambiguous_time(value: Any, source: pa.DataType) -> bool:
    if not isinstance(value, dt.datetime) or not pa.types.is_timestamp(source):
        return False
    return (value.tzinfo is None) != (source.tz is None)


def _exact(p: Predicate) -> _Test | None:
    """An identity partition's value is the rows' value: the predicate itself decides.

    Except for NaN, which every comparison keeps: Spark, whose pushed filters these also are,
    orders NaN above every number, where Python and Arrow find it neither above nor below."""
    v = p.value
    ops: dict[str, _Test] = {
        "==": lambda x: x == v,
        "!=": lambda x: x != v,
        "<": lambda x: x < v,
        "<=": lambda x: x <= v,
        ">": lambda x: x > v,
        ">=": lambda x: x >= v,
        "in": lambda x: x in v,
        "starts_with": lambda x: isinstance(x, str) and x.startswith(v),
        "ends_with": lambda x: isinstance(x, str) and x.endswith(v),
        "contains": lambda x: isinstance(x, str) and v in x,
    }
    test = ops.get(p.op)
    if test is None:
        return None
    return _safe(lambda part: part is not None and (part != part or bool(test(part))))  # part != part: NaN


def _safe(test: _Test) -> _Test:
    """``test``, keeping the partition when the values cannot be compared (a naive and an aware time)."""

    def guarded(part: Any) -> bool:
        try:
            return test(part)
        except (TypeError, ValueError, ArithmeticError):
            return True

    return guarded


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


class ClausePruner:
    """Whether a partition may hold rows matching every clause of a filter (``filter_clauses``).

    The clauses that are single predicates are decided together by one ``PredicatePruner``,
    exactly as ``predicates=`` are; each leaf of an ``and``/``or`` clause by one of its own.
    All of them share the decoded partition values."""

    def __init__(
        self, specs: dict[int, PartitionSpec], table_schema: dict[str, Any], arrow: pa.Schema, clauses: Sequence[Clause]
    ) -> None:
        decoded: dict[tuple[int, int, PartitionValue], Any] = {}
        simple = [c.predicate for c in clauses if isinstance(c, Leaf)]
        self._simple = PredicatePruner(specs, table_schema, arrow, simple, decoded=decoded)
        self._compound = tuple(c for c in clauses if not isinstance(c, Leaf))
        self._pruners: dict[Predicate, PredicatePruner] = {}
        for clause in self._compound:
            for p in leaves(clause):
                if p not in self._pruners:
                    self._pruners[p] = PredicatePruner(specs, table_schema, arrow, [p], decoded=decoded)

    @property
    def active(self) -> bool:
        return self._simple.active or any(p.active for p in self._pruners.values())

    def may_match(self, spec_id: int | None, partition: Partition | None) -> bool:
        if not self._simple.may_match(spec_id, partition):
            return False
        return all(self._may(c, spec_id, partition) for c in self._compound)

    def _may(self, clause: Clause, spec_id: int | None, partition: Partition | None) -> bool:
        if isinstance(clause, Leaf):
            return self._pruners[clause.predicate].may_match(spec_id, partition)
        if isinstance(clause, AllOf):
            return all(self._may(c, spec_id, partition) for c in clause.parts)
        if isinstance(clause, AnyOf):
            return any(self._may(c, spec_id, partition) for c in clause.parts)
        return True


class ExpressionPruner:
    """Whether a partition may hold rows matching a ``pyarrow.compute`` expression (module docstring).

    The verdicts for every distinct partition of a list of segments are made in one call of
    Arrow's fragment filtering, each partition a fragment whose partition expression is
    its guarantee (no file is opened)."""

    def __init__(
        self, specs: dict[int, PartitionSpec], table_schema: dict[str, Any], arrow: pa.Schema, filter: pc.Expression
    ) -> None:
        self.specs = specs
        self.table_schema = table_schema
        self.arrow = arrow
        self.filter = filter
        self._columns = {sid: spec_columns(spec, table_schema) for sid, spec in specs.items() if spec.partitioned}

    @property
    def active(self) -> bool:
        return bool(self._columns)

    def matching(self, keys: Iterable[tuple[int, Partition]]) -> set[tuple[int, Partition]]:
        """The ``(spec_id, partition)`` keys that may hold matching rows."""
        keys = list(dict.fromkeys(keys))
        guarantees: list[tuple[tuple[int, Partition], pc.Expression]] = []
        kept: set[tuple[int, Partition]] = set()
        for key in keys:
            guarantee = self.partition_guarantee(*key)
            if guarantee is None:
                kept.add(key)
            else:
                guarantees.append((key, guarantee))
        if not guarantees:
            return kept
        fmt, fs = ds.ParquetFileFormat(), pafs.LocalFileSystem()
        fragments = [fmt.make_fragment(f"/{i}", fs, partition_expression=g) for i, (_, g) in enumerate(guarantees)]
        dataset = ds.FileSystemDataset(fragments, self.arrow, fmt, fs)
        try:
            for fragment in dataset.get_fragments(filter=self.filter):
                kept.add(guarantees[int(fragment.path[1:])][0])
        except (pa.ArrowException, TypeError, ValueError):
            return set(keys)  # an expression Arrow cannot simplify: keep everything
        return kept

    def partition_guarantee(self, spec_id: int, partition: Partition) -> pc.Expression | None:
        """What every row of the partition satisfies, over its source columns (None: nothing known)."""
        columns = self._columns.get(spec_id)
        if columns is None or len(partition) != len(columns):
            return None
        out: pc.Expression | None = None
        for (_, column, transform), stored in zip(columns, partition):
            if column is None:
                continue
            source = self.arrow.field(column).type
            try:
                g = guarantee(column, transform, source, decode_value(stored, transform, source))
            except (pa.ArrowException, TypeError, ValueError, OverflowError, ArithmeticError):
                g = None
            if g is not None:
                out = g if out is None else out & g
        return out


def guarantee(column: str, transform: Transform, source: pa.DataType, value: Any) -> pc.Expression | None:
    """What every row of a partition whose value is ``value`` satisfies, as an expression over its column."""
    field = pc.field(column)
    if value is None:
        return field.is_null()
    if transform.name == "identity":
        if isinstance(value, float) and value != value:  # NaN equals nothing
            return field.is_valid()
        return field == pa.scalar(value, source)
    if transform.name in ("year", "month", "day", "hour"):
        lo, hi = _time_range(transform.name, value, source)
        return (field >= pa.scalar(lo, source)) & (field < pa.scalar(hi, source))
    if transform.name == "truncate":
        width = transform.param or 1
        if pa.types.is_integer(source):
            try:
                return (field >= pa.scalar(value, source)) & (field < pa.scalar(value + width, source))
            except (pa.ArrowInvalid, OverflowError):  # the last partition of the type's range
                return field >= pa.scalar(value, source)
        if pa.types.is_decimal(source):
            step = Decimal(width).scaleb(-source.scale)
            return (field >= pa.scalar(value, source)) & (field < pa.scalar(value + step, source))
        if _is_string(source):
            if len(value) < width:
                return field == pa.scalar(value, source)
            last = ord(value[-1])
            if last >= 0x10FFFF:
                return field >= pa.scalar(value, source)
            upper = value[:-1] + chr(last + 1 if last + 1 not in range(0xD800, 0xE000) else 0xE000)
            return (field >= pa.scalar(value, source)) & (field < pa.scalar(upper, source))
    return field.is_valid()  # bucket, binary truncate: only that the value is not null


def _time_range(name: str, value: Any, source: pa.DataType) -> tuple[Any, Any]:
    """[start, end) of a year/month/day/hour partition, as values of the source type."""
    if name == "day":
        start_day: dt.date = value
        end_day = start_day + dt.timedelta(days=1)
    elif name in ("year", "month"):
        months = value * 12 if name == "year" else value
        span = 12 if name == "year" else 1
        start_day = _month_start(months)
        end_day = _month_start(months + span)
    else:  # hour
        start = _EPOCH + dt.timedelta(hours=value)
        end = start + dt.timedelta(hours=1)
        return _as_source(start, source), _as_source(end, source)
    if pa.types.is_date32(source):
        return start_day, end_day
    return (
        _as_source(dt.datetime.combine(start_day, dt.time()), source),
        _as_source(dt.datetime.combine(end_day, dt.time()), source),
    )


def _month_start(months: int) -> dt.date:
    year, month = divmod(months, 12)
    return dt.date(1970 + year, month + 1, 1)


def _as_source(naive_utc: dt.datetime, source: pa.DataType) -> dt.datetime:
    return naive_utc.replace(tzinfo=dt.timezone.utc) if getattr(source, "tz", None) else naive_utc


def prune_segments(
    segments: Sequence[SegmentState],
    *,
    specs: dict[int, PartitionSpec],
    table_schema: dict[str, Any],
    arrow: pa.Schema,
    predicates: Sequence[Predicate] = (),
    filter: pc.Expression | None = None,
) -> tuple[list[SegmentState], int]:
    """(the segments whose partition may match ``predicates`` and ``filter``, how many were dropped).

    Unpartitioned segments always stay; the order is kept. ``filter``'s simple comparisons are
    decided as predicates (``filter_clauses``); Arrow decides the rest of it, if anything of
    it could prune, on the partitions those kept."""
    if not any(spec.partitioned for spec in specs.values()) or (not predicates and filter is None):
        return list(segments), 0
    keep = list(segments)
    if predicates:
        pruner = PredicatePruner(specs, table_schema, arrow, predicates)
        if pruner.active:
            keep = [s for s in keep if pruner.may_match(s.file.spec_id, s.file.partition)]
    if filter is not None:
        split = parse_filter(filter, arrow, partitioned_columns(specs, table_schema))
        if split.clauses:
            clauses = ClausePruner(specs, table_schema, arrow, split.clauses)
            if clauses.active:
                keep = [s for s in keep if clauses.may_match(s.file.spec_id, s.file.partition)]
        if split.rest:
            by_expression = ExpressionPruner(specs, table_schema, arrow, filter)
            if by_expression.active:
                keys = [
                    (s.file.spec_id, s.file.partition)
                    for s in keep
                    if s.file.spec_id is not None and s.file.partition is not None
                ]
                matching = by_expression.matching(keys)
                keep = [
                    s
                    for s in keep
                    if s.file.spec_id is None or s.file.partition is None or (s.file.spec_id, s.file.partition) in matching
                ]
    return keep, len(segments) - len(keep)


def partitioned_columns(specs: dict[int, PartitionSpec], table_schema: dict[str, Any]) -> set[str]:
    """The columns (current names) some field of some spec is a transform of."""
    return {column for spec in specs.values() for _, column, _ in spec_columns(spec, table_schema) if column is not None}
