"""Checkpoints: faithful round trip, typed errors for bad files, and the log's fallback to
older checkpoints or the commits when a checkpoint is unreadable."""

from __future__ import annotations

import json
import logging
import pickle
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvtable.errors import CorruptMetadataError, UnsafePathError, UnsupportedFormatError, VersionNotFoundError
from mvtable.lineage.actions import (
    AddSegment,
    DeletionVectorRef,
    LineageEnd,
    LineageRevert,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    RowGroupInfo,
    SegmentFile,
    SetDeletionVector,
)
from mvtable.lineage.checkpoint import (
    FILE_CRC_KEY,
    HEADER_CRC_KEY,
    HEADER_KEY,
    checkpoint_bytes,
    parse_checkpoint,
    read_checkpoint_summary,
    seal_file_crc,
)
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog, checkpoint_path, commit_path
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.snapshot_cache import process_snapshots
from mvtable.storage import LocalFileIO

SOURCE = "/t/_mvtable/log/00000000000000000009.checkpoint.parquet"


def seg(sid: str) -> SegmentFile:
    return SegmentFile(
        id=sid,
        path=f"data/{sid}.parquet",
        num_rows=10,
        size_bytes=100,
        row_groups=(
            RowGroupInfo(num_rows=4, first_row=0, total_byte_size=40, stats={"a": {"min": 1, "max": 4, "null_count": 0}}),
            RowGroupInfo(num_rows=6, first_row=4, total_byte_size=60, stats={"a": {"min": "x", "max": None}}),
        ),
    )


def commit(log: CommitLog, *actions, **kw):
    read = log.snapshot() if log.exists() else Snapshot()
    return log.commit(read=read, operation=Operation.APPEND, build=lambda s: list(actions), **kw).snapshot


def rich_table(root, interval: int = 100) -> CommitLog:
    """A table that has every kind of state: removed segments, DVs (inline and in files),
    lineage entries in all three states, a push with declared-but-not-uploaded output."""
    log = CommitLog(LocalFileIO(str(root)), check_files=False)
    commit(
        log,
        MetadataAction(
            table_id="t",
            table_schema={"a": "long", "nested": {"b": [1, 2]}},
            properties={"checkpointInterval": str(interval), "x": "ü"},
        ),
    )
    commit(log, *[AddSegment(segment=seg(s)) for s in ("a", "b", "c", "d")])
    commit(log, SetDeletionVector(segment_id="a", dv=DeletionVectorRef(cardinality=2, inline="AAAA")))
    commit(
        log, SetDeletionVector(segment_id="b", dv=DeletionVectorRef(cardinality=3, path="_mvtable/dv/1.dv", offset=8, size=30))
    )
    commit(log, LineageStart(entry_id="done", segments_from=("a",)), AddSegment(segment=seg("a2"), lineage_entry="done"))
    commit(log, LineageEnd(entry_id="done"))
    commit(log, LineageStart(entry_id="undone", segments_from=("b",)), AddSegment(segment=seg("b2"), lineage_entry="undone"))
    commit(log, LineageRevert(entry_id="undone"))
    commit(log, LineageStart(entry_id="running", segments_from=("c",), segments_to=("c2", "c3")), AddSegment(segment=seg("c2")))
    commit(log, RemoveSegment(segment_id="d"), AddSegment(segment=seg("e")))
    return log


def test_round_trip_is_exact(tmp_path) -> None:
    s = rich_table(tmp_path).snapshot()
    assert {e.state for e in s.lineage.values()} == {LineageState.COMPLETED, LineageState.REVERTED, LineageState.IN_PROGRESS}
    back = parse_checkpoint(checkpoint_bytes(s), source=SOURCE, expected_version=s.version)
    assert back == s
    assert back.visible_segment_ids() == s.visible_segment_ids() == ["b", "c", "a2", "e"]
    assert back.history == s.history and len(back.history) == s.version + 1
    # and it is stable: a second round trip gives the same bytes
    assert checkpoint_bytes(back) == checkpoint_bytes(s)


