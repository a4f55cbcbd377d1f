"""Segment checksums: what is written, what a read refuses, and tables written before them."""

from __future__ import annotations

import json
import os
import zlib
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mvtable import Table
from mvtable.connector.segment_checks import footer_crc32
from mvtable.connector.segment_encoding import dictionary_columns_for, parquet_writer_options
from mvtable.errors import CorruptMetadataError, CorruptSegmentError
from mvtable.lineage.actions import CHECKSUM_KEY
from mvtable.lineage.checkpoint import FILE_CRC_KEY, HEADER_CRC_KEY, HEADER_KEY
from mvtable.lineage.log import checkpoint_path, commit_path


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "tag": pa.array([f"t{i % 4}" for i in ids]),
            "price": pa.array([i * 0.5 for i in ids], pa.float64()),
            "day": pa.array([i % 3000 for i in ids], pa.int32()).cast(pa.date32()),
            "amount": pa.array([Decimal(i * 7) / 100 for i in ids], pa.decimal128(12, 2)),
            "tags": pa.array([[f"x{i % 3}"] * (i % 3) for i in ids], pa.list_(pa.string())),
            "point": pa.array([{"x": i, "y": str(i)} for i in ids], pa.struct([("x", pa.int64()), ("y", pa.string())])),
        }
    )


def _footer(path: str) -> bytes:
    data = open(path, "rb").read()
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length : -8]


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("n", [10, 20_000])
def test_the_recorded_footer_crc_is_the_files(tmp_path, n, nested):
    """The CRC is taken from the writer's metadata, not read back: it must equal the CRC
    of the footer bytes on disk for every encoding the writer picks (small and large
    segments, dictionary/delta columns, nested columns)."""
    data = rows(0, n) if nested else rows(0, n).select(["id", "tag", "price", "day", "amount"])
    t = Table.create(str(tmp_path / "t"), schema=data.schema, properties={"rowGroupRows": "8192"})
    t.append(data)
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    assert seg.file.footer_crc32 == zlib.crc32(_footer(path))
    md = pq.ParquetFile(path).metadata
    chunk = md.row_group(0).column(0)
    assert chunk.num_values > 0
    # and a file written with any options: the metadata's serialisation is the file's footer
    other = str(tmp_path / "x.parquet")
    w = pq.ParquetWriter(
        other, data.schema, **parquet_writer_options(use_dictionary=dictionary_columns_for(data), schema=data.schema)
    )
    w.write_table(data, row_group_size=5000)
    w.close()
    assert footer_crc32(w.writer.metadata) == zlib.crc32(_footer(other))


def test_pages_carry_checksums(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema)
    t.append(rows(0, 100))
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    data = bytearray(open(path, "rb").read())
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(2)  # price: plain doubles
    at = chunk.data_page_offset + chunk.total_compressed_size - 2
    data[at] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(CorruptSegmentError) as info:
        Table.open(t.uri).to_arrow()
    assert seg.file.path in str(info.value) and "CRC" in str(info.value)


def test_a_segment_replaced_by_another_valid_file_is_refused(tmp_path):
    """Same rows, same row groups, different bytes (here: another codec): the page CRCs
    of the new file are fine, the footer is not the one the log recorded."""
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema)
    t.append(rows(0, 300))
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    pq.write_table(pq.read_table(path), path, compression="gzip", write_page_checksum=True)
    with pytest.raises(CorruptSegmentError, match="footer fails its checksum") as info:
        t.scan().to_arrow()
    assert seg.file.path in str(info.value)


