"""Iceberg v3 and Delta Lake metadata over an mvtable table's own files.

Other engines (Trino, DuckDB, Snowflake, Flink, pyiceberg, polars, delta-rs) read Iceberg
or Delta, not mvtable. An export writes only the metadata those formats need, beside
``_mvtable/`` — Iceberg under ``metadata/``, Delta under ``_delta_log/`` — naming the same
Parquet segments (and, for Iceberg, the same deletion-vector bytes): like Delta UniForm or
Apache XTable, with nothing rewritten.

``export`` takes storage and snapshots, never a ``Table``: ``Table.export_iceberg`` /
``export_delta`` and the ``mvtable export`` command are thin callers. With the table
property ``icebergCompat`` on, every commit is added to the Iceberg metadata right after it
lands (``after_commit``); a failed export is logged and never fails the commit.
``export_status`` tells how far each export lags behind the table (``mvtable inspect``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from mvtable import checks
from mvtable.conf import TableProperties
from mvtable.errors import InvalidOptionError, MvTableError
from mvtable.lineage.log import CommitLog, add_commit_hook
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from .common import ExportResult, retained_snapshots
from .delta import DELTA_LOG_DIR, export_delta
from .iceberg import METADATA_DIR, export_iceberg
from .status import ExportStatus, export_status

__all__ = [
    "DELTA_LOG_DIR",
    "FORMATS",
    "METADATA_DIR",
    "ExportResult",
    "ExportStatus",
    "after_commit",
    "export",
    "export_delta",
    "export_iceberg",
    "export_status",
]

FORMATS = ("iceberg", "delta")
log = logging.getLogger("mvtable.export")


def export(io: FileIO, log_: CommitLog, *, format: str, all_versions: bool = False) -> ExportResult:
    """Export the newest version (``all_versions``: every version the log can still
    rebuild) of the table at ``io`` as ``format`` (``"iceberg"`` or ``"delta"``).
    ``all_versions`` must be a real bool: the string ``"false"`` would mean every version."""
    all_versions = checks.flag(all_versions, name="all_versions")
    if format not in FORMATS:
        raise InvalidOptionError(f"unknown export format {format!r}; choose one of {list(FORMATS)}")
    snapshots: Iterable[Snapshot] = retained_snapshots(log_) if all_versions else [log_.snapshot()]
    return export_iceberg(io, snapshots) if format == "iceberg" else export_delta(io, snapshots)


def after_commit(io: FileIO, snapshot: Snapshot) -> None:
    """The ``icebergCompat`` hook: add the version just committed to the Iceberg metadata."""
    try:
        enabled = TableProperties.from_strings(snapshot.properties).icebergCompat
    except MvTableError:
        return  # a table whose properties do not parse is reported by its writers, not here
    if enabled:
        export_iceberg(io, [snapshot])


add_commit_hook(after_commit)
