"""What each write does to a snapshot, and when a concurrent commit makes it invalid.

Each function is a pure *builder*: given the snapshot the writer read and the newest
snapshot (the commit loop calls it again after every lost race), it returns the actions to
commit or raises a typed conflict. The rules (DESIGN.md §1, §4, §5):

* appends never conflict, not even with replaces;
* a replace (overwrite, consistent push) is all-or-nothing: it conflicts when a segment it
  replaces was removed or replaced since it read;
* a table's schema is fixed by its first commit; a concurrent creator with another schema
  is a conflict.
"""

from __future__ import annotations

from typing import Any, Sequence

from .actions import Action, AddSegment, LineageEnd, LineageRevert, LineageStart, MetadataAction, RemoveSegment, SegmentFile
from .errors import ConcurrentLineageError, ConcurrentMetadataError, ConcurrentReplaceError
from .snapshot import IN_PROGRESS, Snapshot


def create_or_check(current: Snapshot, metadata: MetadataAction | None) -> list[Action]:
    """The metadata action if the table does not exist yet. If a concurrent writer created
    it first, its schema must be the one we meant to create."""
    if current.exists:
        if metadata is not None and metadata.table_schema != current.table_schema:
            raise ConcurrentMetadataError("the table was created concurrently with a different schema")
        return []
    if metadata is None:
        raise ConcurrentMetadataError("the table does not exist and this write carries no schema")
    return [metadata]


def require_visible(current: Snapshot, segment_ids: Sequence[str], *, what: str) -> None:
    visible = set(current.visible_segment_ids())
    gone = [sid for sid in segment_ids if sid not in visible]
    if gone:
        raise ConcurrentReplaceError(
            f"{what}: {len(gone)} segment(s) it read were replaced or removed by a concurrent commit "
            f"(first: {gone[0]}, table now at version {current.version}); re-read and try again"
        )


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


def push_start(read: Snapshot, current: Snapshot, entry_id: str, *, metadata: MetadataAction | None = None) -> list[Action]:
    """Open an IN_PROGRESS entry replacing everything the writer read."""
    replaced = read.visible_segment_ids() if read.exists else []
    require_visible(current, replaced, what="consistent push")
    return [*create_or_check(current, metadata), LineageStart(entry_id=entry_id, segments_from=tuple(replaced))]


def push_segments(current: Snapshot, entry_id: str, segments: Sequence[SegmentFile], *, publish: bool) -> list[Action]:
    """Add the pushed segments to the entry and, when publishing, complete it."""
    entry = current.lineage.get(entry_id)
    if entry is None or entry.state != IN_PROGRESS:
        state = "gone" if entry is None else entry.state
        raise ConcurrentLineageError(f"lineage entry {entry_id} is {state}; the push can no longer complete")
    require_visible(current, entry.segments_from, what=f"consistent push {entry_id}")
    actions: list[Action] = [AddSegment(segment=s, lineage_entry=entry_id) for s in segments]
    if publish:
        actions.append(LineageEnd(entry_id=entry_id))
    return actions


def publish(current: Snapshot, entry_id: str) -> list[Action]:
    return [LineageEnd(entry_id=entry_id)]


def revert(current: Snapshot, entry_id: str) -> list[Action]:
    return [LineageRevert(entry_id=entry_id)]


def operation_parameters(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}