def test_parse_checks_the_version(tmp_path) -> None:
    s = rich_table(tmp_path).snapshot()
    with pytest.raises(CorruptMetadataError) as info:
        parse_checkpoint(checkpoint_bytes(s), source=SOURCE, expected_version=s.version + 1)
    assert info.value.path == SOURCE


# -- hostile checkpoints -----------------------------------------------------------------------
@pytest.fixture
def snap(tmp_path) -> Snapshot:
    return rich_table(tmp_path).snapshot()


def parse_error(data: bytes) -> CorruptMetadataError:
    with pytest.raises(CorruptMetadataError) as info:
        parse_checkpoint(data, source=SOURCE)
    assert info.value.path == SOURCE and info.value.message.startswith(SOURCE)
    return info.value


def rewrite(data: bytes, *, table=None, header=None) -> bytes:
    """The checkpoint ``data`` with its segment table and/or footer document changed by the
    given functions (written with the checkpoint's own writer settings)."""
    pf = pq.ParquetFile(pa.BufferReader(data))
    t = pf.read()
    doc = json.loads(pf.metadata.metadata[HEADER_KEY])
    if table is not None:
        t = table(t)
    if header is not None:
        header(doc)
    text = json.dumps(doc).encode()
    meta = {HEADER_KEY: text, HEADER_CRC_KEY: b"%08x" % zlib.crc32(text)}
    sealed = FILE_CRC_KEY in pf.metadata.metadata
    if sealed:
        meta[FILE_CRC_KEY] = b"00000000"
    t = t.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, compression="zstd", write_page_checksum=True)
    return seal_file_crc(sink.getvalue().to_pybytes()) if sealed else sink.getvalue().to_pybytes()


def set_cell(column: str, row: int, value):
    def change(t: pa.Table) -> pa.Table:
        values = t.column(column).to_pylist()
        values[row] = value
        i = t.schema.get_field_index(column)
        return t.set_column(i, t.schema.field(i), pa.array(values, t.schema.field(i).type))

    return change


