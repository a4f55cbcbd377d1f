"""Replaying commits into a snapshot — a pure function of the log, no I/O.

A ``Snapshot`` is the whole state of a table at one version: schema and properties, every
segment the log has named (visible or not, because lineage can make hidden segments visible
again) until vacuum prunes removed ones (``PruneState``), the lineage entries, the newest
deletion vector of each segment, and the history of the versions the log still holds. What a reader
sees is derived from it by ``visible_segment_ids``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptMetadataError, InvalidLineageTransitionError, SegmentInUseError

from .actions import (
    AddSegment,
    Commit,
    CompactSegments,
    InsertedKeys,
    LineageEnd,
    LineagePurge,
    LineageRevert,
    LineageStage,
    LineageStart,
    MetadataAction,
    PruneState,
    PushOwner,
    RemoveSegment,
    SetDeletionVector,
    SetTransaction,
    TransactionPrepare,
)
from .descriptors import SegmentDescriptor, describe
from .enums import LineageState, Operation
from .partitioning import UNPARTITIONED, PartitionSpec, partition_problem
from .schema_ids import breaking_change, key_follows_ids


@dataclass(slots=True)
class SegmentState:
    """A segment in a snapshot, with a light ``SegmentDescriptor`` as its ``file``.

    The descriptor is not the pydantic ``SegmentFile`` of the commit that added it: a
    snapshot may hold 100,000 of these.

    Never changed once made: applying a commit puts a new ``SegmentState`` in the snapshot's
    dict instead, so copies of a snapshot share these (``Snapshot.copy`` copies the dict, not
    every segment: an append to a 1,000-segment table copied 1,000 records, twice). Not
    ``frozen``: that would slow the checkpoint parse that builds 100,000 of them."""

    file: SegmentDescriptor
    added_version: int
    removed_version: int | None = None
    lineage_entry: str | None = None

    @property
    def id(self) -> str:
        return self.file.id


@dataclass
class LineageEntry:
    """Pinot's ``{id, segments_from, segments_to, state, timestamp}`` plus two versions.

    The versions are those at which it started and last changed state (retention and
    history need them)."""

    id: str
    segments_from: tuple[str, ...]
    segments_to: tuple[str, ...]
    state: LineageState
    timestamp_ms: int
    started_version: int
    state_version: int
    owner: PushOwner | None = None  # who runs the push (None in logs from before owners)
    lease_expires_ms: int | None = None  # the first lease, from the start; renewals live in a lease file
    staged: bool = False  # a publish=False push whose data landed: waits for a person
    revert_reason: str | None = None  # why mvtable reverted it by itself, if it did

    @property
    def live(self) -> bool:
        return self.state in (LineageState.IN_PROGRESS, LineageState.COMPLETED)


class HistoryItem(NamedTuple):
    """One commit as the history keeps it.

    A named tuple rather than a frozen dataclass: a checkpoint of a long-lived table holds
    one per version, and a named tuple builds faster."""

    version: int
    timestamp_ms: int
    operation: Operation


@dataclass
class Snapshot:
    version: int = -1
    timestamp_ms: int = 0
    table_id: str = ""
    table_schema: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    primary_key: tuple[str, ...] = ()
    segments: dict[str, SegmentState] = field(default_factory=dict)
    lineage: dict[str, LineageEntry] = field(default_factory=dict)
    dvs: dict[str, DeletionVectorRef] = field(default_factory=dict)
    history: list[HistoryItem] = field(default_factory=list)
    # streaming writers: application id -> last micro-batch id committed (SetTransaction)
    transactions: dict[str, int] = field(default_factory=dict)
    # the schema's id, the highest field id ever assigned (0: none recorded, a table from
    # before field ids) and the last version whose schema change was more than an addition
    # (a rename, drop or type change; -1: none): see ``schema_ids``
    schema_id: int = 0
    last_field_id: int = 0
    schema_break_version: int = -1
    # streaming writers: application id -> commit time of its last micro-batch (vacuum forgets
    # an application idle past streamingAppRetentionPeriod, so this state stays bounded)
    transaction_times: dict[str, int] = field(default_factory=dict)
    # partition spec id -> spec (spec 0, unpartitioned, always there) and the spec new writes
    # use (see ``partitioning``); a table from before partitions reads as unpartitioned
    partition_specs: dict[int, PartitionSpec] = field(default_factory=lambda: {0: UNPARTITIONED})
    default_spec_id: int = 0

    @property
    def default_spec(self) -> PartitionSpec:
        """The spec new writes use."""
        return self.partition_specs[self.default_spec_id]

    @property
    def exists(self) -> bool:
        return self.version >= 0

    def visible_segment_ids(self) -> list[str]:
        """Pinot's routing rule, ordered by when the segments were added.

        Added, minus ``from`` of COMPLETED entries, minus ``to`` of IN_PROGRESS and REVERTED
        entries, minus removed."""
        hidden: set[str] = set()
        for entry in self.lineage.values():
            hidden.update(entry.segments_from if entry.state == LineageState.COMPLETED else entry.segments_to)
        return [sid for sid, seg in self.segments.items() if seg.removed_version is None and sid not in hidden]

    def visible_segments(self) -> list[SegmentState]:
        return [self.segments[sid] for sid in self.visible_segment_ids()]

    def copy(self) -> Snapshot:
        # Segment states, descriptors and DV refs are never changed in place, so a shallow
        # copy of the containers suffices; lineage entries are (few, and updated in place).
        return Snapshot(
            version=self.version,
            timestamp_ms=self.timestamp_ms,
            table_id=self.table_id,
            table_schema=self.table_schema,
            properties=dict(self.properties),
            primary_key=self.primary_key,
            segments=dict(self.segments),
            lineage={k: dataclasses.replace(v) for k, v in self.lineage.items()},
            dvs=dict(self.dvs),
            history=list(self.history),
            transactions=dict(self.transactions),
            schema_id=self.schema_id,
            last_field_id=self.last_field_id,
            schema_break_version=self.schema_break_version,
            transaction_times=dict(self.transaction_times),
            partition_specs=dict(self.partition_specs),
            default_spec_id=self.default_spec_id,
        )


def apply_commit(state: Snapshot, commit: Commit) -> None:
    """Apply one commit to ``state`` in place.

    The caller decides whether an invalid commit means a conflict (while committing) or a
    corrupt log (while replaying).

    Raises:
        InvalidLineageTransitionError: The commit is not valid on top of ``state``."""
    if commit.version != state.version + 1:
        raise InvalidLineageTransitionError(f"version {commit.version} does not follow {state.version}")
    v = commit.version
    if not state.exists and not any(isinstance(a, MetadataAction) for a in commit.actions):
        raise InvalidLineageTransitionError("the first commit of a table must carry its metadata")
    for action in commit.actions:
        _APPLY[type(action)](state, action, v, commit.timestamp_ms)
    state.version = v
    state.timestamp_ms = commit.timestamp_ms
    state.history.append(HistoryItem(v, commit.timestamp_ms, commit.operation))


def replay(commits: Iterable[Commit], *, base: Snapshot | None = None, in_place: bool = False) -> Snapshot:
    """Snapshot after applying ``commits`` (consecutive versions) to ``base``.

    Pure unless ``in_place``: then ``base`` itself is advanced, which saves copying a
    snapshot nobody else holds (one just parsed from a checkpoint).

    Raises:
        CorruptMetadataError: A commit cannot be applied to the snapshot before it."""
    state = (base if in_place else base.copy()) if base is not None else Snapshot()
    for commit in commits:
        try:
            apply_commit(state, commit)
        except InvalidLineageTransitionError as exc:
            raise CorruptMetadataError(f"log version {commit.version}", f"cannot be applied: {exc}") from None
    return state


def _metadata(s: Snapshot, a: MetadataAction, v: int, ts: int) -> None:
    if s.exists and a.table_id != s.table_id:
        raise InvalidLineageTransitionError(f"table id changed from {s.table_id} to {a.table_id}")
    if (
        a.primary_key is not None
        and s.exists
        and tuple(a.primary_key) != s.primary_key
        and not key_follows_ids(s.table_schema, s.primary_key, a.table_schema, a.primary_key)
    ):
        raise InvalidLineageTransitionError(f"the primary key {list(s.primary_key)} cannot change to {list(a.primary_key)}")
    if s.exists and a.table_schema != s.table_schema:
        if breaking_change(s.table_schema, a.table_schema) is not None:
            s.schema_break_version = v
        s.schema_id = a.schema_id if a.schema_id is not None else s.schema_id + 1
    elif a.schema_id is not None:
        s.schema_id = a.schema_id
    if a.last_field_id is not None:
        if a.last_field_id < s.last_field_id:
            raise InvalidLineageTransitionError(
                f"the highest field id cannot go down from {s.last_field_id} to {a.last_field_id}"
            )
        s.last_field_id = a.last_field_id
    if a.partition_specs is not None or a.default_spec_id is not None:
        _partitioning(s, a)
    s.table_id = a.table_id
    s.table_schema = a.table_schema
    s.properties = dict(a.properties)
    if a.primary_key is not None:
        s.primary_key = tuple(a.primary_key)


def _partitioning(s: Snapshot, a: MetadataAction) -> None:
    """Apply a metadata action's partition specs and default spec.

    Specs only accumulate: one a segment may name never changes or goes (spec 0 stays
    unpartitioned)."""
    specs = dict(s.partition_specs)
    for spec in a.partition_specs or ():
        old = specs.get(spec.spec_id)
        if old is not None and old != spec:
            raise InvalidLineageTransitionError(f"partition spec {spec.spec_id} is recorded already and cannot change")
        specs[spec.spec_id] = spec
    if a.partition_specs is not None:
        kept = {spec.spec_id for spec in a.partition_specs} | {0}
        dropped = sorted(set(specs) - kept)
        if dropped:
            raise InvalidLineageTransitionError(f"partition specs {dropped} cannot be dropped")
    default = a.default_spec_id if a.default_spec_id is not None else s.default_spec_id
    if default not in specs:
        raise InvalidLineageTransitionError(f"the default partition spec {default} does not exist")
    s.partition_specs = specs
    s.default_spec_id = default


def _add(s: Snapshot, a: AddSegment, v: int, ts: int) -> None:
    sid = a.segment.id
    if sid in s.segments:
        raise InvalidLineageTransitionError(f"segment {sid} was added before")
    if a.segment.spec_id is not None or a.segment.partition is not None:
        problem = partition_problem(s.partition_specs, a.segment.spec_id, a.segment.partition)
        if problem is not None:
            raise InvalidLineageTransitionError(f"segment {sid}: {problem}")
    if a.lineage_entry is not None:
        entry = _entry(s, a.lineage_entry)
        if entry.state != LineageState.IN_PROGRESS:
            raise InvalidLineageTransitionError(
                f"cannot add segment {sid} to lineage entry {entry.id}: it is {entry.state}, not IN_PROGRESS"
            )
        owner = next((e for e in s.lineage.values() if sid in e.segments_to), None)
        if owner is not None and owner is not entry:
            raise InvalidLineageTransitionError(f"segment {sid} belongs to lineage entry {owner.id}, not {entry.id}")
        if owner is None:  # not declared by the start: it joins segments_to now
            entry.segments_to = entry.segments_to + (sid,)
        if entry.owner is None:
            # Logs from before owners and LineageStage: data landing in an entry that its
            # commit does not end (it becomes COMPLETED otherwise) was a staged push.
            entry.staged = True
    s.segments[sid] = SegmentState(file=describe(a.segment), added_version=v, lineage_entry=a.lineage_entry)


def _remove(s: Snapshot, a: RemoveSegment, v: int, ts: int) -> None:
    seg = s.segments.get(a.segment_id)
    if seg is None or seg.removed_version is not None:
        raise InvalidLineageTransitionError(f"segment {a.segment_id} is not in the table")
    for entry in s.lineage.values():
        if entry.state == LineageState.IN_PROGRESS and (a.segment_id in entry.segments_from or a.segment_id in entry.segments_to):
            raise SegmentInUseError(
                f"segment {a.segment_id} is held by IN_PROGRESS lineage entry {entry.id}; end or revert that push first"
            )
    s.segments[a.segment_id] = dataclasses.replace(seg, removed_version=v)
    s.dvs.pop(a.segment_id, None)


def _dv(s: Snapshot, a: SetDeletionVector, v: int, ts: int) -> None:
    seg = s.segments.get(a.segment_id)
    if seg is None or seg.removed_version is not None:
        raise InvalidLineageTransitionError(f"deletion vector for segment {a.segment_id}, which is not in the table")
    if a.dv.cardinality > seg.file.num_rows:
        raise InvalidLineageTransitionError(
            f"deletion vector of segment {a.segment_id} deletes {a.dv.cardinality} rows of {seg.file.num_rows}"
        )
    s.dvs[a.segment_id] = a.dv


def _start(s: Snapshot, a: LineageStart, v: int, ts: int) -> None:
    if a.entry_id in s.lineage:
        raise InvalidLineageTransitionError(f"lineage entry {a.entry_id} exists already")
    visible = set(s.visible_segment_ids())
    missing = [sid for sid in a.segments_from if sid not in visible]
    if missing:
        raise InvalidLineageTransitionError(f"segments_from are not visible: {', '.join(missing[:5])}")
    for entry in s.lineage.values():
        overlap = set(a.segments_from) & set(entry.segments_from)
        if entry.state == LineageState.IN_PROGRESS and overlap:
            raise InvalidLineageTransitionError(
                f"lineage entry {entry.id} is IN_PROGRESS on the same segments; end or revert it first"
            )
    declared = {sid for entry in s.lineage.values() for sid in entry.segments_to}
    clash = [sid for sid in a.segments_to if sid in s.segments or sid in declared]
    if clash:
        raise InvalidLineageTransitionError(f"segments_to exist already: {', '.join(clash[:5])}")
    s.lineage[a.entry_id] = LineageEntry(
        id=a.entry_id,
        segments_from=tuple(a.segments_from),
        segments_to=tuple(a.segments_to),
        state=LineageState.IN_PROGRESS,
        timestamp_ms=ts,
        started_version=v,
        state_version=v,
        owner=a.owner,
        lease_expires_ms=a.lease_expires_ms,
    )


def _end(s: Snapshot, a: LineageEnd, v: int, ts: int) -> None:
    entry = _entry(s, a.entry_id)
    if entry.state != LineageState.IN_PROGRESS:
        raise InvalidLineageTransitionError(f"lineage entry {entry.id} is {entry.state}; only IN_PROGRESS can end")
    visible = set(s.visible_segment_ids())
    gone = [sid for sid in entry.segments_from if sid not in visible]
    if gone:
        raise InvalidLineageTransitionError(
            f"lineage entry {entry.id} cannot end: segments it replaces are no longer visible ({', '.join(gone[:5])})"
        )
    missing = [sid for sid in entry.segments_to if sid not in s.segments or s.segments[sid].removed_version is not None]
    if missing:
        raise InvalidLineageTransitionError(
            f"lineage entry {entry.id} cannot end: segments_to missing ({', '.join(missing[:5])})"
        )
    entry.state = LineageState.COMPLETED
    entry.timestamp_ms = ts
    entry.state_version = v


def _revert(s: Snapshot, a: LineageRevert, v: int, ts: int) -> None:
    entry = _entry(s, a.entry_id)
    if entry.state not in (LineageState.IN_PROGRESS, LineageState.COMPLETED):
        raise InvalidLineageTransitionError(
            f"lineage entry {entry.id} is {entry.state}; only IN_PROGRESS or COMPLETED can be reverted"
        )
    if entry.state == LineageState.COMPLETED:
        blocker = revert_blocker(s, entry)
        if blocker:
            raise InvalidLineageTransitionError(f"cannot revert lineage entry {entry.id}: {blocker}")
    entry.state = LineageState.REVERTED
    entry.timestamp_ms = ts
    entry.state_version = v
    entry.revert_reason = a.reason


def _stage(s: Snapshot, a: LineageStage, v: int, ts: int) -> None:
    entry = _entry(s, a.entry_id)
    if entry.state != LineageState.IN_PROGRESS:
        raise InvalidLineageTransitionError(f"lineage entry {entry.id} is {entry.state}; only IN_PROGRESS can be staged")
    entry.staged = True


def _prune(s: Snapshot, a: PruneState, v: int, ts: int) -> None:
    named = {sid for e in s.lineage.values() for sid in (*e.segments_from, *e.segments_to)}
    for sid in a.segment_ids:
        seg = s.segments.get(sid)
        if seg is None or seg.removed_version is None:
            raise InvalidLineageTransitionError(f"cannot prune segment {sid}: it is not a removed segment of the table")
        if sid in named:
            raise InvalidLineageTransitionError(f"cannot prune segment {sid}: a lineage entry still names it")
        del s.segments[sid]
    for app_id in a.app_ids:
        if app_id not in s.transactions:
            raise InvalidLineageTransitionError(f"cannot forget streaming application {app_id}: the table has no record of it")
        del s.transactions[app_id]
        s.transaction_times.pop(app_id, None)
    if a.history_before is not None:
        if a.history_before > v:
            raise InvalidLineageTransitionError(f"cannot prune history before version {a.history_before}: it is in the future")
        s.history = s.history[bisect.bisect_left(s.history, a.history_before, key=lambda h: h.version) :]


def revert_blocker(s: Snapshot, entry: LineageEntry) -> str | None:
    """Why a COMPLETED entry cannot be reverted alone, or ``None``.

    Its output must still be what readers see, and what it replaced must still exist to
    come back."""
    to = set(entry.segments_to)
    for other in s.lineage.values():
        if other.id != entry.id and other.live and to & set(other.segments_from):
            return f"its segments were since replaced by lineage entry {other.id} ({other.state}); revert {other.id} first"
    for sid in entry.segments_to:
        removed = s.segments[sid].removed_version
        if removed is not None:
            return f"its segment {sid} was removed by the commit at version {removed}"
    for sid in entry.segments_from:
        removed = s.segments[sid].removed_version
        if removed is not None:
            return f"the segment {sid} it replaced was already removed at version {removed} (retention)"
    return None


def _purge(s: Snapshot, a: LineagePurge, v: int, ts: int) -> None:
    entry = _entry(s, a.entry_id)
    if entry.state == LineageState.IN_PROGRESS:
        raise InvalidLineageTransitionError(f"lineage entry {entry.id} is IN_PROGRESS and cannot be purged")
    hidden = entry.segments_from if entry.state == LineageState.COMPLETED else entry.segments_to
    kept = [sid for sid in hidden if sid in s.segments and s.segments[sid].removed_version is None]
    if kept:
        raise InvalidLineageTransitionError(
            f"lineage entry {entry.id} still hides segments {', '.join(kept[:5])}; remove them in the same commit first"
        )
    del s.lineage[entry.id]


def _entry(s: Snapshot, entry_id: str) -> LineageEntry:
    entry = s.lineage.get(entry_id)
    if entry is None:
        raise InvalidLineageTransitionError(f"no lineage entry {entry_id}")
    return entry


def _txn(s: Snapshot, a: SetTransaction, v: int, ts: int) -> None:
    last = s.transactions.get(a.app_id)
    if last is not None and a.batch_id <= last:
        raise InvalidLineageTransitionError(
            f"application {a.app_id} committed batch {last} already; batch {a.batch_id} cannot follow it"
        )
    s.transactions[a.app_id] = a.batch_id
    s.transaction_times[a.app_id] = ts


def _inserted_keys(s: Snapshot, a: InsertedKeys, v: int, ts: int) -> None:
    """Nothing to apply: the filter only matters to writers racing this commit."""


def _txn_prepare(s: Snapshot, a: TransactionPrepare, v: int, ts: int) -> None:
    """Nothing to apply: the lineage entry of the same commit holds the state; this names the transaction's peers."""


