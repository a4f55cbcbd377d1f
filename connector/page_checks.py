"""Verifying the CRC-32 of every Parquet page a read decodes, before the decoder sees it.

Every page mvtable writes carries a CRC-32 of its bytes in its header. pyarrow can check
them while decoding (``page_checksum_verification``), but with a table-driven CRC that
costs more than everything else the checks add. Here the bytes a read needs are read into
memory once, their pages walked and hashed with ISA-L's carry-less-multiply CRC-32
(``isal``, several times faster), and pyarrow decodes the verified bytes from memory.

Walking pages needs the length of each page header, so this module reads just enough of
Parquet's Thrift compact protocol (``PageHeader``) to skip over one and pick out the three
fields that matter: the page type, the size of the page's bytes and their CRC.

A segment that mvtable wrote with checksums has a CRC on every page; a page without one is
damage (a flipped bit in the header can turn the CRC field into another), never a reason
to skip the check.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from isal import isal_zlib

from mvtable.errors import CorruptSegmentError

from .parallel import ordered_map

__all__ = ["chunk_ranges", "read_checked", "verify_pages"]

# Thrift compact protocol types (the low nibble of a field header).
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# PageHeader fields (parquet.thrift): 1 type, 3 compressed_page_size, 4 crc.
_TYPE, _COMPRESSED_SIZE, _CRC = 1, 3, 4
# Nesting deeper than this is not a page header but damage.
_MAX_DEPTH = 16


class _Damaged(Exception):
    """A page header that does not decode (internal: turned into ``CorruptSegmentError``)."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    """(the unsigned varint at ``pos``, the position after it)."""
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise _Damaged("a varint in a page header is longer than 10 bytes")


def _skip(data: memoryview, pos: int, kind: int, depth: int) -> int:
    """The position after a value of Thrift type ``kind`` at ``pos``."""
    if depth > _MAX_DEPTH:
        raise _Damaged("a page header nests too deep")
    if kind in (_TRUE, _FALSE):
        return pos
    if kind == _BYTE:
        return pos + 1
    if kind in (_I16, _I32, _I64):
        return _varint(data, pos)[1]
    if kind == _DOUBLE:
        return pos + 8
    if kind == _BINARY:
        length, pos = _varint(data, pos)
        return pos + length
    if kind in (_LIST, _SET):
        head = data[pos]
        size, element = head >> 4, head & 0x0F
        pos += 1
        if size == 15:
            size, pos = _varint(data, pos)
        if size > len(data) - pos:  # every element takes a byte at least: a flipped bit, not a list
            raise _Damaged("a list in a page header is longer than the file")
        for _ in range(size):
            pos = pos + 1 if element in (_TRUE, _FALSE) else _skip(data, pos, element, depth + 1)
        return pos
    if kind == _MAP:
        size, pos = _varint(data, pos)
        if size > len(data) - pos:
            raise _Damaged("a map in a page header is longer than the file")
        if size:
            types = data[pos]
            pos += 1
            for _ in range(size):
                pos = _skip(data, _skip(data, pos, types >> 4, depth + 1), types & 0x0F, depth + 1)
        return pos
    if kind == _STRUCT:
        while True:
            head = data[pos]
            pos += 1
            if head & 0x0F == _STOP:
                return pos
            if not head >> 4:
                pos = _varint(data, pos)[1]  # a field id that is no delta of the last
            pos = _skip(data, pos, head & 0x0F, depth + 1)
    raise _Damaged(f"unknown Thrift type {kind} in a page header")


def _page_header(data: memoryview, pos: int) -> tuple[int, int | None, int]:
    """(size of the page's bytes, their CRC or None, the position after the header) of the header at ``pos``.

    Only the top level is decoded field by field; nested headers (data, dictionary, index) are
    skipped whole."""
    page_type = size = -1
    crc: int | None = None
    field = 0
    while True:
        head = data[pos]
        pos += 1
        kind = head & 0x0F
        if kind == _STOP:
            break
        if head >> 4:
            field += head >> 4
        else:
            raw, pos = _varint(data, pos)
            field = (raw >> 1) ^ -(raw & 1)
        if kind == _I32 and field in (_TYPE, _COMPRESSED_SIZE, _CRC):
            raw, pos = _varint(data, pos)
            value = (raw >> 1) ^ -(raw & 1)
            if field == _TYPE:
                page_type = value
            elif field == _COMPRESSED_SIZE:
                size = value
            else:
                crc = value & 0xFFFFFFFF
        else:
            pos = _skip(data, pos, kind, 1)
    if page_type < 0 or size < 0:
        raise _Damaged("a page header without its type or size")
    return size, crc, pos


def verify_pages(data: memoryview, start: int, length: int, *, where: str, column: str) -> None:
    """Check every page of the column chunk at ``data[start:start + length]`` against its CRC-32.

    Raises:
        CorruptSegmentError: a page header does not decode, the pages do not fill the chunk
            exactly, a page has no CRC, or a page's bytes fail theirs (the message names the file
            and the column)."""
    end = start + length
    if start < 0 or end > len(data):
        raise CorruptSegmentError(where, f"column {column!r}: its chunk lies outside the file")
    pos = start
    try:
        while pos < end:
            size, crc, body = _page_header(data, pos)
            if body > end or body + size > end:
                raise _Damaged(f"the page at byte {pos} runs past the column chunk")
            if crc is None:
                raise _Damaged(f"the page at byte {pos} carries no checksum")
            if isal_zlib.crc32(data[body : body + size]) != crc:
                raise CorruptSegmentError(
                    where,
                    f"the file is damaged: the page at byte {pos} of column {column!r} fails its CRC-32 checksum "
                    "(the file was damaged after mvtable wrote it)",
                )
            pos = body + size
    except IndexError:
        raise CorruptSegmentError(where, f"the file is damaged: column {column!r}: a page header runs past the file") from None
    except _Damaged as exc:
        raise CorruptSegmentError(where, f"the file is damaged: column {column!r}: {exc}") from None


def chunk_ranges(
    metadata: pq.FileMetaData, row_groups: Iterable[int], columns: Sequence[str] | None
) -> list[tuple[int, int, str]]:
    """(start, length, column path) of each column chunk a read of ``row_groups`` × ``columns`` decodes.

    ``columns`` are the names a ``ParquetFile`` read takes (top-level names or dotted paths);
    a chunk is included when its column's top-level name is one of theirs, which may include
    a few chunks more than the read needs, never fewer."""
    tops = None if columns is None else {c.split(".", 1)[0] for c in columns}
    paths = [metadata.schema.column(j).path for j in range(metadata.num_columns)]
    wanted = [j for j, p in enumerate(paths) if tops is None or p.split(".", 1)[0] in tops or p in tops]
    out = []
    for i in row_groups:
        group = metadata.row_group(i)
        for j in wanted:
            chunk = group.column(j)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
                start = min(start, chunk.dictionary_page_offset)
            out.append((start, chunk.total_compressed_size, paths[j]))
    return out


# Ranges closer than this are read in one call: the gap is cheaper to read than a second request.
_COALESCE_GAP = 1 << 20


def read_checked(
    source: Any,
    metadata: pq.FileMetaData,
    row_groups: Iterable[int],
    columns: Sequence[str] | None,
    *,
    where: str,
    lock: threading.Lock,
    remote: bool = False,
) -> pa.Buffer:
    """The bytes a read of ``row_groups`` × ``columns`` decodes, every page of them checked.

    The buffer is as long as the file and holds the file's bytes at their own offsets, so a
    ``ParquetFile`` over it (with the footer passed as ``metadata``) decodes them as it would the
    file; only the column chunks the read asked for are read, and the rest of the buffer is never
    written, so it takes no memory. It comes from Arrow's memory pool, which reuses the pages of
    the previous read instead of having the kernel zero new ones. ``lock`` guards ``source``'s
    position. On ``remote`` storage the separate ranges of a read are requested side by side, as
    pyarrow's own pre-buffering does: each is a round trip.

    Raises:
        CorruptSegmentError: a page is damaged, or the file ends inside a column chunk."""
    chunks = chunk_ranges(metadata, row_groups, columns)
    size = source.size()
    buffer = pa.allocate_buffer(size)
    view = memoryview(buffer).cast("B")  # Arrow's buffers read as signed bytes
    ranges = _coalesce(sorted((s, s + n) for s, n, _ in chunks))
    if any(end > size for _, end in ranges):
        raise CorruptSegmentError(where, "the file ends inside a column chunk: it was truncated")
    if remote and len(ranges) > 1:
        for (start, end), got in zip(ranges, ordered_map(lambda r: source.read_at(r[1] - r[0], r[0]), ranges, workers=8)):
            view[start:end] = got
    else:
        with lock:
            for start, end in ranges:
                source.seek(start)
                if source.readinto(view[start:end]) != end - start:
                    raise CorruptSegmentError(where, "the file ends inside a column chunk: it was truncated")
    for start, length, column in chunks:
        verify_pages(view, start, length, where=where, column=column)
    return buffer


def _coalesce(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        if out and start - out[-1][1] <= _COALESCE_GAP:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