def test_garbage_and_truncated(snap) -> None:
    data = checkpoint_bytes(snap)
    for bad in (b"", b"{", b"[]", b"null", b"\xff\xfe", b"[" * 100_000, b"PAR1", b"PAR1" + b"\x00" * 100):
        parse_error(bad)
    for cut in (1, 4, len(data) // 2, len(data) - 9, len(data) - 1):
        parse_error(data[:cut])


def test_a_flipped_byte_is_caught(snap) -> None:
    data = bytearray(checkpoint_bytes(snap))
    # page checksums cover the data pages, a CRC the footer document: a changed byte is an
    # error (or lands somewhere that does not matter), never a different snapshot
    for i in range(4, len(data), 7):
        mutated = bytearray(data)
        mutated[i] ^= 0x55
        try:
            back = parse_checkpoint(bytes(mutated), source=SOURCE)
        except CorruptMetadataError:
            continue
        assert back == snap, f"byte {i}: a changed file parsed into a different snapshot"


@pytest.mark.parametrize("fmt", [4, 1, None, "3"])
def test_unsupported_format(snap, fmt) -> None:
    err = parse_error(rewrite(checkpoint_bytes(snap), header=lambda d: d.update(format=fmt)))
    assert isinstance(err, UnsupportedFormatError)


@pytest.mark.parametrize(
    "change",
    [
        dict(header=lambda d: d.update(version="9")),
        dict(header=lambda d: d.update(version=True)),
        dict(header=lambda d: d.update(extra=1)),
        dict(header=lambda d: d.pop("lineage")),
        dict(header=lambda d: d["lineage"][0].update(state="DONE")),
        dict(header=lambda d: d["lineage"][0].update(segments_from=["ghost"])),  # unknown segment
        dict(header=lambda d: next(e for e in d["lineage"] if e["state"] == "COMPLETED").update(segments_to=["ghost"])),
        dict(header=lambda d: d["history"]["version"].append(99)),
        dict(header=lambda d: d["history"].update(operation=[1] * len(d["history"]["operation"]))),
        dict(table=set_cell("added_version", 0, -1)),
        dict(table=set_cell("removed_version", 0, -1)),
        dict(table=set_cell("num_rows", 0, 11)),  # row groups no longer cover it
        dict(table=set_cell("size_bytes", 1, -5)),
        dict(table=set_cell("id", 1, "a")),  # duplicate id
        dict(table=set_cell("id", 1, "not an id!")),
        dict(table=set_cell("lineage_entry", 1, "bad entry")),
        dict(table=set_cell("dv_path", 0, "_mvtable/dv/x.dv")),  # inline and path both set
        dict(table=set_cell("dv_inline", 1, "AAAA")),
        dict(table=set_cell("dv_cardinality", 2, 1)),  # a DV without a location
        dict(
            table=set_cell(
                "row_groups",
                0,
                [
                    {"num_rows": 4, "first_row": 1, "total_byte_size": 40, "stats": "{}"},
                    {"num_rows": 6, "first_row": 5, "total_byte_size": 60, "stats": "{}"},
                ],
            )
        ),
        dict(
            table=set_cell(
                "row_groups",
                0,
                [
                    {"num_rows": 4, "first_row": 0, "total_byte_size": 40, "stats": "{}"},
                    {"num_rows": 6, "first_row": 3, "total_byte_size": 60, "stats": "{}"},
                ],
            )
        ),
        dict(table=lambda t: t.drop_columns(["dv_size"])),
        dict(table=lambda t: t.append_column("extra", pa.array([1] * t.num_rows))),
        dict(table=lambda t: t.set_column(2, "num_rows", t.column("num_rows").cast(pa.int32()))),
    ],
)
def test_invalid_content(snap, change) -> None:
    parse_error(rewrite(checkpoint_bytes(snap), **change))


def test_unsafe_path(snap) -> None:
    data = checkpoint_bytes(snap)
    for bad in ("../../etc/passwd", "/etc/passwd", "data/../../x", "s3://elsewhere/x", "data//x", "~/x", "a\\b"):
        err = parse_error(rewrite(data, table=set_cell("path", 0, bad)))
        assert isinstance(err, UnsafePathError), bad
    err = parse_error(rewrite(data, table=set_cell("dv_path", 1, "s3://elsewhere/x.dv")))
    assert isinstance(err, UnsafePathError)


def test_statistics_are_parsed_when_first_used(snap) -> None:
    """A corrupt statistic does not stop planning without a filter; the first read of it
    raises the typed error naming the checkpoint file."""
    groups = [
        [
            {"num_rows": 4, "first_row": 0, "total_byte_size": 40, "stats": '{"a": {"min": 1, "nope": 2}}'},
            {"num_rows": 6, "first_row": 4, "total_byte_size": 60, "stats": "not json"},
        ]
    ]

    def change(t: pa.Table) -> pa.Table:
        values = t.column("row_groups").to_pylist()
        values[0] = groups[0]
        i = t.schema.get_field_index("row_groups")
        return t.set_column(i, t.schema.field(i), pa.array(values, t.schema.field(i).type))

    back = parse_checkpoint(rewrite(checkpoint_bytes(snap), table=change), source=SOURCE)
    first = next(iter(back.segments.values())).file
    for rg in first.row_groups:
        with pytest.raises(CorruptMetadataError) as info:
            _ = rg.stats
        assert info.value.path == SOURCE and "statistics" in info.value.problem
    # the rest parse on demand into the models commits use
    other = back.segments["b"].file.row_groups[0]
    assert other.stats["a"].min == 1 and other.stats["a"].null_count == 0


def test_a_checkpoint_that_is_not_parquet_is_corrupt(snap) -> None:
    """Format-1 JSON checkpoints were never released; any non-Parquet file is refused."""
    doc = json.dumps({"format": 1, "version": snap.version}).encode()
    for data in (doc, b"", b"PAR"):
        with pytest.raises(CorruptMetadataError, match="not a Parquet checkpoint"):
            parse_checkpoint(data, source=SOURCE)
        with pytest.raises(CorruptMetadataError, match="not a Parquet checkpoint"):
            read_checkpoint_summary(data, source=SOURCE)


# -- GC's summary ------------------------------------------------------------------------------
def test_summary_agrees_with_the_snapshot(snap) -> None:
    data = checkpoint_bytes(snap)
    for full_check in (False, True):
        summary = read_checkpoint_summary(data, source=SOURCE, expected_version=snap.version, full_check=full_check)
        assert (summary.version, summary.timestamp_ms, summary.properties) == (snap.version, snap.timestamp_ms, snap.properties)
        assert summary.history == snap.history
        assert summary.dvs == {sid: ref.path for sid, ref in snap.dvs.items()} == {"a": None, "b": "_mvtable/dv/1.dv"}
        assert summary.dv_paths == {"_mvtable/dv/1.dv"}


def test_summary_checks_what_it_reads_and_full_check_the_rest(snap) -> None:
    data = checkpoint_bytes(snap)
    with pytest.raises(UnsafePathError):
        read_checkpoint_summary(rewrite(data, table=set_cell("dv_path", 1, "../x.dv")), source=SOURCE)
    with pytest.raises(CorruptMetadataError):
        read_checkpoint_summary(data, source=SOURCE, expected_version=snap.version + 1)
    bad_rows = rewrite(data, table=set_cell("num_rows", 0, 11))
    read_checkpoint_summary(bad_rows, source=SOURCE)  # a column GC does not read
    with pytest.raises(CorruptMetadataError):
        read_checkpoint_summary(bad_rows, source=SOURCE, full_check=True)
    ghost = rewrite(data, header=lambda d: d["lineage"][0].update(segments_from=["ghost"]))
    with pytest.raises(CorruptMetadataError):
        read_checkpoint_summary(ghost, source=SOURCE, full_check=True)


def test_descriptors_pickle_and_compare_with_segment_files(snap) -> None:
    back = parse_checkpoint(checkpoint_bytes(snap), source=SOURCE)
    f = back.segments["a"].file
    assert isinstance(f, SegmentDescriptor)
    again = pickle.loads(pickle.dumps(f))
    assert again == f == seg("a") and seg("a") == f
    assert f.to_segment_file(id="a9") == seg("a").model_copy(update={"id": "a9"})
    assert f.row_groups[1].stats["a"].min == "x"


# -- the log's use of checkpoints ------------------------------------------------------------
def log_with_checkpoints(root) -> tuple[CommitLog, Snapshot]:
    log = rich_table(root, interval=3)  # versions 0..9, checkpoints at 3, 6, 9
    commit(log, AddSegment(segment=seg("f")))  # version 10
    assert log.listing().checkpoints == [3, 6, 9]
    return log, log.snapshot()


def test_corrupt_checkpoint_falls_back_to_the_commits(tmp_path, caplog) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), b'{"format": 1, "version": 9, "trunc')
    process_snapshots().clear()  # read as a fresh process would: none of its snapshots kept
    with caplog.at_level(logging.WARNING, logger="mvtable.lineage"):
        assert log.snapshot() == expected
    assert "checkpoint 9" in caplog.text
    log.io.write(checkpoint_path(6), b"\x00" * 10)
    log.io.write(checkpoint_path(3), b"")
    assert log.snapshot() == expected  # all checkpoints bad: the commits from 0 are all there
    assert log.snapshot(7) == CommitLog(log.io).snapshot(7)


