"""Auto compaction (table property ``autoCompact``, off by default).

After a data write commits, compact what it just made worse, as Delta's auto compaction does.

Bounded: only bins that hold a segment the write added or a delete touched, and at most
one commit batch (``compactMaxBytesPerCommit``). When it runs, and that a failure never
fails the write that triggered it, is the post-commit pipeline's rule
(``mvtable.connector.post_commit``)."""

from __future__ import annotations

from collections.abc import Collection

from mvtable.lineage.actions import AddSegment, Commit, SetDeletionVector
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot

from . import CompactionReport, compact


def touched_segments(commit: Commit) -> set[str]:
    """The segments ``commit`` added or deleted rows from: where it can have made the table's layout worse."""
    added = {a.segment.id for a in commit.actions if isinstance(a, AddSegment)}
    return added | {a.segment_id for a in commit.actions if isinstance(a, SetDeletionVector)}


def compact_touched(commit_log: CommitLog, snapshot: Snapshot, touched: Collection[str]) -> CompactionReport | None:
    """The bounded compaction of the bins holding ``touched`` segments of ``snapshot``; None when there is nothing to look at."""
    if not touched:
        return None
    return compact(commit_log.io, commit_log, snapshot=snapshot, only=set(touched), max_batches=1)
