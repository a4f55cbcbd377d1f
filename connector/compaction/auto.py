"""Auto compaction (table property ``autoCompact``, off by default): after a write or a
delete commits, compact what it just made worse, as Delta's auto compaction does.

Bounded: only bins that hold a segment the write added or a delete touched, and at most
one commit batch (``compactMaxBytesPerCommit``). It never fails the write that triggered
it: the write has landed already, and any error here is logged and dropped."""

from __future__ import annotations

import logging
from collections.abc import Collection

from mvtable.conf import TableProperties
from mvtable.errors import SettingsError
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from . import CompactionReport, compact

log = logging.getLogger("mvtable.compaction")


def after_commit(io: FileIO, clog: CommitLog, snapshot: Snapshot, touched: Collection[str]) -> CompactionReport | None:
    """Run the bounded compaction if the table asks for it; the report, or None."""
    try:
        enabled = TableProperties.from_strings(snapshot.properties).autoCompact
    except SettingsError:
        return None
    if not enabled or not touched:
        return None
    try:
        return compact(io, clog, snapshot=snapshot, only=set(touched), max_batches=1)
    except Exception as exc:
        log.warning("automatic compaction after version %s failed (the write itself landed): %s", snapshot.version, exc)
        return None