def test_corrupt_checkpoint_falls_back_to_an_older_checkpoint(tmp_path) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), b"not json")
    log.io.delete([commit_path(v) for v in range(0, 6)])  # the log before checkpoint 6 was collected
    assert log.snapshot() == expected
    assert log.snapshot(8).version == 8


def test_corrupt_checkpoint_without_commits_is_a_typed_error(tmp_path) -> None:
    log, _ = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), b"not json")
    log.io.delete([checkpoint_path(3), checkpoint_path(6)])
    log.io.delete([commit_path(v) for v in range(0, 9)])
    process_snapshots().clear()  # read as a fresh process would: none of its snapshots kept
    with pytest.raises(CorruptMetadataError) as info:
        log.snapshot()
    assert info.value.path.endswith("00000000000000000009.checkpoint.parquet")
    # a version that needs no checkpoint is unaffected, and one that is gone says so
    with pytest.raises(VersionNotFoundError):
        log.snapshot(5)


def test_checkpoint_of_another_version_is_not_used(tmp_path) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), log.io.read(checkpoint_path(6)))  # a misplaced file
    process_snapshots().clear()  # read as a fresh process would: none of its snapshots kept
    assert log.snapshot() == expected
    log.io.delete([commit_path(v) for v in range(0, 10)])
    log.io.delete([checkpoint_path(3), checkpoint_path(6)])
    process_snapshots().clear()
    with pytest.raises(CorruptMetadataError):
        log.snapshot()


