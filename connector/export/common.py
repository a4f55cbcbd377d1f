"""What both exporters share.

The live files of a snapshot, absolute locations, the versions a log can still rebuild, and a writer
that counts bytes and cleans up after a failed export.

Exports write metadata only, beside ``_mvtable/``: Iceberg under ``metadata/``, Delta under
``_delta_log/``. They never touch ``data/`` or ``_mvtable/``, so a failed export leaves the
mvtable table exactly as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import (
    ExportError,
    ExportOfAnotherTableError,
    ExportPathNotWritableError,
    FilesMissingError,
    ForeignExportMetadataError,
)
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot, replay
from mvtable.paths import location_uri
from mvtable.storage import FileIO

__all__ = [
    "METADATA_DIR",
    "ExportResult",
    "FileSizes",
    "LiveFile",
    "MetadataWriter",
    "live_files",
    "PARSE_ERRORS",
    "newer_versions",
    "not_ours",
    "retained_snapshots",
    "table_location",
    "table_uuid",
]


METADATA_DIR = "metadata"  # Iceberg's folder beside _mvtable/ (Delta's is _delta_log/)


@dataclass(frozen=True)
class LiveFile:
    """One visible segment as an export names it."""

    segment_id: str
    path: str  # relative to the table root
    location: str  # absolute URI
    size_bytes: int
    num_rows: int
    added_version: int
    dv: DeletionVectorRef | None  # None when nothing is deleted
    spec_id: int = 0  # the partition spec it was written under (0: unpartitioned)
    partition: tuple[Any, ...] = ()  # its partition tuple as the log stores it, one value per spec field
    footer_crc32: int | None = None  # the log's checksum of its footer (None: written before checksums)


@dataclass(frozen=True)
class ExportResult:
    """What one export wrote.

    ``metadata`` is what a reader opens: the Iceberg ``vN.metadata.json`` or the Delta table root.
    ``copied_dv_bytes`` counts deletion-vector bytes written again (see the README: inline DVs, and
    DV files that predate exports)."""

    format: str
    metadata: str
    versions: tuple[int, ...]
    files_written: int
    bytes_written: int
    copied_dv_bytes: int = 0
    skipped: tuple[int, ...] = ()  # versions whose files vacuum already removed

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "metadata": self.metadata,
            "versions": list(self.versions),
            "files_written": self.files_written,
            "bytes_written": self.bytes_written,
            "copied_dv_bytes": self.copied_dv_bytes,
            "skipped_versions": list(self.skipped),
        }


def table_location(io: FileIO) -> str:
    """The table root as an absolute URI (``file:///…`` for local disk)."""
    return location_uri(io.uri)


# what parsing and checking a document another program may have written can raise (JSON
# and UTF-8 decoding errors are ValueErrors)
PARSE_ERRORS = (KeyError, TypeError, ValueError, AttributeError)


def not_ours(location: str, path: str, folder: str, exc: BaseException | str) -> ForeignExportMetadataError:
    """The error for an existing export file that does not hold what mvtable writes there."""
    why = f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) else str(exc)
    return ForeignExportMetadataError(
        f"{location}/{path} was not written by mvtable (or is damaged): {why}; move {folder}/ away to export afresh"
    )


def table_uuid(table_id: str) -> str:
    """The id an export gives the table (Iceberg ``table-uuid``, Delta ``metaData.id``).

    Derived from the mvtable table id, so an export tells which table it belongs to."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"mvtable:{table_id}"))


class FileSizes:
    """Actual sizes of the table's files, one listing per folder per export.

    Both formats need the exact byte size (readers seek to the Parquet footer from it), and the
    log's ``size_bytes`` of older tables is an estimate."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._folders: dict[str, dict[str, int]] = {}

    def get(self, path: str) -> int | None:
        folder, _, name = path.rpartition("/")
        if folder not in self._folders:
            self._folders[folder] = {info.name: info.size for info in self.io.list(folder)}
        return self._folders[folder].get(name)


def live_files(snapshot: Snapshot, location: str, sizes: FileSizes) -> list[LiveFile]:
    """The visible segments of ``snapshot``, in the order they were added, with their actual sizes.

    Two visible segments naming one file cannot be expressed in either format, so that is refused;
    so is a version whose files are gone.

    Raises:
        ExportError: A file is visible twice in the snapshot.
        FilesMissingError: A file of the version is gone."""
    out = []
    seen: set[str] = set()
    for seg in snapshot.visible_segments():
        f = seg.file
        if f.path in seen:
            raise ExportError(f"version {snapshot.version} shows file {f.path} twice; neither Iceberg nor Delta can say that")
        seen.add(f.path)
        size = sizes.get(f.path)
        if size is None:
            raise FilesMissingError(f"version {snapshot.version} names {f.path}, which is gone (vacuumed)")
        dv = snapshot.dvs.get(seg.id)
        if dv is not None and dv.path is not None and sizes.get(dv.path) is None:
            raise FilesMissingError(f"version {snapshot.version} names {dv.path}, which is gone (collected)")
        out.append(
            LiveFile(
                seg.id,
                f.path,
                f"{location}/{f.path}",
                size,
                f.num_rows,
                seg.added_version,
                dv if dv is not None and dv.cardinality > 0 else None,
                f.spec_id or 0,
                tuple(f.partition or ()),
                f.footer_crc32,
            )
        )
    return out


