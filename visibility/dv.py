"""The deletion-vector blob: one segment's deleted row positions, framed for storage.

The framing is the Apache Iceberg v3 Puffin ``deletion-vector-v1`` blob
(https://iceberg.apache.org/puffin-spec/#deletion-vector-v1-blob-type), chosen so other
engines can read our DVs without a translation step::

    length  4 bytes, big-endian: byte length of magic + bitmap
    magic   4 bytes: D1 D3 39 64
    bitmap  a 64-bit Roaring bitmap in the *portable* serialization:
              8-byte little-endian bucket count, then per bucket (ascending key)
              a 4-byte little-endian key (high 32 bits of the position) followed by a
              standard portable 32-bit Roaring bitmap of the low 32 bits
    crc     4 bytes, big-endian: CRC-32 (zlib) of magic + bitmap

``pyroaring.BitMap64.serialize()`` emits exactly that portable 64-bit layout (CRoaring's
``roaring64_bitmap_portable_serialize``); tests/visibility/test_dv.py pins this by building
the bytes independently from 32-bit bitmaps.

Decoding is strict: the CRC catches accidental damage; for a hostile writer that frames
garbage correctly, a structural walk of the bitmap (``_portable64_size``) rejects leftover
bytes (which ``BitMap64.deserialize`` silently ignores) and unordered bucket keys, and
pyroaring's own post-deserialize validation rejects inconsistent containers (unsorted
arrays or runs, a bitset whose stated cardinality is wrong).
"""

from __future__ import annotations

import array
import struct
import zlib
from collections.abc import Iterable

import numpy as np
from pyroaring import AbstractBitMap, AbstractBitMap64, BitMap64

from mvtable.errors import CorruptDeletionVectorError

__all__ = [
    "DV_MAGIC",
    "MIN_BLOB_SIZE",
    "encode_dv",
    "decode_dv",
    "positions_array",
    "bitmap_from_array",
    "as_bitmap",
]

DV_MAGIC = b"\xd1\xd3\x39\x64"

# length + magic + empty bitmap (bucket count only) + crc
MIN_BLOB_SIZE = 4 + 4 + 8 + 4

# Iceberg (Java) reads the length as a signed 32-bit int.
_MAX_PAYLOAD = 2**31 - 1

_BE_U32 = struct.Struct(">I")
_LE_U32 = struct.Struct("<I")
_LE_U64 = struct.Struct("<Q")

# Portable 32-bit Roaring constants (RoaringFormatSpec).
_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096
_BITSET_BYTES = 8192


PositionsLike = AbstractBitMap64 | AbstractBitMap | np.ndarray | Iterable[int]


def encode_dv(positions: PositionsLike) -> bytes:
    """Frame a set of row positions as a ``deletion-vector-v1`` blob.

    The bitmap is run-optimized first (on a copy): deletes often come in ranges
    (``DELETE WHERE ts < …`` on sorted data) and runs make those blobs tiny, which
    keeps more of them inline in the log.
    """
    bm = as_bitmap(positions, copy=True)
    bm.run_optimize()
    payload = DV_MAGIC + bm.serialize()
    if len(payload) > _MAX_PAYLOAD:
        raise ValueError(f"deletion vector too large to frame ({len(payload)} bytes)")
    return b"".join((_BE_U32.pack(len(payload)), payload, _BE_U32.pack(zlib.crc32(payload))))


def decode_dv(data: bytes | bytearray | memoryview, *, source: str) -> BitMap64:
    """Parse a ``deletion-vector-v1`` blob; any inconsistency raises, naming ``source``.

    ``data`` must be exactly one blob: a shorter or longer buffer means the descriptor's
    offset/size or the file is wrong, and guessing where the blob "really" is could
    pick up a different segment's DV.
    """
    buf = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    n = len(buf)
    if n < MIN_BLOB_SIZE:
        raise CorruptDeletionVectorError(source, f"blob is {n} bytes, shorter than the minimum {MIN_BLOB_SIZE}")
    (length,) = _BE_U32.unpack_from(buf, 0)
    if length != n - 8:
        raise CorruptDeletionVectorError(source, f"length field says {length} bytes of magic+bitmap but the blob holds {n - 8}")
    if bytes(buf[4:8]) != DV_MAGIC:
        raise CorruptDeletionVectorError(source, f"bad magic {bytes(buf[4:8]).hex()} (expected {DV_MAGIC.hex()})")
    payload = buf[4 : 4 + length]
    (stored_crc,) = _BE_U32.unpack_from(buf, 4 + length)
    actual_crc = zlib.crc32(payload)
    if stored_crc != actual_crc:
        raise CorruptDeletionVectorError(source, f"CRC-32 mismatch (stored {stored_crc:08x}, computed {actual_crc:08x})")
    bitmap = payload[4:]
    try:
        used = _portable64_size(bitmap)
    except _Malformed as exc:
        raise CorruptDeletionVectorError(source, f"malformed roaring bitmap: {exc}") from None
    if used != len(bitmap):
        raise CorruptDeletionVectorError(source, f"{len(bitmap) - used} unexpected bytes after the roaring bitmap")
    try:
        return BitMap64.deserialize(bytes(bitmap))
    except (ValueError, IndexError, OverflowError, MemoryError) as exc:
        raise CorruptDeletionVectorError(source, f"roaring bitmap does not parse: {exc}") from None


