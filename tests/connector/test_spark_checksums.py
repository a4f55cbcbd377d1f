"""A damaged page fails every Spark read path with an error naming the file: the
``mvtable`` data source (mvtable's reader on the executors: ``CorruptSegmentError``),
``read_native`` and ``create_view`` (Spark's Parquet reader with page checksums on), with
the JVM mask and with the expression mask. Without the page checksum check the same flip
is read as data."""

from __future__ import annotations

import os

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mvtable.connector import Table
from mvtable.connector.spark import native_jvm, native_mask, read_native
from mvtable.connector.spark.views import create_view, drop_view
from mvtable.errors import CorruptSegmentError
from tests.support.spark_session import assert_route

from .conftest import orders

pytestmark = pytest.mark.spark


def _flip_page_byte(path: str, column: str) -> None:
    """Flip one bit near the end of the first row group's ``column`` chunk: inside the data
    of its last page, which only the page checksum covers."""
    md = pq.ParquetFile(path).metadata
    names = [md.schema.column(j).path for j in range(md.num_columns)]
    chunk = md.row_group(0).column(names.index(column))
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    at = start + chunk.total_compressed_size - 3
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x10]))


@pytest.fixture
def damaged(tmp_path) -> tuple[Table, str, list[tuple]]:
    """Two segments, one with deletes (the masked path), the other plain; a page of each
    damaged. Returns the table, a damaged file's name and the rows before the damage."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    t.append(orders(0, 1000))
    t.append(orders(1000, 1000))
    t.delete(pc.field("id") < 10)
    expected = sorted(tuple(r.values()) for r in t.to_arrow().to_pylist())
    names = []
    for seg in t.snapshot().visible_segments():
        path = os.path.join(t.uri, seg.file.path)
        _flip_page_byte(path, "price")
        names.append(os.path.basename(path))
    return t, names, expected


def _fails_naming_a_file(run, names: list[str]) -> str:
    with pytest.raises(Exception) as info:
        run()
    text = str(info.value)
    assert any(n in text for n in names), text[:2000]
    return text


def test_the_data_source_refuses_a_damaged_page(spark, damaged, read_route):
    t, names, _ = damaged
    df = spark.read.format("mvtable").load(t.uri)
    assert_route(df, read_route)
    text = _fails_naming_a_file(df.collect, names)
    if read_route == "native":  # Spark's Parquet reader checks the page CRC (the footers were checked at load)
        assert "checksum" in text.lower() or "crc" in text.lower(), text[:2000]
    else:  # mvtable's reader checks it, a typed error
        assert "CorruptSegmentError" in text


@pytest.mark.parametrize("mask", ["jvm", "expression"])
def test_read_native_and_views_refuse_a_damaged_page(spark, damaged, mask, monkeypatch):
    t, names, expected = damaged
    if mask == "expression":
        monkeypatch.setenv(native_jvm.SWITCH, "off")
    native_mask._MASKS.clear()
    for plain in (False, True):  # the masked segment, then the plain one
        df = read_native(spark, t.uri).where("id < 1000" if not plain else "id >= 1000")
        text = _fails_naming_a_file(df.collect, names)
        assert "checksum" in text.lower() or "crc" in text.lower(), text[:2000]
    create_view(spark, "damaged_v", t.uri)
    try:
        _fails_naming_a_file(lambda: spark.sql("SELECT sum(price) FROM damaged_v").collect(), names)
    finally:
        drop_view(spark, "damaged_v")
    # what the check stops: Spark's reader without it returns the flipped value as data
    unchecked = spark.read.parquet(*[os.path.join(t.uri, s.file.path) for s in t.snapshot().visible_segments()])
    got = sorted(tuple(r) for r in unchecked.where("id >= 10").select(*t.schema.names).collect())
    assert got != expected


def test_read_native_checks_footers_when_the_frame_is_made(spark, tmp_path):
    """Spark trusts a footer's column names and statistics: a segment whose footer is not
    the one the log recorded (here the same rows written again with other options, every
    page CRC fine) is refused before Spark reads it."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    t.append(orders(0, 1000))
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    pq.write_table(pq.read_table(path), path, compression="gzip", write_page_checksum=True)
    with pytest.raises(CorruptSegmentError, match="footer fails its checksum") as info:
        read_native(spark, t.uri)
    assert seg.file.path in str(info.value)
    with pytest.raises(CorruptSegmentError):
        create_view(spark, "refused_v", t.uri)
