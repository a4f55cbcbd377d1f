"""Iceberg v3 and Delta Lake metadata over an mvtable table's own files.

Other engines (Trino, DuckDB, Snowflake, Flink, pyiceberg, polars, delta-rs) read Iceberg
or Delta, not mvtable. An export writes only the metadata those formats need, beside
``_mvtable/`` — Iceberg under ``metadata/``, Delta under ``_delta_log/`` — naming the same
Parquet segments (and, for Iceberg, the same deletion-vector bytes): like Delta UniForm or
Apache XTable, with nothing rewritten.

``export`` takes storage and snapshots, never a ``Table``: ``Table.export_iceberg`` /
``export_delta`` and the ``mvtable export`` command are thin callers. With the table
property ``icebergCompat`` on, the post-commit pipeline (``mvtable.connector.post_commit``)
adds every commit to the Iceberg metadata right after it lands.
``export_status`` tells how far each export lags behind the table (``mvtable inspect``).
"""

from __future__ import annotations

from collections.abc import Iterable

from mvtable import checks
from mvtable.errors import InvalidOptionError
from mvtable.lineage.log import CommitLog
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
    "export",
    "export_delta",
    "export_iceberg",
    "export_status",
]

FORMATS = ("iceberg", "delta")


def export(io: FileIO, log_: CommitLog, *, format: str, all_versions: bool = False) -> ExportResult:
    """Export the table at ``io`` as ``format`` (``"iceberg"`` or ``"delta"``).

    The newest version is exported, or with ``all_versions`` every version the log can still
    rebuild. ``all_versions`` must be a real bool: the string ``"false"`` would mean every version.

    Raises:
        InvalidOptionError: ``format`` is not a known export format."""
    all_versions = checks.flag(all_versions, name="all_versions")
    if format not in FORMATS:
        raise InvalidOptionError(f"unknown export format {format!r}; choose one of {list(FORMATS)}")
    snapshots: Iterable[Snapshot] = retained_snapshots(log_) if all_versions else [log_.snapshot()]
    return export_iceberg(io, snapshots) if format == "iceberg" else export_delta(io, snapshots)
