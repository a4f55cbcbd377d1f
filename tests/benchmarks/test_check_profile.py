"""The checks' cost measured from inside a read (``benchmarks.check_profile``): the Python
page check's own CPU time, the JVM's CRC-32 per byte and the bytes a query's columns check."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.check_profile import CheckShare, chunk_bytes, jvm_crc_seconds_per_byte, python_check_share
from benchmarks.common import process_cpu
from mvtable.connector import Table


def _table(path: Path) -> Table:
    t = Table.create(str(path), schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    for part in range(2):
        ids = list(range(part * 50_000, (part + 1) * 50_000))
        t.append(pa.table({"id": ids, "name": [f"n{i % 97}" for i in ids]}))
    return t


def test_the_python_check_is_timed_inside_the_scan(tmp_path: Path) -> None:
    _table(tmp_path / "t")
    share = python_check_share(lambda: Table.open(str(tmp_path / "t")).to_arrow(), rounds=3, cpu_clock=process_cpu)
    assert share.rounds == 3 and share.unit == "CPU s"
    assert 0 < share.check < share.total  # the check ran, and is part of the scan's work
    assert share.cost == pytest.approx(share.check / (share.total - share.check))


def test_a_scan_that_checks_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no page was checked"):
        python_check_share(lambda: None, rounds=1, cpu_clock=process_cpu)


def test_chunk_bytes_are_the_column_chunks_of_the_visible_segments(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    files = [tmp_path / "t" / seg.file.path for seg in t.snapshot().visible_segments()]
    expected = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for i in range(meta.num_row_groups):
            expected += meta.row_group(i).column(0).total_compressed_size
    assert chunk_bytes(str(tmp_path / "t"), ["id"]) == expected
    assert chunk_bytes(str(tmp_path / "t"), ["id", "name"]) > expected


@pytest.mark.spark
def test_the_jvm_crc_cost_per_byte_is_measured_in_sparks_jvm(spark) -> None:
    per_byte = jvm_crc_seconds_per_byte(spark, megabytes=8, rounds=2)
    assert 0 < per_byte < 1e-8  # faster than 100 MB/s, as any CRC-32 is
    share = CheckShare(rounds=1, check=per_byte * (1 << 30), total=1.0, unit="CPU s")
    assert share.share == pytest.approx(per_byte * (1 << 30))
