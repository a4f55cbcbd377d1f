"""Page checksums verified before decoding: the page walk, what it refuses, and what reads it serves."""

from __future__ import annotations

import os
import zlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mvtable import Table
from mvtable.connector import page_checks
from mvtable.connector.segment_encoding import parquet_writer_options
from mvtable.errors import CorruptSegmentError


def data(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "tag": pa.array([f"t{i % 5}" for i in range(n)]),
            "note": pa.array([f"row {i} " * (i % 4) for i in range(n)]),
            "tags": pa.array([[f"x{i % 3}"] * (i % 3) for i in range(n)], pa.list_(pa.string())),
        }
    )


def write(path: str, table: pa.Table, **options: object) -> pq.FileMetaData:
    with pq.ParquetWriter(path, table.schema, **{**parquet_writer_options(), **options}) as w:  # type: ignore[arg-type]
        w.write_table(table, row_group_size=10_000)
    return pq.read_metadata(path)


def walk(path: str, md: pq.FileMetaData) -> int:
    """Every chunk's pages verified; the number of pages."""
    view = memoryview(open(path, "rb").read())
    pages = 0
    for start, length, column in page_checks.chunk_ranges(md, range(md.num_row_groups), None):
        page_checks.verify_pages(view, start, length, where=path, column=column)
        pos = start
        while pos < start + length:
            size, crc, body = page_checks._page_header(view, pos)
            assert crc == zlib.crc32(view[body : body + size])
            pos = body + size
            pages += 1
    return pages


def test_every_page_of_a_segment_walks_and_verifies(tmp_path):
    path = str(tmp_path / "f.parquet")
    md = write(path, data(25_000))
    assert walk(path, md) >= md.num_row_groups * md.num_columns  # a dictionary or data page per chunk at least


def test_pages_end_by_size_not_at_20000_rows(tmp_path):
    """Segments are written with pages of up to ~1 MiB: a 200,000-row int64 chunk in one page is
    1.6 MB encoded, so it takes two pages, not the ten that 20,000-row pages would make."""
    path = str(tmp_path / "f.parquet")
    table = pa.table({"id": pa.array(range(200_000), pa.int64())})
    with pq.ParquetWriter(path, table.schema, **{**parquet_writer_options(), "use_dictionary": False}) as w:
        w.write_table(table, row_group_size=200_000)
    md = pq.read_metadata(path)
    assert walk(path, md) <= 3


def test_a_flipped_bit_in_a_page_body_names_the_file_and_column(tmp_path):
    path = str(tmp_path / "f.parquet")
    md = write(path, data(5_000))
    start, length, column = page_checks.chunk_ranges(md, [0], ["id"])[0]
    raw = bytearray(open(path, "rb").read())
    raw[start + length - 3] ^= 0x10  # inside the last page's bytes
    view = memoryview(bytes(raw))
    with pytest.raises(CorruptSegmentError, match="column 'id' fails its CRC-32 checksum") as info:
        page_checks.verify_pages(view, start, length, where=path, column=column)
    assert path in str(info.value)


def test_a_page_without_a_checksum_is_refused(tmp_path):
    """A segment mvtable wrote has a CRC on every page: a page without one (a flipped bit can turn
    the CRC field into another) is damage, not a page to skip."""
    path = str(tmp_path / "f.parquet")
    md = write(path, data(100), write_page_checksum=False)
    start, length, column = page_checks.chunk_ranges(md, [0], ["id"])[0]
    with pytest.raises(CorruptSegmentError, match="carries no checksum"):
        page_checks.verify_pages(memoryview(open(path, "rb").read()), start, length, where=path, column=column)


@pytest.mark.parametrize("cut", [1, 7, 40])
def test_a_chunk_cut_short_is_damage_not_an_index_error(tmp_path, cut):
    path = str(tmp_path / "f.parquet")
    md = write(path, data(3_000))
    start, length, column = page_checks.chunk_ranges(md, [0], ["note"])[0]
    view = memoryview(open(path, "rb").read())[: start + length - cut]
    with pytest.raises(CorruptSegmentError):
        page_checks.verify_pages(view, start, length - cut, where=path, column=column)
    with pytest.raises(CorruptSegmentError, match="outside the file"):
        page_checks.verify_pages(view, start, length, where=path, column=column)