def held_segments(s: Snapshot) -> set[str]:
    """Segments an IN_PROGRESS entry (a running or staged push) holds.

    Only that push may remove them."""
    return {sid for e in s.lineage.values() if e.state == LineageState.IN_PROGRESS for sid in (*e.segments_from, *e.segments_to)}


def origins(s: Snapshot) -> dict[str, str]:
    """Segment id → the COMPLETED entry whose ``segments_to`` holds it.

    Segments without one are plain appends. A compaction never mixes origins in one output."""
    return {sid: e.id for e in s.lineage.values() if e.state == LineageState.COMPLETED for sid in e.segments_to}


def _compact(s: Snapshot, a: CompactSegments, v: int, ts: int) -> None:
    """Apply a compaction: inputs leave and entries name the outputs.

    Inputs must be visible and not held; per output, its inputs' live rows are laid end to
    end in the order listed and of one origin."""
    visible, held, origin_of = set(s.visible_segment_ids()), held_segments(s), origins(s)
    spans: dict[str, int] = {}
    output_origin: dict[str, str | None] = {}
    for inp in a.inputs:
        sid, seg = inp.segment_id, s.segments.get(inp.segment_id)
        if seg is None or seg.removed_version is not None or sid not in visible:
            raise InvalidLineageTransitionError(f"compaction input {sid} is not a visible segment")
        if sid in held:
            raise SegmentInUseError(f"segment {sid} is held by an IN_PROGRESS lineage entry; it cannot be compacted")
        live = seg.file.num_rows - (inp.dv.cardinality if inp.dv is not None else 0)
        if live < 0 or (inp.output is None) != (live == 0):
            raise InvalidLineageTransitionError(f"compaction input {sid}: {live} live rows and output {inp.output}")
        if inp.output is None:
            continue
        out = s.segments.get(inp.output)
        if out is None or out.added_version != v:
            raise InvalidLineageTransitionError(f"compaction output {inp.output} is not added by the same commit")
        if output_origin.setdefault(inp.output, origin_of.get(sid)) != origin_of.get(sid):
            raise InvalidLineageTransitionError(f"compaction output {inp.output} mixes segments of different lineage origins")
        if inp.first_row != spans.get(inp.output, 0):
            raise InvalidLineageTransitionError(f"compaction output {inp.output}: input {sid} starts at row {inp.first_row}")
        spans[inp.output] = inp.first_row + live
    for out_id, rows in spans.items():
        if rows != s.segments[out_id].file.num_rows:
            raise InvalidLineageTransitionError(
                f"compaction output {out_id} has {s.segments[out_id].file.num_rows} rows, its inputs {rows}"
            )
    moved = {inp.segment_id: inp.output for inp in a.inputs}
    for sid in moved:
        s.segments[sid] = dataclasses.replace(s.segments[sid], removed_version=v)
        s.dvs.pop(sid, None)
    for out_id, origin in output_origin.items():
        s.segments[out_id] = dataclasses.replace(s.segments[out_id], lineage_entry=origin)
    for entry in s.lineage.values():
        entry.segments_from = _substitute(entry.segments_from, moved)
        entry.segments_to = _substitute(entry.segments_to, moved)


def _substitute(ids: tuple[str, ...], moved: dict[str, str | None]) -> tuple[str, ...]:
    if moved.keys().isdisjoint(ids):
        return ids
    out: dict[str, None] = {}
    for sid in ids:
        new = moved.get(sid, sid)
        if new is not None:
            out[new] = None
    return tuple(out)


# one handler per action type; each takes its own action class (hence Any here)
_APPLY: dict[type, Callable[[Snapshot, Any, int, int], None]] = {
    MetadataAction: _metadata,
    AddSegment: _add,
    RemoveSegment: _remove,
    SetDeletionVector: _dv,
    LineageStart: _start,
    LineageEnd: _end,
    LineageStage: _stage,
    LineageRevert: _revert,
    PruneState: _prune,
    LineagePurge: _purge,
    SetTransaction: _txn,
    InsertedKeys: _inserted_keys,
    CompactSegments: _compact,
    TransactionPrepare: _txn_prepare,
}
