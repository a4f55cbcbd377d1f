"""How far each export lags behind the table.

An export is metadata written once: Iceberg and Delta readers see the version it names
until the next export (``icebergCompat`` keeps the Iceberg side current; nothing does for
Delta). Nothing stops a reader of a stale export, and an export older than the log's
retention may name files that vacuum has since removed, so ``mvtable inspect`` reports
both. Reading the status costs one metadata file per format: Iceberg's newest
``vN.metadata.json``, Delta's newest commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mvtable.errors import MvTableError
from mvtable.lineage.log import Listing
from mvtable.storage import FileIO

from .common import PARSE_ERRORS, MetadataWriter, oldest_rebuildable, table_location
from .delta import DELTA_LOG_DIR
from .delta import newest_exported_version as _delta_version
from .iceberg import METADATA_DIR
from .iceberg import newest_exported_version as _iceberg_version

_READERS = (("iceberg", METADATA_DIR, _iceberg_version), ("delta", DELTA_LOG_DIR, _delta_version))


@dataclass(frozen=True)
class ExportStatus:
    """One format's export: the mvtable ``version`` it shows, and how far behind and how old that is.

    ``version`` is ``None`` when its metadata cannot be read (``problem`` says why). It also tells
    how many versions the table has committed since, and whether that version has left the log's
    retention (``expired``: its files may be gone, so its readers can fail)."""

    format: str
    folder: str
    version: int | None
    behind: int
    expired: bool
    problem: str | None = None

    @property
    def current(self) -> bool:
        return self.problem is None and self.behind == 0

    def advice(self, uri: str) -> str:
        """One line for people: what the export shows and what to run about it."""
        again = f"run `mvtable export {self.format} {uri}`"
        if self.problem is not None:
            return f"{self.format} export ({self.folder}/): unreadable: {self.problem}"
        text = f"{self.format} export ({self.folder}/): version {self.version}"
        if self.expired:
            return f"{text}, older than the log keeps: its files may already be vacuumed; {again}"
        if self.behind:
            return f"{text}, {self.behind} version(s) behind the table: its readers do not see them; {again}"
        return f"{text}, current"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "folder": self.folder,
            "version": self.version,
            "behind": self.behind,
            "expired": self.expired,
            "current": self.current,
            "problem": self.problem,
        }


def export_status(io: FileIO, listing: Listing) -> list[ExportStatus]:
    """The status of every export the table at ``io`` has (none: an empty list), against the newest version in ``listing``.

    Never raises for a damaged export: it is reported."""
    writer = MetadataWriter(io, table_location(io))
    oldest = oldest_rebuildable(listing.commits, listing.checkpoints, listing.latest)
    out = []
    for name, folder, newest in _READERS:
        try:
            version = newest(writer)
        except (MvTableError, *PARSE_ERRORS, OSError) as exc:
            out.append(ExportStatus(name, folder, None, 0, False, problem=str(exc)))
            continue
        if version is not None:
            out.append(ExportStatus(name, folder, version, max(0, listing.latest - version), version < oldest))
    return out
