"""Deletion vectors as Iceberg delete files: Puffin ``deletion-vector-v1`` blobs.

mvtable's DV files are Puffin files whose footer names, for each blob, the data file it
applies to. pyiceberg (0.12) reads a whole Puffin file and applies each blob to the file its
footer names (it ignores the manifest's ``referenced_data_file`` and offsets), so a blob is
referenced in place only when its footer names exactly the location the export writes.
Inline DVs (small ones that live in mvtable's log, which Iceberg cannot express) and blobs
of DV files written before footers named locations are written once more, into one Puffin
file of the export under ``metadata/`` — counted in ``ExportResult.copied_dv_bytes``.
Because pyiceberg applies every blob of a Puffin file it reads, a Puffin file is used for a
version only while all of its blobs are still the DVs of their data files (see ``DVPlacer``).
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from mvtable.dvref import DeletionVectorRef
from mvtable.storage import FileIO

from .common import METADATA_DIR, FileSizes, LiveFile, MetadataWriter

__all__ = ["DVPlacer"]

_PUFFIN_MAGIC = b"PFA1"
_PATH_FIELD_ID = 2147483546  # the position-delete ``file_path`` column: bounds say which data file a DV targets
_ADDED = 1  # manifest entry status: a delete file of the snapshot being written


class DVPlacer:
    """Where each deletion vector is, as an Iceberg delete-file entry.

    It stays in place in mvtable's DV file when its Puffin footer names the data file's location,
    otherwise a copy in a Puffin file of this export, reused by later versions of the same export
    run.

    pyiceberg reads every Puffin file a snapshot references and applies *each* blob in it
    to the data file the blob names, whichever manifest entry led it there; a data file then
    loses the union of all blobs naming it. So a snapshot reads right exactly when every
    blob, in every Puffin file it references, that names a data file live in the snapshot
    is that file's DV in this version (blobs naming files that are not live are never
    applied). A Puffin file — mvtable's own or a copy — is therefore used for a version only
    when all its blobs pass that check (``_consistent``); the blobs no usable file holds go
    into one new Puffin file for the version, which holds only current DVs and so passes
    by construction. That keeps files few (a Puffin file is reused for as long as it stays
    true, and a version adds at most one) and stays correct when a restore or an update
    gives a data file a different DV than a reused file still carries for it.
    """

    def __init__(self, writer: MetadataWriter, sizes: FileSizes, location: str) -> None:
        self.writer = writer
        self.sizes = sizes
        self.location = location
        self.footers: dict[str, tuple[int, dict[tuple[int, int], str]]] = {}
        self.blobs_in_place: dict[str, list[tuple[str, str]]] = {}  # DV file -> [(data file, DV identity)]
        self.copies: dict[tuple[str, str], tuple[str, int, int, int]] = {}  # -> (puffin, file size, offset, size)
        self.blobs: dict[str, list[tuple[str, str]]] = {}  # copied puffin -> [(data file, DV identity)] of its blobs
        self.copied_bytes = 0

    def entries(self, files: list[LiveFile], tag: str) -> list[dict[str, Any]]:
        current = {f.location: _identity(f.dv) if f.dv is not None else None for f in files}
        checked: dict[str, bool] = {}

        def consistent(puffin: str, blobs: list[tuple[str, str]]) -> bool:
            if puffin not in checked:
                checked[puffin] = all(ref not in current or current[ref] == ident for ref, ident in blobs)
            return checked[puffin]

        out: list[dict[str, Any]] = []
        pending: list[tuple[LiveFile, tuple[str, str], bytes]] = []
        for f in files:
            dv = f.dv
            if dv is None:
                continue
            if dv.path is not None:
                if dv.path not in self.footers:
                    self.footers[dv.path] = _puffin_footer(self.writer.io, dv.path, self.sizes.get(dv.path))
                    self.blobs_in_place[dv.path] = [
                        (ref, f"{dv.path}@{offset}+{length}") for (offset, length), ref in self.footers[dv.path][1].items()
                    ]
                size, footer = self.footers[dv.path]
                if footer.get((dv.offset, dv.size)) == f.location and consistent(dv.path, self.blobs_in_place[dv.path]):
                    out.append(_dv_entry(f, f"{self.location}/{dv.path}", size, dv.offset, dv.size, dv.cardinality))
                    continue
            key = (_identity(dv), f.location)
            copy = self.copies.get(key)
            if copy is not None and consistent(copy[0], self.blobs[copy[0]]):
                puffin, file_size, offset, size = copy
                out.append(_dv_entry(f, puffin, file_size, offset, size, dv.cardinality))
                continue
            blob = (
                base64.b64decode(dv.inline)
                if dv.inline is not None
                else self.writer.io.read_range(dv.path or "", dv.offset, dv.size)
            )
            pending.append((f, key, blob))
        if pending:
            path = f"{METADATA_DIR}/{tag}-dv.puffin"
            puffin = f"{self.location}/{path}"
            data, offsets = _puffin([(f.location, blob, f.dv.cardinality if f.dv else 0) for f, _, blob in pending])
            self.writer.write(path, data)
            self.blobs[puffin] = [(key[1], key[0]) for _, key, _ in pending]
            for (f, key, blob), offset in zip(pending, offsets):
                self.copies[key] = (puffin, len(data), offset, len(blob))
                out.append(_dv_entry(f, puffin, len(data), offset, len(blob), f.dv.cardinality if f.dv else 0))
                self.copied_bytes += len(blob)
        return out


def _identity(dv: DeletionVectorRef) -> str:
    """Which DV this is: its inline bytes, or where its blob is in a DV file."""
    return dv.inline or f"{dv.path}@{dv.offset}+{dv.size}"


def _dv_entry(f: LiveFile, dv_location: str, file_size: int, offset: int, size: int, cardinality: int) -> dict[str, Any]:
    bound = [{"key": _PATH_FIELD_ID, "value": f.location.encode()}]
    return {
        "status": _ADDED,
        "snapshot_id": None,
        "sequence_number": None,
        "file_sequence_number": None,
        "data_file": {
            "content": 1,
            "file_path": dv_location,
            "file_format": "PUFFIN",
            "partition": {},
            "record_count": cardinality,
            "file_size_in_bytes": file_size,
            "lower_bounds": bound,
            "upper_bounds": bound,
            "referenced_data_file": f.location,
            "content_offset": offset,
            "content_size_in_bytes": size,
        },
    }


def _puffin_footer(io: FileIO, path: str, size: int | None) -> tuple[int, dict[tuple[int, int], str]]:
    """(file size, {(offset, length): referenced-data-file}) of a DV file's Puffin footer.

    An empty map for a file without a readable footer (its blobs are then copied)."""
    if size is None or size < 16:
        return size or 0, {}
    tail = io.read_range(path, size - 12, 12)
    (payload,) = struct.unpack("<i", tail[:4])
    if tail[-4:] != _PUFFIN_MAGIC or not 0 < payload <= size - 16:
        return size, {}
    try:
        footer = json.loads(io.read_range(path, size - 12 - payload, payload))
        return size, {
            (int(b["offset"]), int(b["length"])): str(b.get("properties", {}).get("referenced-data-file"))
            for b in footer.get("blobs", [])
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return size, {}


def _puffin(blobs: list[tuple[str, bytes, int]]) -> tuple[bytes, list[int]]:
    parts, offsets, meta = [_PUFFIN_MAGIC], [], []
    offset = len(_PUFFIN_MAGIC)
    for ref, blob, cardinality in blobs:
        offsets.append(offset)
        meta.append(
            {
                "type": "deletion-vector-v1",
                "fields": [],
                "snapshot-id": -1,
                "sequence-number": -1,
                "offset": offset,
                "length": len(blob),
                "properties": {"referenced-data-file": ref, "cardinality": str(cardinality)},
            }
        )
        parts.append(blob)
        offset += len(blob)
    payload = json.dumps({"blobs": meta, "properties": {"created-by": "mvtable export"}}).encode()
    parts.append(_PUFFIN_MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + _PUFFIN_MAGIC)
    return b"".join(parts), offsets
