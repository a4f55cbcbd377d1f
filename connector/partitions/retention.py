"""Partition retention: vacuum drops whole time partitions older than ``partitionRetention``.

Pinot's and Druid's retention, on the timeline the partition spec draws: a partition of the
first time transform of its spec (``year``, ``month``, ``day``, ``hour``) covers a range of
time, and once that range ended longer ago than the table's ``partitionRetention`` every
visible segment of it leaves the table in one ``DROP_PARTITIONS`` commit. Only metadata
decides it (the partition values the log records), so no data file is read; the files
themselves go later, like any removed segment's, once no retained version needs them (time
travel to before the drop still reads them until then). A segment a running or staged push
holds stays (that push decides about it), and so does a partition whose time is null.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mvtable.errors import NothingToCommit
from mvtable.lineage.actions import Action, RemoveSegment
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.partitioning import PartitionSpec
from mvtable.lineage.snapshot import Snapshot, held_segments

from .transforms import parse_transform

__all__ = ["DroppedPartition", "PartitionDrop", "commit_partition_drop", "plan_partition_drop", "range_end_ms"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS_PER_HOUR = 3_600_000
_MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class DroppedPartition:
    """One partition retention drops: its spec, its values as the log stores them, and what it held."""

    spec_id: int
    partition: tuple[Any, ...]
    segments: int
    rows: int
    ends_ms: int  # when the partition's time range ended (epoch milliseconds)


@dataclass(frozen=True)
class PartitionDrop:
    """What one retention pass drops (nothing when ``partitions`` is empty)."""

    partitions: tuple[DroppedPartition, ...] = ()
    segment_ids: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)


def range_end_ms(transform_text: str, value: Any) -> int | None:
    """The end (exclusive, epoch milliseconds) of the time a partition value covers; None for no time transform or null."""
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        return None
    name = parse_transform(transform_text).name
    if name == "hour":
        return (value + 1) * _MS_PER_HOUR
    if name == "day":
        return (value + 1) * _MS_PER_DAY
    if name == "month":
        year, month = divmod(value + 1, 12)
        start = dt.datetime(1970 + year, month + 1, 1, tzinfo=dt.timezone.utc) if 1 <= 1970 + year <= 9999 else None
    elif name == "year":
        start = dt.datetime(1970 + value + 1, 1, 1, tzinfo=dt.timezone.utc) if 1 <= 1970 + value + 1 <= 9999 else None
    else:
        return None
    return None if start is None else (start - _EPOCH) // dt.timedelta(milliseconds=1)


def _time_field(spec: PartitionSpec) -> int | None:
    """The position of the spec's first time-transform field."""
    for i, f in enumerate(spec.fields):
        if parse_transform(f.transform).temporal:
            return i
    return None


def plan_partition_drop(snapshot: Snapshot, *, now_ms: int, retention_s: float) -> PartitionDrop:
    """The partitions of ``snapshot`` whose time ended more than ``retention_s`` before ``now_ms``: a pure function of the snapshot."""
    cutoff = now_ms - int(retention_s * 1000)
    held = held_segments(snapshot)
    specs: dict[int, PartitionSpec] = snapshot.partition_specs
    groups: dict[tuple[int, tuple[Any, ...]], list[str]] = {}
    ends: dict[tuple[int, tuple[Any, ...]], int] = {}
    for seg in snapshot.visible_segments():
        f = seg.file
        spec = specs.get(f.spec_id) if f.spec_id is not None else None
        if spec is None or f.partition is None or seg.id in held:
            continue
        pos = _time_field(spec)
        if pos is None:
            continue
        end = range_end_ms(spec.fields[pos].transform, f.partition[pos])
        if end is None or end > cutoff:
            continue
        key = (spec.spec_id, tuple(f.partition))
        groups.setdefault(key, []).append(seg.id)
        ends[key] = end
    partitions = tuple(
        DroppedPartition(
            spec_id=spec_id,
            partition=partition,
            segments=len(ids),
            rows=sum(_live_rows(snapshot, sid) for sid in ids),
            ends_ms=ends[(spec_id, partition)],
        )
        for (spec_id, partition), ids in sorted(groups.items(), key=lambda kv: ends[kv[0]])
    )
    return PartitionDrop(partitions=partitions, segment_ids=tuple(sid for ids in groups.values() for sid in ids))


def _live_rows(snapshot: Snapshot, segment_id: str) -> int:
    dv = snapshot.dvs.get(segment_id)
    return snapshot.segments[segment_id].file.num_rows - (dv.cardinality if dv is not None else 0)


def drop_actions(drop: PartitionDrop) -> list[Action]:
    return [RemoveSegment(segment_id=sid) for sid in drop.segment_ids]


def commit_partition_drop(
    commit_log: CommitLog, snapshot: Snapshot, *, now_ms: int, retention_s: float, retention_text: str
) -> tuple[PartitionDrop, int | None]:
    """Commit the drop planned on the newest snapshot at each attempt; (what was dropped, its version or None).

    Raises:
        CommitConflictError: every attempt lost its race (a push took the segments meanwhile is not one: they are
            planned again without them).
        CommitStateUnknownError: the store never said whether the commit landed."""
    planned: list[PartitionDrop] = [plan_partition_drop(snapshot, now_ms=now_ms, retention_s=retention_s)]
    if not planned[0].segment_ids:
        return planned[0], None

    def build(current: Snapshot) -> list[Action]:
        planned[0] = plan_partition_drop(current, now_ms=now_ms, retention_s=retention_s)
        if not planned[0].segment_ids:  # a concurrent drop or push took them all
            raise NothingToCommit("no partition is past partitionRetention any more")
        return drop_actions(planned[0])

    def parameters() -> dict[str, Any]:
        return {
            "partitionRetention": retention_text,
            "partitions": [list(p.partition) for p in planned[0].partitions],
            "segments": len(planned[0].segment_ids),
        }

    try:
        result = commit_log.commit(read=snapshot, operation=Operation.DROP_PARTITIONS, parameters=parameters, build=build)
    except NothingToCommit:
        return PartitionDrop(), None
    return planned[0], result.commit.version


def describe_partitions(spec: PartitionSpec, partitions: Sequence[tuple[Any, ...]]) -> list[str]:
    """Partition tuples as people read them: ``ts_day=2024-01-05/region=eu``."""
    out = []
    for values in partitions:
        parts = []
        for f, v in zip(spec.fields, values):
            t = parse_transform(f.transform)
            if v is not None and t.name == "day" and isinstance(v, int):
                v = (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
            parts.append(f"{f.name}={'null' if v is None else v}")
        out.append("/".join(parts))
    return out
