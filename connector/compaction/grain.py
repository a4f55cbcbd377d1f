"""Moving old segments into a new partition grain (Druid's compaction from ``HOUR`` to ``DAY``).

After ``update_partitioning`` new writes follow the new spec and old segments keep theirs.
Compaction rewrites an old segment into the new grain when all its rows fall in ONE
partition of the new spec, which the log alone can tell: the segment's column statistics
bound each source column, and an order-preserving transform (identity, the time
transforms, truncate) that maps the minimum and the maximum to the same value maps every
row there (for ``bucket``, only a column holding one value qualifies). Coarsening a grain
(hours into days, days into months) always qualifies; a segment that would have to be split
(days into hours) keeps its old spec, and pruning still reads it correctly through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.snapshot import Snapshot

from ..partitions.spec import spec_columns
from ..partitions.values import encode_value
from ..scan import stats_apply
from ..schema import schema_from_json
from ..stats import decode
from .plan import Regrain

__all__ = ["grain_of"]


def grain_of(snapshot: Snapshot) -> Callable[[SegmentDescriptor], Regrain | None]:
    """For ``snapshot``'s segments: the partition of the default spec holding all of a segment's rows, or None."""
    spec = snapshot.default_spec
    if not spec.partitioned:
        unpartitioned = Regrain(spec_id=spec.spec_id, partition=None)
        return lambda seg: unpartitioned
    arrow = schema_from_json(snapshot.table_schema)
    columns = spec_columns(spec, snapshot.table_schema)

    def grain(seg: SegmentDescriptor) -> Regrain | None:
        state = snapshot.segments.get(seg.id)
        if state is None or not stats_apply(snapshot, state) or not seg.row_groups:
            return None
        values: list[Any] = []
        for _, column, transform in columns:
            if column is None:
                return None
            source = arrow.field(column).type
            bounds = _bounds(seg, column, source)
            if bounds is None:
                return None
            lo, hi, all_null = bounds
            if all_null:
                values.append(None)
                continue
            if transform.name == "bucket" and lo != hi:
                return None
            try:
                low, high = transform.apply_scalar(lo, source), transform.apply_scalar(hi, source)
            except (TypeError, ValueError, OverflowError, ArithmeticError):
                return None
            if low != high:
                return None
            values.append(encode_value(low, transform, source))
        return Regrain(spec_id=spec.spec_id, partition=tuple(values))

    return grain


def _bounds(seg: SegmentDescriptor, column: str, source: Any) -> tuple[Any, Any, bool] | None:
    """(min, max, every row null) of ``column`` over the segment's row groups; None when unknown or mixed with nulls."""
    lo = hi = None
    nulls = 0
    for rg in seg.row_groups:
        stats = rg.stats.get(column)
        if stats is None or stats.null_count is None:
            return None
        nulls += stats.null_count
        if stats.null_count == rg.num_rows:
            continue
        if stats.min is None or stats.max is None:
            return None
        a, b = decode(stats.min, source), decode(stats.max, source)
        lo = a if lo is None or a < lo else lo
        hi = b if hi is None or b > hi else hi
    if nulls == seg.num_rows:
        return None, None, True
    if nulls or lo is None:
        return None  # nulls beside values: two partitions
    return lo, hi, False