def test_a_truncated_segment_names_the_file(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema)
    t.append(rows(0, 300))
    [seg] = t.snapshot().visible_segments()
    path = os.path.join(t.uri, seg.file.path)
    data = open(path, "rb").read()
    for cut in (0, 5, len(data) // 2, len(data) - 1):
        with open(path, "wb") as f:
            f.write(data[:cut])
        with pytest.raises(CorruptSegmentError) as info:
            t.to_arrow()
        assert seg.file.path in str(info.value)


# -- tables written before checksums -------------------------------------------------------
def _as_previous_release(t: Table) -> None:
    """Rewrite ``t`` as the release before checksums wrote it: segments without page CRCs,
    commits of format 1 without a checksum or footer CRCs, checkpoints of format 2."""
    log_dir = os.path.join(t.uri, "_mvtable", "log")
    for seg in t.snapshot().visible_segments():
        path = os.path.join(t.uri, seg.file.path)
        table = pq.read_table(path)
        sizes = [rg.num_rows for rg in seg.file.row_groups]
        w = pq.ParquetWriter(path, table.schema, compression="snappy")
        at = 0
        for n in sizes:
            w.write_table(table.slice(at, n), row_group_size=n)
            at += n
        w.close()
    for name in os.listdir(log_dir):
        path = os.path.join(log_dir, name)
        if name.endswith(".json"):
            doc = json.load(open(path))
            doc.pop(CHECKSUM_KEY)
            doc["format"] = 1
            for action in doc["actions"]:
                if action["kind"] == "add":
                    action["segment"].pop("footer_crc32")
            with open(path, "w") as f:
                json.dump(doc, f)
        elif name.endswith(".checkpoint.parquet"):
            pf = pq.ParquetFile(path)
            table = pf.read()  # format 2 had neither footer checksums nor partitions
            table = table.drop_columns([c for c in ("footer_crc32", "spec_id", "partition") if c in table.column_names])
            header = json.loads(pf.metadata.metadata[HEADER_KEY])
            header["format"] = 2
            text = json.dumps(header).encode()
            table = table.replace_schema_metadata({HEADER_KEY: text, HEADER_CRC_KEY: b"%08x" % zlib.crc32(text)})
            pq.write_table(table, path, compression="zstd", write_page_checksum=True)


def test_a_table_of_the_previous_release_reads_and_writes(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema, properties={"checkpointInterval": "2"})
    t.append(rows(0, 500))
    t.append(rows(500, 500))
    t.delete(pc.field("id").isin(list(range(0, 1000, 7))))
    expected = t.to_arrow().sort_by("id")
    assert os.path.exists(os.path.join(t.uri, checkpoint_path(2)))
    _as_previous_release(t)
    old = Table.open(t.uri)
    assert old.to_arrow().sort_by("id").equals(expected)
    assert old.to_arrow(version=1).num_rows == 500
    summary = old.commit_log.read_checkpoint_summary(2, full_check=True)  # GC's view of a format-2 checkpoint
    assert summary.version == 2 and [h.version for h in summary.history] == [0, 1, 2]
    # this release goes on writing with checksums beside the old files
    old.append(rows(1000, 10))
    assert json.loads(open(os.path.join(t.uri, commit_path(4)), "rb").read())["format"] == 2
    assert Table.open(t.uri).to_arrow().num_rows == expected.num_rows + 10
    assert old.compact(delete_ratio=0.05).output_segments >= 1  # rewrites the old segments with checksums
    assert all(s.file.footer_crc32 is not None for s in Table.open(t.uri).snapshot().visible_segments())
    assert Table.open(t.uri).to_arrow().sort_by("id").slice(0, expected.num_rows).equals(expected)


def test_stripping_a_commits_checksum_does_not_make_it_readable(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema)
    t.append(rows(0, 10))
    path = os.path.join(t.uri, commit_path(1))
    doc = json.load(open(path))
    doc.pop(CHECKSUM_KEY)
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    with pytest.raises(CorruptMetadataError, match="without its checksum") as info:
        Table.open(t.uri).to_arrow()
    assert commit_path(1) in str(info.value)


def test_a_checkpoint_without_its_file_checksum_is_refused(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema, properties={"checkpointInterval": "1"})
    t.append(rows(0, 10))
    path = os.path.join(t.uri, checkpoint_path(1))
    pf = pq.ParquetFile(path)
    meta = {k: v for k, v in pf.metadata.metadata.items() if k in (HEADER_KEY, HEADER_CRC_KEY)}
    assert FILE_CRC_KEY in pf.metadata.metadata
    pq.write_table(pf.read().replace_schema_metadata(meta), path)
    for v in (0, 1):
        os.unlink(os.path.join(t.uri, commit_path(v)))
    with pytest.raises(CorruptMetadataError, match="without a file checksum"):
        Table.open(t.uri).to_arrow()


def test_to_duckdb_checks_the_footers(tmp_path):
    import duckdb

    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema.remove(6).remove(5))
    t.append(rows(0, 300).drop_columns(["tags", "point"]))
    [seg] = t.snapshot().visible_segments()
    con = duckdb.connect()
    assert t.scan().to_duckdb(con).aggregate("count(*)").fetchall() == [(300,)]
    path = os.path.join(t.uri, seg.file.path)
    pq.write_table(pq.read_table(path), path, compression="gzip")
    with pytest.raises(CorruptSegmentError, match="footer fails its checksum"):
        t.scan().to_duckdb(con)
