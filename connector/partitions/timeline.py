"""The timeline of a table: per partition, every segment a snapshot knows and the versions it was seen in.

Druid shows a datasource as a timeline of time chunks where newer segments overshadow older
ones; mvtable's lineage gives the same picture per partition. A segment is *visible* (what a
reader of the version sees), *overshadowed* (the published push that replaced it keeps it for
rollback), *staged* (written by a push that is not published yet), *reverted* (written by a push
that was rolled back) or *removed* (compaction, an overwrite, a delete of all its rows or lineage
retention took it out; vacuum later forgets it). Each segment carries the version that added it
and the version from which readers no longer saw it, so a drawing can place it along versions.

A pure function of a ``Snapshot``: no I/O, so a timeline of any version the log can rebuild
costs one replay. Partitions are ordered along time (the first time field of their spec: a
``year``/``month``/``day``/``hour`` transform, or an identity of a date or timestamp column),
then by their other values, nulls last; an unpartitioned table is one partition, ``(all)``.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mvtable.lineage.enums import LineageState
from mvtable.lineage.partitioning import PartitionSpec
from mvtable.lineage.schema_ids import field_id, iter_fields, with_ids
from mvtable.lineage.snapshot import SegmentState, Snapshot

__all__ = [
    "ALL_PARTITION",
    "STATES",
    "SegmentStateName",
    "Timeline",
    "TimelinePartition",
    "TimelineSegment",
    "render_value",
    "state_counts",
    "timeline_of",
]

SegmentStateName = Literal["visible", "overshadowed", "staged", "reverted", "removed"]
# in the order a drawing's legend lists them
STATES: tuple[SegmentStateName, ...] = ("visible", "overshadowed", "staged", "reverted", "removed")
ALL_PARTITION = "(all)"  # the one partition of an unpartitioned table (and of segments written before a spec)

_EPOCH = dt.datetime(1970, 1, 1)
_TIME_TRANSFORMS = ("year", "month", "day", "hour")
_TIME_TYPES = ("date", "timestamp", "timestamp_ntz")


@dataclass(frozen=True)
class TimelineSegment:
    """One segment on the timeline.

    ``partition`` holds the values the log records (days since the epoch for ``day(ts)``, …),
    ``()`` for a segment without a partition. ``replaced_version`` is the first version in which
    readers no longer saw it (the publish that overshadowed it, the rollback that reverted it,
    or the commit that removed it); None while it is visible or staged. ``removed_version`` is
    the commit that took it out of the table, which may come after it was overshadowed.
    ``lineage_entry`` is the push that added it (None for appends and compactions of appends),
    ``replaced_by`` the lineage entry that overshadowed or reverted it."""

    id: str
    partition: tuple[Any, ...]
    spec_id: int | None
    state: SegmentStateName
    rows: int
    deleted_rows: int
    size_bytes: int
    added_version: int
    replaced_version: int | None
    removed_version: int | None
    lineage_entry: str | None
    replaced_by: str | None


@dataclass(frozen=True)
class TimelinePartition:
    """One partition: its segments (oldest first) and what they add up to.

    ``label`` names the fields (``ts_day=2022-01-08, region=eu``), ``display_values`` are the
    values as people read them (``2022-01-08``), ``values`` the values the log records.
    ``rows`` and ``deleted_rows`` count visible segments only; ``newest_version`` is the last
    version that added, replaced or removed one of its segments."""

    label: str
    spec_id: int | None
    fields: tuple[str, ...]
    values: tuple[Any, ...]
    display_values: tuple[str, ...]
    visible_segments: int
    rows: int
    deleted_rows: int
    size_bytes: int
    overshadowed_segments: int
    staged_segments: int
    newest_version: int
    segments: tuple[TimelineSegment, ...]

    @property
    def short_label(self) -> str:
        """The values alone (an axis label): ``2022-01-08 / eu``."""
        return " / ".join(self.display_values) if self.display_values else ALL_PARTITION


@dataclass(frozen=True)
class Timeline:
    """Every partition of one version of a table, ordered along time.

    ``version`` is the table version described; its segments' versions are at most that."""

    version: int
    partitions: tuple[TimelinePartition, ...]

    def segments(self) -> list[TimelineSegment]:
        """Every segment, partition by partition."""
        return [s for p in self.partitions for s in p.segments]

    def visible_segment_ids(self) -> set[str]:
        """The segments a reader of ``version`` reads."""
        return {s.id for s in self.segments() if s.state == "visible"}

    def partition(self, label: str) -> TimelinePartition:
        """The partition whose ``label`` or ``short_label`` is ``label``.

        Raises:
            KeyError: No partition has that label."""
        for p in self.partitions:
            if label in (p.label, p.short_label):
                return p
        raise KeyError(label)


# -- building ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Field:
    name: str
    transform: str
    source_type: Any  # the source column's type in the stored schema JSON (None: unknown)


