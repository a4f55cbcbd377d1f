"""A Delta Lake log (``_delta_log/``) over mvtable's own Parquet files.

The table root is the Delta table root and ``add`` paths are relative to it, so the
log sits beside ``_mvtable/`` and names ``data/<segment>.parquet`` in place. Each export
appends Delta commits: the first one carries ``protocol`` (reader 3 / writer 7 with the
``deletionVectors`` feature) and ``metaData``, and so does the first after a column was
renamed, dropped or retyped (column mapping mode ``id`` from then on: physical names stay,
logical names change, readers resolve columns by field id); every commit is the difference between the
last exported state (replayed from this log) and the mvtable version it exports, as
``add``/``remove`` actions, and its ``commitInfo`` records ``mvtableVersion``.

Deletion vectors travel inline (``storageType 'i'``). Delta's DV file format needs a
version byte ``0x01`` at offset 0 (delta-kernel checks it), while mvtable's DV files are
Puffin files (``PFA1`` at offset 0, which Iceberg needs), so no Delta reader that checks
would accept a reference into them; the blob body itself (magic + portable roaring
bitmap) is the same bytes in both formats, Z85-encoded here as Delta's inline form.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from mvtable.errors import ExportConflictError
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO, LocalFileIO

from .common import (
    PARSE_ERRORS,
    ExportResult,
    FileSizes,
    LiveFile,
    MetadataWriter,
    newer_versions,
    not_ours,
    table_location,
    table_uuid,
)
from .partitioning import delta_partitioning
from .types import delta_column_mapping, delta_schema, names_by_id, physical_names

__all__ = ["export_delta", "DELTA_LOG_DIR", "z85"]

DELTA_LOG_DIR = "_delta_log"
_Z85 = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#", dtype=np.uint8)


def z85(data: bytes) -> str:
    """ZeroMQ Z85 text of ``data`` zero-padded to a multiple of 4 bytes.

    This is Delta's inline DV encoding; ``sizeInBytes`` tells readers where the real bytes end."""
    padded = data + bytes(-len(data) % 4)
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = np.empty((len(words), 5), dtype=np.uint8)
    for i in range(4, -1, -1):
        digits[:, i] = _Z85[(words % 85).astype(np.intp)]
        words //= 85
    return digits.tobytes().decode("ascii")


def export_delta(io: FileIO, snapshots: Iterable[Snapshot]) -> ExportResult:
    """Append one Delta commit per given mvtable snapshot (oldest first) that is newer than the last one exported.

    Metadata only; commits land one by one, each complete.

    Raises:
        ExportConflictError: Another export wrote the same commit at the same time; run it again."""
    location = table_location(io)
    writer = MetadataWriter(io, location)
    state, next_version, last_exported, owner = _replay(writer)
    metadata = _last_metadata(writer)
    sizes = FileSizes(io)
    new_versions: list[int] = []
    skipped: list[int] = []
    copied = 0
    for snap, files in newer_versions(
        snapshots, after=last_exported, location=location, sizes=sizes, skipped=skipped, owner=owner, folder=DELTA_LOG_DIR
    ):
        actions, wanted, n, metadata = _commit_actions(io, snap, files, state, first=next_version == 0, previous=metadata)
        path = f"{DELTA_LOG_DIR}/{next_version:020d}.json"
        body = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()
        if not writer.write(path, body, exclusive=True):
            raise ExportConflictError(f"another export wrote {location}/{path} at the same time; run the export again")
        _date(io, path, snap.timestamp_ms)
        state, last_exported = wanted, snap.version
        next_version += 1
        copied += n
        new_versions.append(snap.version)
    return ExportResult("delta", location, tuple(new_versions), len(writer.written), writer.bytes, copied, skipped=tuple(skipped))


def _date(io: FileIO, path: str, timestamp_ms: int) -> None:
    """Give a commit file the mvtable commit's time as its modification time.

    Delta-rs (and so polars) time travel by timestamp uses the file's mtime, not
    ``commitInfo.timestamp``. Only local disk can set it; on object storage the export time stays
    (see the README)."""
    if isinstance(io, LocalFileIO):
        io.set_mtime(path, timestamp_ms / 1000)


