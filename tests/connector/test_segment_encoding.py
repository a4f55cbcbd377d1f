"""Segment encoding: dictionary pages only where values repeat, and row-group statistics
read from the Parquet footer equal to the ones computed from the rows."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mvtable.connector import Table
from mvtable.connector.segment_encoding import DICTIONARY_MIN_SAMPLE_ROWS, SMALL_SEGMENT_ROWS, dictionary_columns_for
from mvtable.connector.segments import SegmentWriter
from mvtable.connector.stats import column_stats
from mvtable.storage import open_file_io


def _mixed(n: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ints = rng.permutation(n).astype(np.int64)
    return pa.table(
        {
            "key": pa.array(ints),  # unique: no dictionary
            "flag": pa.array(np.array(["A", "N", "R"])[ints % 3]),  # 3 values: dictionary
            "qty": pa.array([Decimal(int(i % 50)) for i in ints], pa.decimal128(15, 2)),
            "price": pa.array([Decimal(int(i)) / 100 for i in ints], pa.decimal128(15, 2)),
            "comment": pa.array([f"row {i} says {i * 7919 % 1000003}" for i in ints]),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(i % 400)) for i in ints]),
            "ok": pa.array(ints % 2 == 0),
        }
    )


def _chunks_with_dictionary(path: str) -> dict[str, bool]:
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    return {rg.column(j).path_in_schema: rg.column(j).has_dictionary_page for j in range(md.num_columns)}


def _delta_encoded(path: str) -> set[str]:
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    return {rg.column(j).path_in_schema for j in range(md.num_columns) if "DELTA_BINARY_PACKED" in rg.column(j).encodings}


def test_only_repeating_columns_are_dictionary_encoded(table_uri):
    data = _mixed(20_000)
    assert sorted(dictionary_columns_for(data)) == ["day", "flag", "qty"]
    Table.create(table_uri, schema=data.schema, properties={"rowGroupRows": "10000"})
    Table(table_uri).append(data)
    seg = Table(table_uri).snapshot().visible_segments()[0]
    encoded = _chunks_with_dictionary(f"{table_uri}/{seg.file.path}")
    assert encoded == {"key": False, "flag": True, "qty": True, "price": False, "comment": False, "day": True, "ok": False}
    delta = _delta_encoded(f"{table_uri}/{seg.file.path}")
    assert delta == {"key", "price"}  # the integer-like plain columns; not the text, not the dictionaries
    assert Table(table_uri).scan().to_arrow().sort_by("key").equals(data.sort_by("key"))


def test_a_small_or_nested_sample_keeps_dictionary_everywhere():
    assert dictionary_columns_for(_mixed(DICTIONARY_MIN_SAMPLE_ROWS - 1)) is True
    nested = _mixed(20_000).append_column("tags", pa.array([[1, 2]] * 20_000))
    assert dictionary_columns_for(nested) is True


def test_footer_statistics_equal_the_ones_computed_from_rows(tmp_path):
    n = 3_000
    rng = np.random.default_rng(7)
    vals = rng.integers(-(10**6), 10**6, n)
    table = pa.table(
        {
            "i8": pa.array(vals % 100, pa.int8()),
            "u64": pa.array(np.abs(vals).astype(np.uint64) + np.uint64(2**63), pa.uint64()),
            "i64": pa.array([None if v % 11 == 0 else int(v) for v in vals], pa.int64()),
            "b": pa.array([None if v % 5 == 0 else bool(v % 2) for v in vals]),
            "s": pa.array([None if v % 13 == 0 else f"é{v}" for v in vals]),
            "ls": pa.array([f"x{v}" for v in vals], pa.large_string()),
            "d": pa.array([dt.date(1960, 1, 1) + dt.timedelta(days=int(v % 30000)) for v in vals]),
            "dec": pa.array([Decimal(int(v)) / 100 for v in vals], pa.decimal128(15, 2)),
            "dec38": pa.array([Decimal(int(v)) / 1000 for v in vals], pa.decimal128(38, 3)),
            "f": pa.array([float("nan") if v % 997 == 0 else v / 3 for v in vals]),
            "ts": pa.array(vals, pa.timestamp("ms", tz="UTC")),
            "nulls": pa.nulls(n, pa.int32()),
            "bin": pa.array([b"x"] * n),
        }
    )
    io = open_file_io(str(tmp_path))
    w = SegmentWriter(io, table.schema, row_group_rows=1_000)
    w.write(table)
    seg = w.close()
    assert seg is not None and len(seg.row_groups) == 3
    for rg in seg.row_groups:
        assert rg.stats == column_stats(table.slice(rg.first_row, rg.num_rows))
    assert seg.row_groups[0].stats["nulls"].null_count == 1_000 and seg.row_groups[0].stats["nulls"].min is None


def test_a_value_over_the_statistics_limit_leaves_the_row_group_unpruned(tmp_path):
    table = pa.table({"s": ["a", "z" * 5000, None]})
    io = open_file_io(str(tmp_path))
    w = SegmentWriter(io, table.schema, row_group_rows=10)
    w.write(table)
    seg = w.close()
    assert seg is not None
    stats = seg.row_groups[0].stats["s"]
    assert (stats.min, stats.max, stats.null_count) == (None, None, 1)


def _codecs(path: str) -> set[str]:
    """The codecs of the file's column chunks, leaving out the delta-packed ones (always
    uncompressed, see the test below)."""
    md = pq.ParquetFile(path).metadata
    chunks = [md.row_group(i).column(j) for i in range(md.num_row_groups) for j in range(md.num_columns)]
    return {c.compression for c in chunks if "DELTA_BINARY_PACKED" not in c.encodings}


def test_small_segments_are_snappy_and_the_rest_zstd(table_uri):
    data = _mixed(SMALL_SEGMENT_ROWS + 100)
    Table.create(table_uri, schema=data.schema, properties={"rowGroupRows": "1000"})
    Table(table_uri).append(data.slice(0, 1000))  # one small append
    Table(table_uri).append(data)  # larger than a small segment, in row groups of 1000
    by_rows = {s.file.num_rows: f"{table_uri}/{s.file.path}" for s in Table(table_uri).snapshot().visible_segments()}
    small, large = by_rows[1000], by_rows[data.num_rows]
    # row groups of 1,000 rows are too few to choose dictionary columns from: all of them
    # have dictionary pages, and the segment is zstd throughout
    assert _codecs(small) == {"SNAPPY"} and _codecs(large) == {"ZSTD"}
    assert Table(table_uri).scan().to_arrow().num_rows == 1000 + data.num_rows


def test_a_streamed_segment_learns_its_size_at_its_only_flush(tmp_path):
    io = open_file_io(str(tmp_path))
    small = SegmentWriter(io, _mixed(10).schema, row_group_rows=100_000)  # Spark's writer: size unknown
    for start in range(0, 3_000, 500):
        small.write(_mixed(3_000).slice(start, 500))
    seg = small.close()
    assert seg is not None and _codecs(f"{tmp_path}/{seg.path}") == {"SNAPPY"}
    large = SegmentWriter(io, _mixed(10).schema, row_group_rows=SMALL_SEGMENT_ROWS)
    large.write(_mixed(SMALL_SEGMENT_ROWS + 10))
    seg = large.close()
    assert seg is not None and _codecs(f"{tmp_path}/{seg.path}") == {"ZSTD", "SNAPPY"}


def test_large_segments_compress_delta_columns_not_at_all_dictionary_columns_snappy_the_rest_zstd(tmp_path):
    """Delta packing leaves zstd nothing to find in high-cardinality integers, and zstd was
    a third of their decode: the delta-packed columns (here the unique ``key`` and
    ``price``) are stored uncompressed, keyed table or not. Dictionary columns' small pages
    paid zstd's per-page set-up on every read: snappy. The rest of a large segment (text,
    booleans) is zstd. Both tables read back the same rows."""
    data = _mixed(SMALL_SEGMENT_ROWS + 100)
    for name, key in (("keyed", ["key"]), ("plain", None)):
        uri = str(tmp_path / name)
        Table.create(uri, schema=data.schema, primary_key=key)
        Table(uri).append(data)
        (seg,) = Table(uri).snapshot().visible_segments()
        rg = pq.ParquetFile(f"{uri}/{seg.file.path}").metadata.row_group(0)
        chunks = {rg.column(j).path_in_schema: rg.column(j) for j in range(rg.num_columns)}
        delta = {n for n, c in chunks.items() if "DELTA_BINARY_PACKED" in c.encodings}
        assert delta == {"key", "price"}
        assert {chunks[n].compression for n in delta} == {"UNCOMPRESSED"}
        dictionary = {n for n, c in chunks.items() if "RLE_DICTIONARY" in c.encodings or "PLAIN_DICTIONARY" in c.encodings}
        assert dictionary == {"flag", "qty", "day"}
        assert {chunks[n].compression for n in dictionary} == {"SNAPPY"}
        assert {chunks[n].compression for n in chunks.keys() - delta - dictionary} == {"ZSTD"}
        assert Table(uri).scan().to_arrow().sort_by("key").equals(data.sort_by("key"))
