"""A table's partitions as a scoped push names them: the specs, each segment's partition, and labels for people.

Labels spell a partition as Hive paths do (``ts_day=2024-01-05/region=eu``): a day, month,
year or hour as a date rather than the integer the log keeps, so an error or the lineage
names what a person would type.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.partitioning import UNPARTITIONED, PartitionSpec
from mvtable.lineage.push_scopes import ScopeValue
from mvtable.lineage.snapshot import SegmentState, Snapshot

from ..schema import schema_from_json
from ..stats import decode
from .spec import spec_columns
from .transforms import Transform

__all__ = ["default_spec", "file_partition", "partition_label", "partition_specs", "segment_partition"]

_PartitionKey = tuple[ScopeValue, ...]


def partition_specs(snapshot: Snapshot) -> dict[int, PartitionSpec]:
    """The table's specs (spec 0, unpartitioned, always)."""
    return snapshot.partition_specs or {0: UNPARTITIONED}


def default_spec(snapshot: Snapshot) -> PartitionSpec:
    """The spec new writes use."""
    return partition_specs(snapshot).get(snapshot.default_spec_id, UNPARTITIONED)


def segment_partition(seg: SegmentState) -> tuple[int, _PartitionKey]:
    """``(spec id, partition tuple)`` of a segment; an unpartitioned one is ``(0, ())``."""
    f = seg.file
    return (f.spec_id or 0, tuple(f.partition) if f.partition is not None else ())


def file_partition(segment: SegmentFile) -> _PartitionKey:
    """The partition tuple a written segment records (``()``: unpartitioned)."""
    return tuple(segment.partition) if segment.partition is not None else ()


def partition_label(
    spec: PartitionSpec, table_schema: dict[str, Any], key: _PartitionKey, *, arrow: pa.Schema | None = None
) -> str:
    """A partition for people, as Hive paths spell it: ``ts_day=2024-01-05/region=eu``."""
    if not spec.fields:
        return "the whole table (unpartitioned)"
    arrow = arrow if arrow is not None else schema_from_json(table_schema)
    parts = []
    for (f, column, transform), stored in zip(spec_columns(spec, table_schema), key):
        parts.append(f"{f.name}={_human(stored, transform, arrow.field(column).type if column in arrow.names else None)}")
    return "/".join(parts)


def _human(stored: ScopeValue, transform: Transform, source: pa.DataType | None) -> str:
    if stored is None:
        return "null"
    if isinstance(stored, int) and not isinstance(stored, bool):
        if transform.name == "year":
            return f"{1970 + stored:04d}"
        if transform.name == "month":
            return f"{1970 + stored // 12:04d}-{stored % 12 + 1:02d}"
        if transform.name == "day":
            return (dt.date(1970, 1, 1) + dt.timedelta(days=stored)).isoformat()
        if transform.name == "hour":
            return (dt.datetime(1970, 1, 1) + dt.timedelta(hours=stored)).strftime("%Y-%m-%d-%H")
    if source is not None and pa.types.is_timestamp(source) and isinstance(stored, int):
        return str(decode(stored, source))
    return str(stored)