def _replay(writer: MetadataWriter) -> tuple[dict[str, dict[str, Any]], int, int, str | None]:
    """The state of the Delta log this exporter wrote, read from its JSON commits.

    Returned as (live ``add`` actions by path, next Delta version, last exported mvtable version,
    the ``metaData.id`` naming the table the log was written for). Anything else in ``_delta_log/``
    (another writer's commits, a gap, a damaged file) is refused before anything is written."""
    names = _commit_names(writer)
    adds: dict[str, dict[str, Any]] = {}
    last = -1
    owner: str | None = None
    for i, name in enumerate(names):
        path = f"{DELTA_LOG_DIR}/{name}"
        if int(name[:-5]) != i:
            raise not_ours(writer.location, path, DELTA_LOG_DIR, f"version {i} is missing before it")
        try:
            version, added, removed, meta_id = _read_commit(writer.io.read(path))
        except PARSE_ERRORS as exc:
            raise not_ours(writer.location, path, DELTA_LOG_DIR, exc) from None
        for p in removed:
            adds.pop(p, None)
        adds.update(added)
        last, owner = version, meta_id or owner
    if names and owner is None:
        raise not_ours(writer.location, f"{DELTA_LOG_DIR}/{names[0]}", DELTA_LOG_DIR, "no metaData action")
    return adds, len(names), last, owner


def newest_exported_version(writer: MetadataWriter) -> int | None:
    """The mvtable version the newest Delta commit shows (``None``: never exported).

    Reads that one commit only: for a status, not for appending to the log."""
    names = _commit_names(writer)
    if not names:
        return None
    path = f"{DELTA_LOG_DIR}/{names[-1]}"
    try:
        return _read_commit(writer.io.read(path))[0]
    except PARSE_ERRORS as exc:
        raise not_ours(writer.location, path, DELTA_LOG_DIR, exc) from None


def _commit_names(writer: MetadataWriter) -> list[str]:
    return sorted(n for n in writer.names(DELTA_LOG_DIR) if n.endswith(".json") and n[:-5].isdigit())


def _read_commit(data: bytes) -> tuple[int, dict[str, dict[str, Any]], list[str], str | None]:
    """(mvtable version, ``add`` actions by path, removed paths, ``metaData.id``) of one commit this exporter wrote.

    A KeyError, TypeError or ValueError for anything else."""
    version: int | None = None
    added: dict[str, dict[str, Any]] = {}
    removed: list[str] = []
    meta_id: str | None = None
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if not isinstance(action, dict):
            raise TypeError(f"an action that is not a JSON object: {line[:80]}")
        if "add" in action:
            add = action["add"]
            path = unquote(add["path"])
            if isinstance(add["size"], bool) or not isinstance(add["size"], int):
                raise TypeError("'size' of an add is not an integer")
            if not isinstance(add.get("tags", {}), dict):
                raise TypeError("'tags' of an add is not an object")
            added[path] = add
        elif "remove" in action:
            path = unquote(action["remove"]["path"])
            added.pop(path, None)
            removed.append(path)
        elif "commitInfo" in action:
            version = int(action["commitInfo"]["mvtableVersion"])
        elif "metaData" in action:
            meta_id = action["metaData"]["id"]
            if not isinstance(meta_id, str):
                raise TypeError("'metaData.id' is not a string")
    if version is None:
        raise ValueError("no commitInfo naming the mvtable version it exports")
    return version, added, removed, meta_id


def _last_metadata(writer: MetadataWriter) -> dict[str, Any] | None:
    """The newest ``metaData`` action of the log this exporter wrote (None: no log yet)."""
    for name in reversed(_commit_names(writer)):
        for line in writer.io.read(f"{DELTA_LOG_DIR}/{name}").decode().splitlines():
            if line.strip():
                action = json.loads(line)
                if isinstance(action, dict) and "metaData" in action:
                    return dict(action["metaData"])
    return None