def _field(delta: int, kind: int) -> bytes:
    return bytes([(delta << 4) | kind])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            return bytes(out + bytes([n]))
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 31))


def test_the_header_walk_skips_every_thrift_type():
    """A header whose nested part holds every compact-protocol type (binary, list, map, set,
    double, bool, long field-id jumps): the walk must land exactly on the page's first byte."""
    nested = (
        _field(1, 8) + _varint(3) + b"abc"  # binary
        + _field(1, 9) + bytes([(2 << 4) | 5]) + _zigzag(7) + _zigzag(-9)  # list<i32> of 2
        + _field(1, 9) + bytes([(15 << 4) | 8]) + _varint(16) + b"".join(_varint(1) + b"z" for _ in range(16))  # long list
        + _field(1, 10) + bytes([(2 << 4) | 1]) + b"\x01\x02"  # set<bool>
        + _field(1, 11) + _varint(2) + bytes([(8 << 4) | 6]) + (_varint(1) + b"k" + _zigzag(5)) * 2  # map<binary,i64>
        + _field(1, 7) + b"\x00" * 8  # double
        + _field(1, 1) + _field(1, 2)  # booleans
        + _field(0, 5) + _zigzag(40) + _zigzag(1)  # a field id given in full
        + _field(1, 12) + _field(1, 3) + b"\x05" + b"\x00"  # struct { byte }
        + b"\x00"
    )  # fmt: skip
    body = b"page bytes"
    header = (
        _field(1, 5) + _zigzag(0)  # type
        + _field(1, 5) + _zigzag(len(body))  # uncompressed size
        + _field(1, 5) + _zigzag(len(body))  # compressed size
        + _field(1, 5) + _zigzag(zlib.crc32(body) - (1 << 32) if zlib.crc32(body) >= 1 << 31 else zlib.crc32(body))
        + _field(1, 12) + nested
        + b"\x00"
    )  # fmt: skip
    data = memoryview(header + body)
    size, crc, pos = page_checks._page_header(data, 0)
    assert (size, crc, pos) == (len(body), zlib.crc32(body), len(header))
    page_checks.verify_pages(data, 0, len(data), where="f", column="c")
    with pytest.raises(CorruptSegmentError, match="unknown Thrift type"):
        page_checks.verify_pages(memoryview(header[:-1] + b"\x0e" + body), 0, len(data), where="f", column="c")


def test_a_table_read_checks_only_what_it_reads(tmp_path):
    """A projected read decodes (and checks) only its columns: damage in another column's pages
    does not fail it, and a read of that column names it."""
    t = Table.create(str(tmp_path / "t"), schema=data(1).schema)
    t.append(data(30_000))
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    md = pq.read_metadata(path)
    start, length, _ = page_checks.chunk_ranges(md, [0], ["note"])[0]
    raw = bytearray(open(path, "rb").read())
    raw[start + length - 2] ^= 0x01
    with open(path, "wb") as f:
        f.write(raw)
    ids = Table.open(t.uri).to_arrow(columns=["id", "tag"])
    assert pc.sum(ids["id"]).as_py() == sum(range(30_000))
    with pytest.raises(CorruptSegmentError, match="column 'note'"):
        Table.open(t.uri).to_arrow(columns=["note"])


@pytest.mark.parametrize("element", [1, 3, 7])  # bool, byte, double: elements the walk skips without reading
def test_a_list_longer_than_the_file_is_damage_at_once(element):
    """A flipped bit can make a list's size huge: the walk must refuse it, not loop over it."""
    header = _field(1, 5) + _zigzag(0) + _field(2, 5) + _zigzag(4) + _field(1, 9) + bytes([0xF0 | element]) + _varint(1 << 40)
    with pytest.raises(CorruptSegmentError, match="longer than the file"):
        page_checks.verify_pages(memoryview(header + b"\x00" * 64), 0, len(header) + 64, where="f", column="c")
