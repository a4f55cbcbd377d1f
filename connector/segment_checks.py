"""Checks that a segment's bytes are the ones mvtable wrote.

Two checksums cover a segment. Every Parquet page carries a CRC-32 of its bytes in its
header (``write_page_checksum``), which every read verifies before decoding
(``page_checks``); and the log's descriptor of
the segment records a CRC-32 of the file's footer (``footer_crc32``), checked here when
the footer is read. Page checksums alone leave the footer bare: a flipped bit there can
still decode, into another offset, type, column name, field id or statistic, and so into
other rows without an error. The footer is read anyway, so hashing it costs next to
nothing.

A segment written before mvtable checksummed its segments (no ``footer_crc32`` in its
descriptor, no CRC in its page headers) reads as before, unverified; compaction rewrites
it with checksums. A descriptor that carries a ``footer_crc32`` sits in a commit that has
a checksum of its own, so a flipped bit cannot remove it.

Whatever a damaged file makes pyarrow raise while decoding becomes a
``CorruptSegmentError`` naming the file (``corrupt_segment``).
"""

from __future__ import annotations

import zlib
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mvtable.errors import CorruptSegmentError

__all__ = ["corrupt_segment", "footer_crc32", "is_decode_error", "read_footer"]

# Whether reads check page checksums and footers. Always on: only ``benchmarks.checksums``
# turns it off, in its own process, to measure what the checks cost.
VERIFY = True

PARQUET_MAGIC = b"PAR1"
# How much of a file's end one read takes: the footer of a segment of a few dozen columns
# and row groups fits, so opening a file costs one read (pyarrow reads as much).
FOOTER_READ_BYTES = 64 * 1024


def footer_crc32(metadata: pq.FileMetaData) -> int:
    """The CRC-32 of the footer a ``ParquetWriter`` wrote for ``metadata``, with no read back.

    Taken right after ``close()``, from the same Thrift serialisation the writer used."""
    sink = pa.BufferOutputStream()
    metadata.write_metadata_file(sink)  # magic, footer, footer length, magic
    data = sink.getvalue()
    return zlib.crc32(memoryview(data)[len(PARQUET_MAGIC) : len(data) - 8])


def read_footer(source: Any, *, path: str, expected_crc32: int | None) -> pq.FileMetaData:
    """The footer of the open segment file ``source``, checked against ``expected_crc32``.

    ``source`` is a pyarrow ``RandomAccessFile``; ``expected_crc32`` is None for a segment written
    without checksums.

    Raises:
        CorruptSegmentError: the file is too short, its end is not a Parquet footer, the
            footer fails its checksum or does not decode.
    """
    size = source.size()
    if size < 2 * len(PARQUET_MAGIC) + 4:
        raise CorruptSegmentError(path, f"{size} bytes: too short for a Parquet file")
    n = min(size, FOOTER_READ_BYTES)
    tail = source.read_at(n, size - n)
    if tail[-4:] != PARQUET_MAGIC:
        raise CorruptSegmentError(path, "the file does not end in a Parquet footer (truncated or damaged)")
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 2 * len(PARQUET_MAGIC) + 4 > size:
        raise CorruptSegmentError(path, f"the footer length ({length} bytes) exceeds the file ({size} bytes)")
    if length + 8 > n:
        tail = source.read_at(length + 8, size - length - 8)
    footer = memoryview(tail)[len(tail) - 8 - length : len(tail) - 8]
    if expected_crc32 is not None and VERIFY and zlib.crc32(footer) != expected_crc32:
        raise CorruptSegmentError(
            path, "the Parquet footer fails its checksum: the file was damaged or replaced after mvtable wrote it"
        )
    try:
        return pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + bytes(footer) + bytes(tail[-8:])))
    except Exception as exc:  # pyarrow's Thrift decoder raises OSError/ArrowInvalid of many kinds
        raise corrupt_segment(path, exc) from None


def is_decode_error(exc: BaseException) -> bool:
    """Whether pyarrow raised ``exc`` because the bytes it decoded are damaged, rather than because storage failed.

    Storage failures are ``OSError``s with an errno, or the storage layer's own.

    Parquet decoding reports damage as ``ArrowInvalid``/``ArrowNotImplementedError``/...
    (``ArrowException``) or as a plain ``OSError`` without an errno (a failed page CRC, a
    Thrift header that does not decode, a page shorter than its header says)."""
    if isinstance(exc, pa.ArrowException) and not isinstance(exc, OSError):
        return True
    if isinstance(exc, (MemoryError, IndexError, OverflowError)):
        return True  # sizes a flipped bit made huge or negative
    return type(exc) is OSError and exc.errno is None  # exactly OSError: not FileNotFoundError, ConnectionError, …


def corrupt_segment(path: str, exc: BaseException) -> CorruptSegmentError:
    """The typed error for a segment whose bytes did not decode."""
    detail = f"{type(exc).__name__}: {exc}"[:300]
    return CorruptSegmentError(path, f"the file is damaged: Parquet data does not decode ({detail})")