def _commit_actions(
    io: FileIO,
    snap: Snapshot,
    files: list[LiveFile],
    state: dict[str, dict[str, Any]],
    *,
    first: bool,
    previous: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], int, dict[str, Any] | None]:
    plain, features = delta_schema(snap.table_schema)
    partitioning = delta_partitioning(snap.partition_specs, snap.default_spec_id, (f.spec_id for f in files), snap.table_schema)
    before = json.loads(previous["schemaString"]) if previous is not None else None
    # Column mapping (mode ``id``) from the first version whose schema renamed, dropped or retyped a
    # column on: Delta readers then resolve columns by field id. Before that names are right, and
    # readers without column mapping (polars) can read the export.
    was_mapped = before is not None and bool(physical_names(before))
    mapped = was_mapped or snap.schema_break_version >= 0
    if mapped:
        # physical names: those the log gave already; switching on, the names the files were written with
        known = physical_names(before) if was_mapped and before is not None else names_by_id(before)
        schema, max_id = delta_column_mapping(plain, known)
        features = [*features, "columnMapping"]
        configuration = {
            "delta.enableDeletionVectors": "true",
            "delta.columnMapping.mode": "id",
            "delta.columnMapping.maxColumnId": str(max(max_id, snap.last_field_id)),
        }
    else:
        schema, configuration = plain, {"delta.enableDeletionVectors": "true"}
    actions: list[dict[str, Any]] = [
        {
            "commitInfo": {
                "timestamp": snap.timestamp_ms,
                "operation": "mvtable export",
                "operationParameters": {},
                "mvtableVersion": snap.version,
                "engineInfo": "mvtable",
            }
        }
    ]
    meta: dict[str, Any] = {
        "id": table_uuid(snap.table_id),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": list(partitioning.columns),
        "configuration": configuration,
        "createdTime": previous["createdTime"] if previous is not None else snap.timestamp_ms,
    }
    if first or (mapped and not was_mapped):
        actions.append(
            {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features, "writerFeatures": features}}
        )
    if (
        first
        or previous is None
        or previous.get("schemaString") != meta["schemaString"]
        or previous.get("partitionColumns", []) != meta["partitionColumns"]
    ):
        # a schema or partitioning change is a new metaData action, as Delta writers commit one
        actions.append({"metaData": meta})
    elif previous is not None:
        meta = previous
    wanted: dict[str, dict[str, Any]] = {}
    copied = 0
    physical = _physical_top_level(schema) if mapped else {}
    for f in files:
        values = partitioning.values(f.spec_id, f.partition, where=f"segment {f.segment_id}")
        values = {physical.get(k, k): v for k, v in values.items()}
        old = state.get(f.path)
        if old is not None and _same_dv(old, f) and old.get("partitionValues", {}) == values:
            wanted[f.path] = old
            continue
        add, n = _add(io, f, snap.timestamp_ms, values)
        copied += n
        wanted[f.path] = add
        if old is not None and not _same_dv(old, f):
            # a new DV is a new (path, DV) pair: the old one is removed. With the same DV (new
            # partitionValues) the add alone replaces it; removing the same pair in the same commit
            # would leave readers unsure which comes last (delta-rs drops the file)
            actions.append({"remove": _remove(old, snap.timestamp_ms)})
        actions.append({"add": add})
    for path, old in state.items():
        if path not in wanted:
            actions.append({"remove": _remove(old, snap.timestamp_ms)})
    return actions, wanted, copied, meta


def _same_dv(add: dict[str, Any], f: LiveFile) -> bool:
    return add.get("tags", {}).get("mvtable.dv") == (_dv_key(f) or "")


def _dv_key(f: LiveFile) -> str | None:
    dv = f.dv
    if dv is None:
        return None
    return f"inline:{dv.inline}" if dv.inline is not None else f"{dv.path}@{dv.offset}+{dv.size}"


def _physical_top_level(schema: dict[str, Any]) -> dict[str, str]:
    """Logical → physical name of each top-level column of a schema with column mapping (``partitionValues`` keys)."""
    out = {}
    for field in schema["fields"]:
        physical = (field.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if physical is not None:
            out[field["name"]] = str(physical)
    return out


def _add(io: FileIO, f: LiveFile, timestamp_ms: int, partition_values: dict[str, str | None]) -> tuple[dict[str, Any], int]:
    add: dict[str, Any] = {
        "path": quote(f.path, safe="/"),
        "partitionValues": partition_values,
        "size": f.size_bytes,
        "modificationTime": timestamp_ms,
        "dataChange": True,
        "stats": json.dumps({"numRecords": f.num_rows}),
        "tags": {"mvtable.segment": f.segment_id, "mvtable.dv": _dv_key(f) or ""},
    }
    if f.dv is None:
        return add, 0
    blob = base64.b64decode(f.dv.inline) if f.dv.inline is not None else io.read_range(f.dv.path or "", f.dv.offset, f.dv.size)
    body = blob[4:-4]  # length | magic+bitmap | crc: Delta's inline form is magic+bitmap
    add["deletionVector"] = {
        "storageType": "i",
        "pathOrInlineDv": z85(body),
        "sizeInBytes": len(body),
        "cardinality": f.dv.cardinality,
    }
    return add, len(body)


def _remove(add: dict[str, Any], timestamp_ms: int) -> dict[str, Any]:
    out = {
        "path": add["path"],
        "deletionTimestamp": timestamp_ms,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues", {}),
        "size": add["size"],
    }
    if "deletionVector" in add:
        out["deletionVector"] = add["deletionVector"]
    return out
