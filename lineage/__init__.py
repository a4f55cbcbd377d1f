"""The commit log, segment lineage and snapshots of an mvtable table.

A table's history is ``_mvtable/log/<version:020d>.json``, one commit per version, each a
list of actions (``actions``). Everything else here is a function of those actions:

* ``snapshot.replay`` folds commits into a ``Snapshot`` (pure, no I/O). The visible set is
  Pinot's rule: segments added, minus the ``from`` of COMPLETED lineage entries, minus the
  ``to`` of IN_PROGRESS and REVERTED ones, minus removed segments.
* ``operations`` holds the commit *builders*: given the snapshot a writer read and the
  newest one, they return the actions to commit or raise a typed conflict. Appends never
  conflict; a replace conflicts only when what it read changed.
* ``log.CommitLog`` is the only I/O: it lists and reads the log through a ``FileIO``,
  rebuilds snapshots from the newest readable checkpoint, and runs the optimistic commit
  loop (build → validate by replaying onto a copy → put-if-absent → on a lost race catch up
  and build again).
* ``checkpoint`` (Parquet snapshots), ``lineage_retention`` / ``log_retention`` (what may
  go), ``ownership`` (is a push's owner alive), ``push_scopes`` (which partitions a scoped
  push holds, and which pushes are in each other's way), ``key_filters`` and ``summary``
  (GC's light view) are pure too.

This package imports neither ``mvtable.visibility`` nor pyspark: deletion vectors appear
only as ``mvtable.dvref.DeletionVectorRef`` descriptors."""

from .actions import (
    AddSegment,
    Commit,
    LineageEnd,
    LineagePurge,
    LineageRevert,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    RowGroupInfo,
    SegmentFile,
    SetDeletionVector,
)
from .descriptors import RowGroupDescriptor, SegmentDescriptor
from .enums import LineageState, Operation
from .log import CommitLog, CommitResult
from .snapshot import LineageEntry, Snapshot, replay

__all__ = [
    "AddSegment",
    "Commit",
    "CommitLog",
    "CommitResult",
    "LineageEnd",
    "LineageEntry",
    "LineagePurge",
    "LineageRevert",
    "LineageStart",
    "LineageState",
    "MetadataAction",
    "Operation",
    "RemoveSegment",
    "RowGroupDescriptor",
    "RowGroupInfo",
    "SegmentDescriptor",
    "SegmentFile",
    "SetDeletionVector",
    "Snapshot",
    "replay",
]
