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