def positions_array(bm: BitMap64) -> np.ndarray:
    """All positions as a sorted ``uint64`` array.

    ``to_array()`` copies the bitmap into an ``array('Q')`` in C; wrapping that buffer
    with ``np.frombuffer`` is zero-copy, far faster than ``np.array(list(bm))``.
    """
    return np.frombuffer(bm.to_array(), dtype=np.uint64)


def bitmap_from_array(positions: np.ndarray) -> BitMap64:
    """A ``BitMap64`` from an integer array (any order, duplicates allowed).

    Goes through ``array('Q')`` because pyroaring bulk-loads that type in C, while a
    numpy array would be iterated element by element (much slower); sorting first makes
    the bulk load faster again (appends instead of random inserts).
    """
    arr = np.asarray(positions)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    if arr.size == 0:
        return BitMap64()
    if arr.dtype.kind == "i":
        if int(arr.min()) < 0:
            raise ValueError("row positions must be non-negative")
    elif arr.dtype.kind != "u":
        raise TypeError(f"row positions must be integers, got dtype {arr.dtype}")
    arr = np.sort(arr.astype(np.uint64, copy=False))
    buf = array.array("Q")
    buf.frombytes(arr.tobytes())
    return BitMap64(buf)


def as_bitmap(positions: PositionsLike, *, copy: bool = False) -> BitMap64:
    """Coerce the accepted position containers to a ``BitMap64``.

    ``copy=False`` may return the caller's own bitmap; callers that mutate pass ``copy=True``.
    """
    if isinstance(positions, BitMap64):
        return positions.copy() if copy else positions
    if isinstance(positions, AbstractBitMap64):  # e.g. FrozenBitMap64
        return BitMap64(positions.to_array())
    if isinstance(positions, np.ndarray):
        return bitmap_from_array(positions)
    if isinstance(positions, AbstractBitMap):  # 32-bit pyroaring bitmap
        buf = array.array("Q")
        buf.frombytes(np.frombuffer(positions.to_array(), dtype=np.uint32).astype(np.uint64).tobytes())
        return BitMap64(buf)
    if isinstance(positions, array.array) and positions.typecode == "Q":
        return BitMap64(positions)
    values = list(positions)
    if any(v < 0 for v in values):
        raise ValueError("row positions must be non-negative")
    return BitMap64(values)


class _Malformed(Exception):
    pass


def _portable64_size(buf: bytes | memoryview) -> int:
    """Bytes used by the portable 64-bit Roaring bitmap at the start of ``buf``.

    Walks headers only (no allocation proportional to counts stored in the data, so a
    hostile count cannot make us allocate or loop beyond the buffer's size).
    """
    end = len(buf)
    if end < 8:
        raise _Malformed("truncated bucket count")
    (buckets,) = _LE_U64.unpack_from(buf, 0)
    # every bucket needs at least a 4-byte key and an 8-byte 32-bit header
    if buckets > (end - 8) // 12:
        raise _Malformed(f"bucket count {buckets} cannot fit in {end} bytes")
    pos = 8
    prev_key = -1
    for _ in range(buckets):
        if pos + 4 > end:
            raise _Malformed("truncated bucket key")
        (key,) = _LE_U32.unpack_from(buf, pos)
        if key <= prev_key:
            raise _Malformed(f"bucket keys not strictly ascending ({prev_key} then {key})")
        prev_key = key
        pos = _portable32_end(buf, pos + 4, end)
    return pos


def _portable32_end(buf: bytes | memoryview, pos: int, end: int) -> int:
    """End offset of the portable 32-bit Roaring bitmap starting at ``pos``."""
    if pos + 4 > end:
        raise _Malformed("truncated 32-bit bitmap cookie")
    (cookie,) = _LE_U32.unpack_from(buf, pos)
    run_flags: bytes | None
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        pos += 4
        flag_bytes = (count + 7) // 8
        if pos + flag_bytes > end:
            raise _Malformed("truncated run-container flags")
        run_flags = bytes(buf[pos : pos + flag_bytes])
        pos += flag_bytes
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        if pos + 8 > end:
            raise _Malformed("truncated container count")
        (count,) = _LE_U32.unpack_from(buf, pos + 4)
        pos += 8
        run_flags = None
    else:
        raise _Malformed(f"unknown 32-bit roaring cookie {cookie:#x}")
    if count > 1 << 16:
        raise _Malformed(f"{count} containers in one 32-bit bitmap (at most 65536)")
    if pos + 4 * count > end:
        raise _Malformed("truncated container headers")
    header = struct.unpack_from(f"<{2 * count}H", buf, pos)
    pos += 4 * count
    if run_flags is None or count >= _NO_OFFSET_THRESHOLD:
        pos += 4 * count  # offset header; redundant with the walk below, so not trusted
    prev = -1
    for i in range(count):
        key = header[2 * i]
        if key <= prev:
            raise _Malformed("container keys not strictly ascending")
        prev = key
        card = header[2 * i + 1] + 1
        if run_flags is not None and run_flags[i >> 3] >> (i & 7) & 1:
            if pos + 2 > end:
                raise _Malformed("truncated run container")
            (runs,) = struct.unpack_from("<H", buf, pos)
            pos += 2 + 4 * runs
        elif card <= _ARRAY_MAX:
            pos += 2 * card
        else:
            pos += _BITSET_BYTES
        if pos > end:
            raise _Malformed("truncated container data")
    return pos
