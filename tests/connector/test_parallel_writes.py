"""``Table.append``/``overwrite`` encode one segment per core, in parallel."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.parallel import default_workers
from mvtable.connector.segments import write_segments
from mvtable.storage import open_file_io

from .conftest import orders


def test_a_large_write_is_split_into_row_group_aligned_segments(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    data = orders(0, 1050)
    io = open_file_io(table_uri)
    segments = write_segments(io, data, row_group_rows=100, workers=3, min_rows_per_segment=1)
    assert len(segments) == 3
    assert [s.num_rows for s in segments] == [400, 400, 250]  # whole row groups, the rest last
    assert all(rg.num_rows == 100 for s in segments[:-1] for rg in s.row_groups)


def test_a_split_write_reads_back_in_order(table_uri, monkeypatch):
    from mvtable.connector import segments as seg_module

    monkeypatch.setattr(seg_module, "PARALLEL_MIN_ROWS", 1)
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.overwrite(orders(0, 1050), consistent_push=True)
    assert len(t.snapshot().visible_segments()) == min(default_workers(), 5)  # 1050 rows: at most 5 parts of 2 row groups
    assert t.to_arrow().column("id").to_pylist() == list(range(1050))


def test_a_small_write_stays_one_segment(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.append(orders(0, 150))  # fewer than two row groups per worker: not worth a second file
    t.append(orders(150, 5000))  # fewer than PARALLEL_MIN_ROWS: one file too
    assert len(t.snapshot().visible_segments()) == 2


def test_a_failing_writer_leaves_no_files(table_uri, monkeypatch):
    io = open_file_io(table_uri)
    from mvtable.connector import segments as seg_module

    calls = {"n": 0}
    real_close = seg_module.SegmentWriter.close

    def close(self):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_close(self)

    monkeypatch.setattr(seg_module.SegmentWriter, "close", close)
    with pytest.raises(OSError, match="disk full"):
        write_segments(io, orders(0, 1000), row_group_rows=100, workers=2, min_rows_per_segment=1)
    data_dir = os.path.join(table_uri, "data")
    assert not os.path.isdir(data_dir) or os.listdir(data_dir) == []


def test_empty_data_writes_nothing(table_uri):
    assert write_segments(open_file_io(table_uri), orders(0, 0), row_group_rows=10) == []
    assert write_segments(open_file_io(table_uri), pa.table({"id": pa.array([], pa.int64())}), row_group_rows=10) == []