def newer_versions(
    snapshots: Iterable[Snapshot],
    *,
    after: int,
    location: str,
    sizes: FileSizes,
    skipped: list[int],
    owner: str | None = None,
    folder: str = "",
) -> Iterator[tuple[Snapshot, list[LiveFile]]]:
    """(snapshot, live files) of each snapshot newer than ``after``, the last version an export already holds.

    Exports only append, so the newest version stays current; versions whose files are gone are
    appended to ``skipped`` instead.

    ``owner`` is the ``table_uuid`` the existing export in ``folder`` was written for: every
    snapshot is checked against it before its version is compared with ``after``, because a
    table deleted and created again at the same location starts its versions afresh, and
    resuming from the old export's version would mix two tables (or export nothing).

    Raises:
        ExportOfAnotherTableError: The location holds the export of another table."""
    for snap in snapshots:
        if owner is not None and table_uuid(snap.table_id) != owner:
            raise ExportOfAnotherTableError(
                f"{location}/{folder}/ holds the export of another table (export table uuid {owner}), not of table "
                f"{snap.table_id} now at {location} (uuid {table_uuid(snap.table_id)}): was the table deleted and "
                f"created again? Move {folder}/ away to export afresh"
            )
        if snap.version <= after:
            continue
        try:
            files = live_files(snap, location, sizes)
        except FilesMissingError:  # vacuumed: the version is skipped
            skipped.append(snap.version)
            continue
        yield snap, files


def retained_snapshots(commit_log: CommitLog, *, since: int = 0) -> Iterator[Snapshot]:
    """Every version from ``since`` to the newest, each rebuilt once by replaying one commit onto the previous snapshot.

    Without ``since`` the first is the oldest the log can still rebuild."""
    listing = commit_log.listing()
    latest = listing.latest
    start = max(since, oldest_rebuildable(listing.commits, listing.checkpoints, latest))
    snap = commit_log.snapshot(start, listing=listing)
    yield snap
    for v in range(start + 1, latest + 1):
        snap = replay([commit_log.read_commit(v)], base=snap, in_place=True)
        yield snap


def oldest_rebuildable(commits: list[int], checkpoints: list[int], latest: int) -> int:
    """The oldest version from which every version up to ``latest`` can be rebuilt.

    A version is rebuildable from its own checkpoint, or from its commit on top of the previous
    rebuildable version (version 0 needs only its commit)."""
    have_commit, have_checkpoint = set(commits), set(checkpoints)
    oldest = 0
    ok = False
    for v in range(latest + 1):
        ok = v in have_checkpoint or (v in have_commit and (v == 0 or ok))
        if not ok:
            oldest = v + 1
    return min(oldest, latest)


class MetadataWriter:
    """Writes the export's files through the table's ``FileIO``, counting bytes.

    On failure ``rollback`` removes what this export wrote, and an unwritable location becomes
    ``ExportPathNotWritableError``."""

    def __init__(self, io: FileIO, location: str) -> None:
        self.io = io
        self.location = location
        self.written: list[str] = []
        self.bytes = 0

    def write(self, path: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Write ``data`` at ``path``, counting its bytes; ``exclusive``: False if a file is there already.

        Raises:
            ExportPathNotWritableError: The location cannot be written."""
        try:
            if exclusive:
                if not self.io.put_if_absent(path, data):
                    self._check_a_file_is_in_the_way(path)
                    return False
            else:
                self.io.write(path, data)
        except PermissionError as exc:
            raise ExportPathNotWritableError(
                f"cannot write {self.location}/{path}: {exc}. Export needs write access to the table root"
            ) from exc
        except OSError as exc:
            if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError | FileExistsError):
                raise ExportPathNotWritableError(f"cannot write {self.location}/{path}: {exc}") from exc
            raise
        self.written.append(path)
        self.bytes += len(data)
        return True

    def _check_a_file_is_in_the_way(self, path: str) -> None:
        """Whether a lost ``put_if_absent`` is worth retrying.

        A regular file there is another export's (a race worth retrying); anything else (a
        directory) is not, and retrying cannot help."""
        folder, _, name = path.rpartition("/")
        if name not in self.io.list_names(folder):
            raise not_ours(self.location, path, folder or path, "it is not a regular file (a directory?)")

    def names(self, folder: str) -> list[str]:
        """The file names in ``folder`` (none if it does not exist yet).

        Raises:
            ExportPathNotWritableError: ``folder`` cannot be listed (not a directory, no permission)."""
        try:
            return self.io.list_names(folder)
        except (NotADirectoryError, PermissionError) as exc:
            raise ExportPathNotWritableError(f"cannot use {self.location}/{folder}: {exc}") from exc

    def rollback(self) -> None:
        if self.written:
            try:
                self.io.delete(self.written)
            except OSError:
                pass  # best effort: unreferenced metadata files are harmless