def timeline_of(snapshot: Snapshot) -> Timeline:
    """The timeline of ``snapshot``: each segment it holds, grouped by partition and ordered along time.

    Reads partition specs and segment partitions when the snapshot carries them; segments
    without one (an unpartitioned table, or files written before a spec) form the ``(all)``
    partition."""
    visible = set(snapshot.visible_segment_ids())
    hidden_by = _hidden_by(snapshot)
    specs = snapshot.partition_specs
    types = _source_types(snapshot.table_schema)
    groups: dict[tuple[int | None, tuple[Any, ...]], list[TimelineSegment]] = {}
    for seg in snapshot.segments.values():
        spec_id, values = _partition_of(seg)
        segment = _segment(seg, spec_id, values, visible, hidden_by, snapshot)
        groups.setdefault((spec_id, values), []).append(segment)
    partitions = [
        _partition(spec_id, values, segs, _fields(specs, spec_id, len(values), types))
        for (spec_id, values), segs in groups.items()
    ]
    partitions.sort(key=_order)
    return Timeline(version=snapshot.version, partitions=tuple(p for p, _ in partitions))


def _hidden_by(snapshot: Snapshot) -> dict[str, tuple[SegmentStateName, int | None, str]]:
    """Segment id → (state, version it changed, lineage entry) for segments a lineage entry hides or holds."""
    out: dict[str, tuple[SegmentStateName, int | None, str]] = {}
    for entry in sorted(snapshot.lineage.values(), key=lambda e: e.state_version):
        if entry.state == LineageState.COMPLETED:
            for sid in entry.segments_from:
                out.setdefault(sid, ("overshadowed", entry.state_version, entry.id))
        elif entry.state == LineageState.IN_PROGRESS:
            for sid in entry.segments_to:
                out.setdefault(sid, ("staged", None, entry.id))
        else:
            for sid in entry.segments_to:
                out.setdefault(sid, ("reverted", entry.state_version, entry.id))
    return out


def _partition_of(seg: SegmentState) -> tuple[int | None, tuple[Any, ...]]:
    """A segment's spec id and partition tuple; ``(None, ())`` for one written without a partition."""
    values = seg.file.partition
    if values is None or len(values) == 0:
        return None, ()
    return seg.file.spec_id, tuple(values)


def _segment(
    seg: SegmentState,
    spec_id: int | None,
    values: tuple[Any, ...],
    visible: set[str],
    hidden_by: Mapping[str, tuple[SegmentStateName, int | None, str]],
    snapshot: Snapshot,
) -> TimelineSegment:
    sid = seg.id
    state: SegmentStateName
    replaced: int | None = None
    replaced_by: str | None = None
    if sid in visible:
        state = "visible"
    elif sid in hidden_by:
        state, replaced, replaced_by = hidden_by[sid]
        if state == "staged":
            replaced_by = None
    else:  # hidden by nothing the lineage still names: taken out of the table
        state = "removed"
    if seg.removed_version is not None:
        state = "removed"
        replaced = seg.removed_version if replaced is None else min(replaced, seg.removed_version)
    dv = snapshot.dvs.get(sid)
    return TimelineSegment(
        id=sid,
        partition=values,
        spec_id=spec_id,
        state=state,
        rows=seg.file.num_rows,
        deleted_rows=dv.cardinality if dv is not None else 0,
        size_bytes=seg.file.size_bytes,
        added_version=seg.added_version,
        replaced_version=replaced,
        removed_version=seg.removed_version,
        lineage_entry=seg.lineage_entry,
        replaced_by=replaced_by,
    )


def _source_types(schema: Mapping[str, Any]) -> dict[int, Any]:
    """Field id → the field's type JSON, at any depth (ids by position in a schema stored before field ids)."""
    out: dict[int, Any] = {}
    for _, f in iter_fields(with_ids(dict(schema))):
        fid = field_id(f)
        if fid is not None:
            out[fid] = f.get("type")
    return out


def _fields(specs: Mapping[int, PartitionSpec], spec_id: int | None, n: int, types: Mapping[int, Any]) -> tuple[_Field, ...]:
    spec = specs.get(spec_id) if spec_id is not None else None
    known = tuple(spec.fields) if spec is not None else ()
    if len(known) != n:  # a spec the snapshot does not know (or of another width): values shown as recorded
        return tuple(_Field(f"field{i + 1}", "identity", None) for i in range(n))
    return tuple(_Field(f.name, f.transform, types.get(f.source_id)) for f in known)


