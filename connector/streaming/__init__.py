"""Structured Streaming and the change feed, without Spark.

* ``sink`` — exactly-once micro-batch commits (``SetTransaction`` in the batch's commit);
* ``source`` — offsets as versions, admission limits, skipping data-neutral commits;
* ``changes`` — the change feed, derived from segments and deletion vectors;
* ``versions`` / ``walker`` — what each commit changed for readers (pure), walked over the log.

The Spark classes that call these live in ``mvtable.connector.spark.stream``."""

from __future__ import annotations

from .changes import CHANGE_COLUMNS, ChangeUnit, change_schema, read_changes, read_unit
from .sink import BatchResult, commit_batch, plan_batch, query_app_id
from .source import Position, SourceOptions, StreamSource
from .versions import ChangeKind, CommitKind, SegmentChange, VersionDelta, advance

__all__ = [
    "CHANGE_COLUMNS",
    "BatchResult",
    "ChangeKind",
    "ChangeUnit",
    "CommitKind",
    "Position",
    "SegmentChange",
    "SourceOptions",
    "StreamSource",
    "VersionDelta",
    "advance",
    "change_schema",
    "commit_batch",
    "plan_batch",
    "query_app_id",
    "read_changes",
    "read_unit",
]
