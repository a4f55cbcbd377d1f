"""Commit log, segment lineage and snapshots of an mvtable table (no Spark, no deletion-vector I/O)."""

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
from .log import CommitLog, CommitResult
from .snapshot import COMPLETED, IN_PROGRESS, REVERTED, LineageEntry, Snapshot, replay

__all__ = [
    "AddSegment",
    "Commit",
    "CommitLog",
    "CommitResult",
    "COMPLETED",
    "IN_PROGRESS",
    "LineageEnd",
    "LineageEntry",
    "LineagePurge",
    "LineageRevert",
    "LineageStart",
    "MetadataAction",
    "REVERTED",
    "RemoveSegment",
    "RowGroupDescriptor",
    "RowGroupInfo",
    "SegmentDescriptor",
    "SegmentFile",
    "SetDeletionVector",
    "Snapshot",
    "replay",
]