def test_missing_checkpoint_is_only_an_optimisation_lost(tmp_path) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.delete([checkpoint_path(c) for c in (3, 6, 9)])
    assert log.snapshot() == expected


def test_listing_needs_only_names(tmp_path) -> None:
    log, _ = log_with_checkpoints(tmp_path)
    (tmp_path / "_mvtable" / "log" / "00000000000000000011.json.tmp").write_bytes(b"")
    (tmp_path / "_mvtable" / "log" / "0000000000000000001\u00b2.json").write_bytes(b"")
    (tmp_path / "_mvtable" / "log" / "00000000000000000012.json").mkdir()
    listing = log.listing()
    assert listing.commits == list(range(11)) and listing.checkpoints == [3, 6, 9]


def test_a_changed_footer_document_is_caught(snap) -> None:
    data = checkpoint_bytes(snap)
    pf = pq.ParquetFile(pa.BufferReader(data))
    t = pf.read().replace_schema_metadata(
        {**pf.metadata.metadata, HEADER_KEY: pf.metadata.metadata[HEADER_KEY].replace(b"100", b"900")}
    )
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    assert "checksum" in parse_error(sink.getvalue().to_pybytes()).problem


def test_commit_summary_agrees_with_parse_commit(tmp_path) -> None:
    from mvtable.lineage.actions import parse_commit, seal
    from mvtable.lineage.summary import parse_commit_summary as commit_dv_paths

    log = rich_table(tmp_path)
    for v in range(log.latest_version() + 1):
        data = log.io.read(commit_path(v))
        full = parse_commit(data, source="c")
        light = commit_dv_paths(data, source="c", expected_version=v)
        assert (light.version, light.timestamp_ms, light.operation) == (full.version, full.timestamp_ms, full.operation)
        assert light.set_dvs == tuple((a.segment_id, a.dv.path) for a in full.actions if a.kind == "dv")
        assert light.removed == tuple(a.segment_id for a in full.actions if a.kind == "remove")
    doc = json.loads(log.io.read(commit_path(3)))
    del doc["crc32"]
    doc["actions"][0]["dv"]["path"] = "../../x.dv"
    with pytest.raises(UnsafePathError):
        commit_dv_paths(seal(json.dumps(doc).encode()), source="c")
    for bad in (b"", b"[]", b'{"format": 2}', b'{"format": 1, "version": "3"}'):
        with pytest.raises(CorruptMetadataError):
            commit_dv_paths(bad, source="c")