def _partition(
    spec_id: int | None, values: tuple[Any, ...], segs: list[TimelineSegment], fields: tuple[_Field, ...]
) -> tuple[TimelinePartition, tuple[Any, ...]]:
    """The partition and its sort key."""
    segs.sort(key=lambda s: (s.added_version, s.id))
    shown = tuple(render_value(v, f.transform, source_type=f.source_type) for v, f in zip(values, fields))
    label = ", ".join(f"{f.name}={text}" for f, text in zip(fields, shown)) if values else ALL_PARTITION
    live = [s for s in segs if s.state == "visible"]
    versions = [v for s in segs for v in (s.added_version, s.replaced_version, s.removed_version) if v is not None]
    partition = TimelinePartition(
        label=label,
        spec_id=spec_id,
        fields=tuple(f.name for f in fields),
        values=values,
        display_values=shown,
        visible_segments=len(live),
        rows=sum(s.rows for s in live),
        deleted_rows=sum(s.deleted_rows for s in live),
        size_bytes=sum(s.size_bytes for s in live),
        overshadowed_segments=sum(1 for s in segs if s.state == "overshadowed"),
        staged_segments=sum(1 for s in segs if s.state == "staged"),
        newest_version=max(versions),
        segments=tuple(segs),
    )
    return partition, _sort_key(spec_id, values, fields)


def _order(item: tuple[TimelinePartition, tuple[Any, ...]]) -> tuple[Any, ...]:
    return item[1]


def _sort_key(spec_id: int | None, values: tuple[Any, ...], fields: Sequence[_Field]) -> tuple[Any, ...]:
    """Unpartitioned first, then by the start of the first time field (nulls last), then by every value (nulls last)."""
    if not values:
        return (0, 0, 0, (), -1)
    start = next((_start_seconds(v, f) for v, f in zip(values, fields) if _is_time(f)), None)
    rest = tuple(_value_key(v) for v in values)
    return (1, 0 if start is not None else 1, start or 0, rest, spec_id if spec_id is not None else -1)


def _value_key(value: Any) -> tuple[int, int, Any]:
    if value is None:
        return (1, 0, 0)
    if isinstance(value, (int, float)):
        return (0, 0, value)
    return (0, 1, str(value))


def _type_name(source_type: Any) -> str:
    return source_type if isinstance(source_type, str) else ""


def _is_time(f: _Field) -> bool:
    return f.transform in _TIME_TRANSFORMS or (f.transform == "identity" and _type_name(f.source_type) in _TIME_TYPES)


def _start_seconds(value: Any, f: _Field) -> int | None:
    """Seconds since the epoch at which a time field's value starts; None for null or a value out of range."""
    if value is None or isinstance(value, bool):
        return None
    try:
        if f.transform == "day" and isinstance(value, int):
            return value * 86_400
        if f.transform == "hour" and isinstance(value, int):
            return value * 3_600
        if f.transform == "month" and isinstance(value, int):
            return calendar.timegm((1970 + value // 12, value % 12 + 1, 1, 0, 0, 0))
        if f.transform == "year" and isinstance(value, int):
            return calendar.timegm((1970 + value, 1, 1, 0, 0, 0))
        if _type_name(f.source_type) == "date" and isinstance(value, str):
            return calendar.timegm(dt.date.fromisoformat(value).timetuple())
        if isinstance(value, int):  # identity of a timestamp: microseconds
            return value // 1_000_000
    except (ValueError, OverflowError):
        return None
    return None


def render_value(value: Any, transform: str, *, source_type: Any = None) -> str:
    """A partition value as people read it.

    ``day`` 19000 → ``2022-01-08``, ``hour`` → ``2022-01-08T05``, ``month`` → ``2022-01``,
    ``year`` → ``2022``; an identity of a timestamp column (microseconds) → ISO time; bucket
    numbers and other values as recorded; null → ``null``. A value a calendar cannot hold is
    shown as recorded."""
    if value is None:
        return "null"
    if isinstance(value, bool) or not isinstance(value, int):
        return str(value)
    try:
        if transform == "day":
            return (_EPOCH + dt.timedelta(days=value)).date().isoformat()
        if transform == "hour":
            return (_EPOCH + dt.timedelta(hours=value)).strftime("%Y-%m-%dT%H")
        if transform == "month":
            year = 1970 + value // 12
            if not 1 <= year <= 9999:
                return str(value)
            return f"{year:04d}-{value % 12 + 1:02d}"
        if transform == "year":
            return f"{1970 + value:04d}" if 1 <= 1970 + value <= 9999 else str(value)
        if transform == "identity" and _type_name(source_type) in ("timestamp", "timestamp_ntz"):
            return (_EPOCH + dt.timedelta(microseconds=value)).isoformat()
    except OverflowError:
        return str(value)
    return str(value)


def state_counts(segments: Iterable[TimelineSegment]) -> dict[SegmentStateName, int]:
    """How many segments are in each state (every state named, zeros included)."""
    counts: dict[SegmentStateName, int] = dict.fromkeys(STATES, 0)
    for s in segments:
        counts[s.state] += 1
    return counts
