"""What one commit changed for a reader: the pure core of the change feed and the source.

A commit's actions say what it did to the log; a stream needs to know what it did to the
*rows a reader sees*. ``advance`` applies one commit to a snapshot (in place, no I/O) and
compares the visible segments and their deletion vectors before and after:

* segments that became visible: their live rows were inserted (a plain append, the output
  of a consistent push, the segments a rollback brought back);
* segments that stopped being visible: their live rows (as of the version before) were
  deleted (an overwrite, the input of a push, the output of a reverted push);
* a segment visible on both sides whose deletion vector changed: the positions added to
  it were deleted, the positions removed from it (a restore) were inserted again.

Nothing else is stored at commit time: the feed is derived from segments and DVs the table
keeps anyway. A commit is classified for the plain (non change-feed) source as an APPEND
(only new segments), NEUTRAL (no visible row changed — or a compaction, which rewrites rows
without changing them) or CHANGE (anything a row-appending stream cannot express).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mvtable.dvref import DeletionVectorRef
from mvtable.lineage.actions import AddSegment, Commit, MetadataAction, SetTransaction
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.enums import Operation
from mvtable.lineage.snapshot import Snapshot, apply_commit

# Operations that move rows without changing them. Compaction (issue 13) names its commits so.
DATA_NEUTRAL_OPERATIONS = frozenset({Operation.COMPACT})


class CommitKind(str, enum.Enum):
    APPEND = "append"
    NEUTRAL = "neutral"
    CHANGE = "change"


class ChangeKind(str, enum.Enum):
    INSERT_LIVE = "insert_live"  # every row live at ``dv_after`` was inserted
    DELETE_LIVE = "delete_live"  # every row live at ``dv_before`` was deleted
    DV_DELTA = "dv_delta"  # rows in dv_after - dv_before deleted, in dv_before - dv_after inserted


@dataclass(frozen=True)
class SegmentChange:
    """One segment's part of a version's changes: all an executor needs to read its rows."""

    segment: SegmentDescriptor
    kind: ChangeKind
    dv_before: DeletionVectorRef | None = None
    dv_after: DeletionVectorRef | None = None

    @property
    def rows(self) -> int:
        """Rows it yields (exact for whole segments, an upper bound for DV deltas)."""
        if self.kind is ChangeKind.INSERT_LIVE:
            return self.segment.num_rows - _card(self.dv_after)
        if self.kind is ChangeKind.DELETE_LIVE:
            return self.segment.num_rows - _card(self.dv_before)
        return abs(_card(self.dv_after) - _card(self.dv_before)) or 1

    @property
    def bytes(self) -> int:
        return int(self.segment.size_bytes)


@dataclass(frozen=True)
class VersionDelta:
    version: int
    timestamp_ms: int
    operation: Operation
    kind: CommitKind
    changes: tuple[SegmentChange, ...]
    primary_key: tuple[str, ...] = ()  # set on upserts: pair deletes and inserts by these columns
    schema: dict[str, Any] | None = None  # the table schema this commit set, if it set one (a schema change)


def _card(dv: DeletionVectorRef | None) -> int:
    return 0 if dv is None else dv.cardinality


def normalized_dv(dv: DeletionVectorRef | None) -> DeletionVectorRef | None:
    """An empty DV (a restore writes one for "no deletes") means the same as none."""
    return None if dv is None or dv.cardinality == 0 else dv


def advance(state: Snapshot, commit: Commit) -> VersionDelta:
    """Apply ``commit`` to ``state`` in place and say what it changed for readers (and the schema it set, if any)."""
    delta = _advance(state, commit)
    if any(isinstance(a, MetadataAction) for a in commit.actions):
        delta = dataclasses.replace(delta, schema=state.table_schema)
    return delta


def _advance(state: Snapshot, commit: Commit) -> VersionDelta:
    if commit.operation in DATA_NEUTRAL_OPERATIONS:  # rows moved, none changed: nothing to emit
        apply_commit(state, commit)
        return VersionDelta(commit.version, commit.timestamp_ms, commit.operation, CommitKind.NEUTRAL, ())
    if _plain_append(commit):
        apply_commit(state, commit)
        added = tuple(
            SegmentChange(state.segments[a.segment.id].file, ChangeKind.INSERT_LIVE)
            for a in commit.actions
            if isinstance(a, AddSegment)
        )
        kind = CommitKind.APPEND if added else CommitKind.NEUTRAL
        return VersionDelta(commit.version, commit.timestamp_ms, commit.operation, kind, added)
    visible_before = state.visible_segment_ids()
    dvs_before = dict(state.dvs)
    apply_commit(state, commit)
    visible_after = state.visible_segment_ids()
    before_set, after_set = set(visible_before), set(visible_after)
    changes: list[SegmentChange] = []
    for sid in visible_before:
        if sid not in after_set:
            changes.append(
                SegmentChange(state.segments[sid].file, ChangeKind.DELETE_LIVE, dv_before=normalized_dv(dvs_before.get(sid)))
            )
    for sid in visible_after:
        if sid in before_set:
            old, new = normalized_dv(dvs_before.get(sid)), normalized_dv(state.dvs.get(sid))
            if old != new:
                changes.append(SegmentChange(state.segments[sid].file, ChangeKind.DV_DELTA, dv_before=old, dv_after=new))
    for sid in visible_after:
        if sid not in before_set:
            changes.append(
                SegmentChange(state.segments[sid].file, ChangeKind.INSERT_LIVE, dv_after=normalized_dv(state.dvs.get(sid)))
            )
    return VersionDelta(
        commit.version,
        commit.timestamp_ms,
        commit.operation,
        classify(commit, changes),
        tuple(changes),
        primary_key=_primary_key(commit),
    )


def classify(commit: Commit, changes: Sequence[SegmentChange]) -> CommitKind:
    if not changes:
        return CommitKind.NEUTRAL
    fresh = all(c.kind is ChangeKind.INSERT_LIVE and c.dv_after is None and _added_by(commit, c.segment.id) for c in changes)
    return CommitKind.APPEND if fresh else CommitKind.CHANGE


def _added_by(commit: Commit, segment_id: str) -> bool:
    return any(isinstance(a, AddSegment) and a.segment.id == segment_id for a in commit.actions)


def _plain_append(commit: Commit) -> bool:
    """Whether a commit is a plain append: the common case, needing no diff.

    That is only segments added outside any lineage entry, plus actions that change no row
    (metadata, a streaming writer's progress). Any other action (including kinds this module
    does not know) takes the full diff, which is right for every commit."""
    return all(
        (isinstance(a, AddSegment) and a.lineage_entry is None) or isinstance(a, (MetadataAction, SetTransaction))
        for a in commit.actions
    )


def _primary_key(commit: Commit) -> tuple[str, ...]:
    if commit.operation != Operation.UPSERT:
        return ()
    key = commit.parameters.get("primary_key")
    return tuple(str(c) for c in key) if isinstance(key, (list, tuple)) else ()
