"""What each write does to a snapshot, and when a concurrent commit makes it invalid.

Each function is a pure *builder*: given the snapshot the writer read and the newest
snapshot (the commit loop calls it again after every lost race), it returns the actions to
commit or raises a typed conflict. The rules:

* appends never conflict, not even with replaces;
* a replace (overwrite, consistent push) is all-or-nothing: it conflicts when a segment it
  replaces was removed or replaced since it read;
* a table's schema is set by its first commit (a concurrent creator with another schema is
  a conflict) and changes only by commits that carry a new one; a write that read the schema
  before a rename, drop or type change, or a schema change racing another, is a conflict
  (``schema_ids.schema_race``, checked by the commit loop for every commit);
* a compaction never fails anyone: appends pass it by, and a bin whose inputs a concurrent
  commit replaced is dropped from it (``compaction_blocker``), not the other commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import (
    ConcurrentCompactionError,
    ConcurrentLineageError,
    ConcurrentMetadataError,
    ConcurrentReplaceError,
    NothingToCommit,
)

from .actions import (
    Action,
    AddSegment,
    CompactedInput,
    CompactSegments,
    LineageEnd,
    LineageRevert,
    LineageStage,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    SegmentFile,
    SetDeletionVector,
    SetTransaction,
)
from .enums import LineageState, Operation
from .lineage_retention import keep_two_snapshots
from .ownership import PushClaim, recover_blocked
from .snapshot import Snapshot, held_segments, origins


def create_or_check(current: Snapshot, metadata: MetadataAction | None) -> list[Action]:
    """The metadata action if the table does not exist yet.

    If a concurrent writer created it first, its schema and partition spec must be the ones
    we meant to create.

    Raises:
        ConcurrentMetadataError: The table was created concurrently with another schema, or
            it does not exist and ``metadata`` is None."""
    if current.exists:
        if metadata is not None and metadata.table_schema != current.table_schema:
            raise ConcurrentMetadataError("the table was created concurrently with a different schema")
        if (
            metadata is not None
            and metadata.partition_specs is not None
            and any(current.partition_specs.get(spec.spec_id) != spec for spec in metadata.partition_specs)
        ):
            raise ConcurrentMetadataError("the table was created concurrently with a different partition spec")
        return []
    if metadata is None:
        raise ConcurrentMetadataError("the table does not exist and this write carries no schema")
    return [metadata]


def require_visible(current: Snapshot, segment_ids: Sequence[str], *, what: str) -> None:
    visible = set(current.visible_segment_ids())
    gone = [sid for sid in segment_ids if sid not in visible]
    compacted = [sid for sid in gone if removed_by(current, sid) == Operation.COMPACT]
    if compacted:
        raise ConcurrentCompactionError(
            f"{what}: {len(compacted)} segment(s) it read were rewritten by a concurrent compaction "
            f"(first: {compacted[0]}, table now at version {current.version}); the rows are the same: run it again"
        )
    if gone:
        raise ConcurrentReplaceError(
            f"{what}: {len(gone)} segment(s) it read were replaced or removed by a concurrent commit "
            f"(first: {gone[0]}, table now at version {current.version}); re-read and try again"
        )


def removed_by(current: Snapshot, segment_id: str) -> str | None:
    """The operation of the commit that removed ``segment_id``.

    None: it was not removed, or that commit is older than the history the snapshot keeps."""
    seg = current.segments.get(segment_id)
    if seg is None or seg.removed_version is None:
        return None
    for item in reversed(current.history):
        if item.version == seg.removed_version:
            return item.operation
        if item.version < seg.removed_version:
            break
    return None


def append(current: Snapshot, segments: Sequence[SegmentFile], *, metadata: MetadataAction | None = None) -> list[Action]:
    return [*create_or_check(current, metadata), *(AddSegment(segment=s) for s in segments)]


def overwrite(
    read: Snapshot, current: Snapshot, segments: Sequence[SegmentFile], *, metadata: MetadataAction | None = None
) -> list[Action]:
    """Replace what the writer read. Segments appended concurrently survive (they were not read)."""
    replaced = read.visible_segment_ids() if read.exists else []
    require_visible(current, replaced, what="overwrite")
    return [
        *create_or_check(current, metadata),
        *(RemoveSegment(segment_id=sid) for sid in replaced),
        *(AddSegment(segment=s) for s in segments),
    ]


def push_start(
    read: Snapshot,
    current: Snapshot,
    entry_id: str,
    *,
    claim: PushClaim | None = None,
    metadata: MetadataAction | None = None,
) -> list[Action]:
    """Open an IN_PROGRESS entry replacing everything the writer read, and drop snapshots older than the previous one.

    Dropping uses ``lineage_retention.keep_two_snapshots``. An IN_PROGRESS push over the
    same segments is reverted in this same commit when the ``claim``'s facts show its owner
    died or its lease ran out (``ownership``): a crash can never leave the revert without
    the new start or the other way round.

    Raises:
        PushInProgressError: A live push holds the same segments.
        StagedPushError: A staged push holds the same segments.
        ConcurrentCompactionError: A segment the writer read was compacted since.
        ConcurrentReplaceError: A segment the writer read was replaced or removed since.
        ConcurrentMetadataError: The table was created concurrently with another schema."""
    replaced = read.visible_segment_ids() if read.exists else []
    require_visible(current, replaced, what="consistent push")
    # without a claim the clock stands at the epoch: no lease has ended, nothing is recovered
    claim = claim or PushClaim(owner=None, lease_ms=0, now_ms=0)
    return [
        *create_or_check(current, metadata),
        *recover_blocked(current, replaced, claim),
        *keep_two_snapshots(current),
        LineageStart(
            entry_id=entry_id,
            segments_from=tuple(replaced),
            owner=claim.owner,
            lease_expires_ms=claim.lease_expires_ms if claim.owner is not None else None,
        ),
    ]


def check_new_batch(current: Snapshot, *, app_id: str, batch_id: int) -> None:
    """Refuse a batch of ``app_id`` that ``current`` records already.

    Raises:
        NothingToCommit: ``current`` records ``batch_id`` (or a later one) of ``app_id``:
            the batch landed already."""
    last = current.transactions.get(app_id)
    if last is not None and batch_id <= last:
        raise NothingToCommit(f"batch {batch_id} of application {app_id} is committed already (last: {last})")


def stream_batch(
    current: Snapshot,
    segments: Sequence[SegmentFile],
    *,
    app_id: str,
    batch_id: int,
    complete_entry: str | None = None,
    metadata: MetadataAction | None = None,
) -> list[Action]:
    """One streaming micro-batch: its segments and its ``SetTransaction`` in one commit.

    Checked against the newest snapshot on every attempt, so a batch that already landed
    (a replay after a restart, or two attempts of one batch racing) raises
    ``NothingToCommit`` instead of landing twice. With ``complete_entry`` the batch replaces
    every visible segment as a consistent push made in this one commit (start, segments,
    end), so the batch can be rolled back like any push."""
    check_new_batch(current, app_id=app_id, batch_id=batch_id)
    txn = SetTransaction(app_id=app_id, batch_id=batch_id)
    if complete_entry is None:
        return [*create_or_check(current, metadata), *(AddSegment(segment=s) for s in segments), txn]
    return [
        *create_or_check(current, metadata),
        *keep_two_snapshots(current),
        LineageStart(entry_id=complete_entry, segments_from=tuple(current.visible_segment_ids())),
        *(AddSegment(segment=s, lineage_entry=complete_entry) for s in segments),
        LineageEnd(entry_id=complete_entry),
        txn,
    ]


def push_segments(current: Snapshot, entry_id: str, segments: Sequence[SegmentFile], *, publish: bool) -> list[Action]:
    """Add the pushed segments to the entry and, when publishing, complete it.

    Raises:
        ConcurrentLineageError: The entry is gone or no longer IN_PROGRESS.
        ConcurrentCompactionError: A segment the push replaces was compacted since.
        ConcurrentReplaceError: A segment the push replaces was replaced or removed since."""
    entry = current.lineage.get(entry_id)
    if entry is None or entry.state != LineageState.IN_PROGRESS:
        state = "gone" if entry is None else entry.state
        raise ConcurrentLineageError(f"lineage entry {entry_id} is {state}; the push can no longer complete")
    require_visible(current, entry.segments_from, what=f"consistent push {entry_id}")
    actions: list[Action] = [AddSegment(segment=s, lineage_entry=entry_id) for s in segments]
    actions.append(LineageEnd(entry_id=entry_id) if publish else LineageStage(entry_id=entry_id))
    return actions


def publish(current: Snapshot, entry_id: str) -> list[Action]:
    return [LineageEnd(entry_id=entry_id)]


def revert(current: Snapshot, entry_id: str) -> list[Action]:
    return [LineageRevert(entry_id=entry_id)]


def revert_effect(current: Snapshot, entry_id: str) -> tuple[list[str], list[str]]:
    """What reverting ``entry_id`` would show readers.

    That is the segments that become visible again (a COMPLETED push's ``from``, less what
    was removed since) and those visible both before and after. A keyed rollback checks the
    first group's keys against the second: rows appended after the push completed may hold
    keys the push had replaced."""
    after = current.copy()
    after.lineage[entry_id].state = LineageState.REVERTED
    before = set(current.visible_segment_ids())
    visible = after.visible_segment_ids()
    return [sid for sid in visible if sid not in before], [sid for sid in visible if sid in before]


def restore(current: Snapshot, target: Snapshot, *, new_ids: dict[str, str], empty_dv: Any) -> list[Action]:
    """Make the visible segments and deletion vectors equal ``target``'s, in one commit.

    Segments visible now but not then are removed. Segments visible then but hidden or
    removed now come back as *clones*: a new id naming the same file (lineage rules would
    keep hiding the old id). Shared segments get their old DV back (``empty_dv`` when they
    had none). ``new_ids`` maps each segment to clone to its new id. A clone of a segment written
    before the last rename, drop or type change comes back without row-group statistics."""
    now = current.visible_segment_ids()
    then = target.visible_segment_ids()
    now_set, then_set = set(now), set(then)
    actions: list[Action] = [RemoveSegment(segment_id=sid) for sid in now if sid not in then_set]
    for sid in then:
        old_dv = target.dvs.get(sid)
        if sid in now_set:
            if current.dvs.get(sid) != old_dv:
                actions.append(SetDeletionVector(segment_id=sid, dv=old_dv if old_dv is not None else empty_dv))
            continue
        clone = target.segments[sid].file.to_segment_file(id=new_ids[sid])
        if target.segments[sid].added_version <= current.schema_break_version:
            # written before a rename, drop or type change: its statistics are keyed by names that
            # may mean other columns now, and the clone is newer than that change (readers trust
            # the statistics of such segments): it comes back without them
            clone = clone.model_copy(update={"row_groups": tuple(rg.model_copy(update={"stats": {}}) for rg in clone.row_groups)})
        actions.append(AddSegment(segment=clone))
        if old_dv is not None:
            actions.append(SetDeletionVector(segment_id=clone.id, dv=old_dv))
    return actions


def same_view(a: Snapshot, b: Snapshot) -> bool:
    """Whether two snapshots show readers the same rows.

    They do when they hold the same files with the same DVs (clones count as the file they
    name)."""

    def view(s: Snapshot) -> set[tuple[str, Any]]:
        out = set()
        for seg in s.visible_segments():
            dv = s.dvs.get(seg.id)
            out.add((seg.file.path, None if dv is None or dv.cardinality == 0 else (dv.inline, dv.path, dv.offset, dv.size)))
        return out

    return view(a) == view(b)


def compaction_candidates(current: Snapshot) -> dict[str, str | None]:
    """The visible segments a compaction may take, in the order they were added, each with its origin.

    The origin is the COMPLETED entry whose ``segments_to`` holds it, else None. Segments
    an IN_PROGRESS entry holds (a running or staged push) are left out."""
    held, origin_of = held_segments(current), origins(current)
    return {sid: origin_of.get(sid) for sid in current.visible_segment_ids() if sid not in held}


def compaction_blocker(current: Snapshot, segment_ids: Sequence[str]) -> str | None:
    """Why a bin of ``segment_ids`` (one origin when planned) can no longer be compacted at ``current``, or None.

    A push or overwrite that replaced an input wins."""
    candidates = compaction_candidates(current)
    for sid in segment_ids:
        if sid not in candidates:
            seg = current.segments.get(sid)
            if seg is None or seg.removed_version is not None:
                return f"segment {sid} was removed or compacted by a concurrent commit"
            if sid in held_segments(current):
                return f"segment {sid} is held by a consistent push in progress"
            return f"segment {sid} was replaced by a consistent push or rolled back"
    if len({candidates[sid] for sid in segment_ids}) > 1:
        return "the segments no longer share one lineage origin"
    return None


def compact(
    current: Snapshot, bins: Sequence[tuple[Sequence[CompactedInput], SegmentFile | None]], dvs: dict[str, DeletionVectorRef]
) -> list[Action]:
    """One commit for rewritten bins (``(row map, output)``) that ``compaction_blocker`` let through.

    It holds the outputs, the deletes carried onto them (``dvs``, output id → DV), and the
    row map."""
    actions: list[Action] = [AddSegment(segment=out) for _, out in bins if out is not None]
    actions += [SetDeletionVector(segment_id=sid, dv=dv) for sid, dv in dvs.items()]
    actions.append(CompactSegments(inputs=tuple(i for inputs, _ in bins for i in inputs)))
    return actions
