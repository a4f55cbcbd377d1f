"""DV files: many deletion vectors packed into one ``_mvtable/dv/<uuid>.dv`` object.

One delete commit touches many segments; one file per commit (rather than per segment)
keeps object-store PUTs and vacuum listings small. Each DV is addressed by byte range,
so a reader fetches only its segment's blob. Small DVs skip the file entirely and ride
inline in the log entry, saving a round trip on read.

A DV file is also a valid Iceberg Puffin file (``PFA1`` magic, the blobs, a JSON footer
listing them as ``deletion-vector-v1``), so Iceberg tooling can inspect it. mvtable itself
never reads the footer: the log's descriptors are the source of truth.

Storage is duck-typed (``ByteStore``); ``mvtable.storage.FileIO`` satisfies it, but this
package must not import lineage, so the protocol is restated here.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import threading
import uuid
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np
from pyroaring import BitMap64

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptDeletionVectorError, DeletionVectorNotFoundError
from mvtable.paths import path_problem
from mvtable.storage import FileIO

from .cache import DVCache, Loaded, ref_key
from .dv import MIN_BLOB_SIZE, as_bitmap, decode_dv, encode_dv, positions_array

__all__ = [
    "DV_DIR",
    "DV_FILE_SUFFIX",
    "PUFFIN_MAGIC",
    "write_dvs",
    "load_dv",
    "load_dv_positions",
]

DV_DIR = "_mvtable/dv"
DV_FILE_SUFFIX = ".dv"
PUFFIN_MAGIC = b"PFA1"
DEFAULT_INLINE_MAX_BYTES = 512

# Refuse to fetch more than a framed blob can hold (4-byte length + 2 GiB payload + crc):
# a hostile descriptor must not make an executor read an arbitrary amount.
_MAX_BLOB_SIZE = 4 + (2**31 - 1) + 4


def write_dvs(
    store: FileIO,
    bitmaps: Mapping[str, BitMap64],
    *,
    inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
    data_files: Mapping[str, str] | None = None,
    file_id: Callable[[], str] | None = None,
) -> dict[str, DeletionVectorRef]:
    """Encode each segment's DV; inline the small ones, pack the rest into one new file.

    The file gets a fresh uuid name and is written exactly once, before the commit that
    references it, so a failed commit leaves only an orphan for vacuum — never a
    half-updated file that a committed descriptor points into.

    ``data_files`` maps a segment id to its data file's absolute location, which the Puffin
    footer names as the blob's ``referenced-data-file`` (as the Iceberg spec asks), so an
    Iceberg export can point at this file as it is; without it the footer names the
    segment id, and an export has to copy the blob.

    ``file_id()`` names the file (``<file_id()>.dv``; a fresh uuid by default), called
    only when a file is written: a writer under a write intent names it after the intent
    (taking the intent then), so that vacuum leaves it alone until the commit lands.
    """
    out: dict[str, DeletionVectorRef] = {}
    packed: list[tuple[str, bytes, int]] = []
    for segment_id, positions in bitmaps.items():
        bm = as_bitmap(positions)
        blob = encode_dv(bm)
        cardinality = len(bm)
        if len(blob) <= inline_max_bytes:
            text = base64.b64encode(blob).decode("ascii")
            out[segment_id] = DeletionVectorRef(cardinality=cardinality, inline=text, size=len(blob))
        else:
            packed.append((segment_id, blob, cardinality))
    if not packed:
        return out

    path = f"{DV_DIR}/{file_id() if file_id is not None else uuid.uuid4()}{DV_FILE_SUFFIX}"
    parts = [PUFFIN_MAGIC]
    offset = len(PUFFIN_MAGIC)
    footer_blobs = []
    for segment_id, blob, cardinality in packed:
        out[segment_id] = DeletionVectorRef(cardinality=cardinality, path=path, offset=offset, size=len(blob))
        referenced = (data_files or {}).get(segment_id, segment_id)
        footer_blobs.append(_puffin_blob_meta(referenced, offset, len(blob), cardinality))
        parts.append(blob)
        offset += len(blob)
    parts.append(_puffin_footer(footer_blobs))
    store.write(path, b"".join(parts))
    return out


def load_dv(store: FileIO, ref: Any, *, cache: DVCache | None = None) -> BitMap64:
    """The DV a descriptor points to, validated; from ``cache`` when given.

    ``ref`` is any object with ``cardinality``, ``inline``, ``path``, ``offset`` and ``size``
    (a ``DeletionVectorRef``, or anything shaped like one). The returned bitmap may be
    shared through the cache: treat it as read-only.
    """
    key = None if cache is None else _key(store, ref)
    if cache is None or key is None:
        return _load(store, ref)[0]
    return cache.get_or_load(key, lambda: _load(store, ref))


def load_dv_positions(store: FileIO, ref: Any, *, cache: DVCache | None = None) -> np.ndarray:
    """The DV as a sorted ``uint64`` array (what ``masks`` slices fastest); cached if given."""
    key = None if cache is None else _key(store, ref)
    if cache is None or key is None:
        return positions_array(_load(store, ref)[0])
    return cache.positions(key, lambda: _load(store, ref))


_store_tokens: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_tokens_lock = threading.Lock()


def _key(store: FileIO, ref: Any) -> Hashable | None:
    """Cache key, or None when a file DV's table cannot be told apart safely.

    Relative DV paths are only unique within a table, so the key needs the table's
    identity: its ``uri`` when the store has one, else a token tied to the store object's
    lifetime (an ``id()`` could be reused by another store after this one is gone).
    """
    if getattr(ref, "inline", None) is not None:
        return ref_key(ref)
    uri = getattr(store, "uri", None)
    if uri:
        return ref_key(ref, namespace=f"uri:{uri}")
    try:
        with _tokens_lock:
            token = _store_tokens.get(store)
            if token is None:
                token = _store_tokens[store] = f"store:{uuid.uuid4().hex}"
    except TypeError:  # not weak-referenceable: caching would risk cross-table hits
        return None
    return ref_key(ref, namespace=token)


def _load(store: FileIO, ref: Any) -> Loaded:
    """(bitmap, bytes fetched from storage, accounted size)."""
    inline = getattr(ref, "inline", None)
    path = getattr(ref, "path", None)
    offset = int(getattr(ref, "offset", 0) or 0)
    size = int(getattr(ref, "size", 0) or 0)
    expected = getattr(ref, "cardinality", None)

    if (inline is None) == (path is None):
        raise CorruptDeletionVectorError("deletion vector descriptor", "needs exactly one of 'inline' and 'path'")
    if inline is not None:
        source = "inline deletion vector"
        try:
            blob = base64.b64decode(inline, validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise CorruptDeletionVectorError(source, f"invalid base64: {exc}") from None
        if size and size != len(blob):
            raise CorruptDeletionVectorError(source, f"descriptor says {size} bytes but the blob has {len(blob)}")
        fetched = 0
    else:
        assert path is not None  # exactly one of inline and path, checked above
        source = f"{path} at offset {offset} (size {size})"
        problem = path_problem(path)
        if problem:
            raise CorruptDeletionVectorError(source, f"unsafe path: {problem}")
        if offset < 0 or not MIN_BLOB_SIZE <= size <= _MAX_BLOB_SIZE:
            raise CorruptDeletionVectorError(source, "offset/size outside what a deletion vector can occupy")
        try:
            blob = store.read_range(path, offset, size)
        except FileNotFoundError as exc:
            raise DeletionVectorNotFoundError(path, str(exc)) from exc
        fetched = len(blob)
        if len(blob) != size:
            raise CorruptDeletionVectorError(source, f"file ends early: got {len(blob)} of {size} bytes")

    bm = decode_dv(blob, source=source)
    if expected is not None and len(bm) != int(expected):
        raise CorruptDeletionVectorError(source, f"holds {len(bm)} positions but the descriptor says {expected}")
    return bm, fetched, len(blob)


def _puffin_blob_meta(referenced: str, offset: int, length: int, cardinality: int) -> dict[str, Any]:
    # deletion-vector-v1 blobs carry snapshot-id/sequence-number -1 (assigned at commit)
    # and the referenced data file's location (the segment id in files written before
    # mvtable named locations there; mvtable itself reads only the log's descriptors).
    return {
        "type": "deletion-vector-v1",
        "fields": [],
        "snapshot-id": -1,
        "sequence-number": -1,
        "offset": offset,
        "length": length,
        "properties": {"referenced-data-file": referenced, "cardinality": str(cardinality)},
    }


def _puffin_footer(blobs: list[dict[str, Any]]) -> bytes:
    # Footer = magic | JSON payload | payload size (4-byte LE) | flags (4 bytes) | magic
    payload = json.dumps({"blobs": blobs, "properties": {"created-by": "mvtable"}}, separators=(",", ":")).encode()
    return PUFFIN_MAGIC + payload + struct.pack("<i", len(payload)) + bytes(4) + PUFFIN_MAGIC
