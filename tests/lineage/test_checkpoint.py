"""Checkpoints: faithful round trip, typed errors for bad files, and the log's fallback to
older checkpoints or the commits when a checkpoint is unreadable."""

from __future__ import annotations

import json
import logging

import pytest

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
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.errors import CorruptMetadataError, UnsafePathError, UnsupportedFormatError, VersionNotFoundError
from mvtable.lineage.io import LocalFileIO
from mvtable.lineage.log import CommitLog, checkpoint_path, commit_path
from mvtable.lineage.snapshot import COMPLETED, IN_PROGRESS, REVERTED, Snapshot

SOURCE = "/t/_mvtable/log/00000000000000000009.checkpoint.json"


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
    return log.commit(read=read, operation="TEST", build=lambda s: list(actions), **kw).snapshot


def rich_table(root, interval: int = 100) -> CommitLog:
    """A table that has every kind of state: removed segments, DVs (inline and in files),
    lineage entries in all three states, a push with declared-but-not-uploaded output."""
    log = CommitLog(LocalFileIO(str(root)))
    commit(log, MetadataAction(table_id="t", table_schema={"a": "long", "nested": {"b": [1, 2]}}, properties={"checkpointInterval": str(interval), "x": "ü"}))
    commit(log, *[AddSegment(segment=seg(s)) for s in ("a", "b", "c", "d")])
    commit(log, SetDeletionVector(segment_id="a", dv=DeletionVectorRef(cardinality=2, inline="AAAA")))
    commit(log, SetDeletionVector(segment_id="b", dv=DeletionVectorRef(cardinality=3, path="_mvtable/dv/1.dv", offset=8, size=30)))
    commit(log, LineageStart(entry_id="done", segments_from=("a",)), AddSegment(segment=seg("a2"), lineage_entry="done"))
    commit(log, LineageEnd(entry_id="done"))
    commit(log, LineageStart(entry_id="undone", segments_from=("b",)), AddSegment(segment=seg("b2"), lineage_entry="undone"))
    commit(log, LineageRevert(entry_id="undone"))
    commit(log, LineageStart(entry_id="running", segments_from=("c",), segments_to=("c2", "c3")), AddSegment(segment=seg("c2")))
    commit(log, RemoveSegment(segment_id="d"), AddSegment(segment=seg("e")))
    return log


def test_round_trip_is_exact(tmp_path) -> None:
    s = rich_table(tmp_path).snapshot()
    assert {e.state for e in s.lineage.values()} == {COMPLETED, REVERTED, IN_PROGRESS}
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
def doc(tmp_path) -> dict:
    return json.loads(checkpoint_bytes(rich_table(tmp_path).snapshot()))


def parse_error(data: bytes) -> CorruptMetadataError:
    with pytest.raises(CorruptMetadataError) as info:
        parse_checkpoint(data, source=SOURCE)
    assert info.value.path == SOURCE and str(info.value).startswith(SOURCE)
    return info.value


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"[]", b"null", b"\xff\xfe", b"[" * 100_000],
    ids=["empty", "open-brace", "array", "null", "binary", "deep-nesting"],
)
def test_garbage(data: bytes) -> None:
    parse_error(data)


def test_truncated(doc) -> None:
    data = json.dumps(doc).encode()
    for cut in (1, len(data) // 2, len(data) - 1):
        parse_error(data[:cut])


@pytest.mark.parametrize("fmt", [2, None, "1"])
def test_unsupported_format(doc, fmt) -> None:
    doc["format"] = fmt
    assert isinstance(parse_error(json.dumps(doc).encode()), UnsupportedFormatError)


def _mutated(doc: dict, fn) -> bytes:
    fn(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(version="9"),
        lambda d: d.update(version=True),
        lambda d: d["segments"][0].update(added_version="1"),
        lambda d: d["segments"][0].update(removed_version=-1),
        lambda d: d["segments"][0]["file"].update(num_rows=11),  # row groups no longer cover it
        lambda d: d["lineage"][0].update(state="DONE"),
        lambda d: d["lineage"][0].update(segments_from=["ghost"]),  # unknown segment
        lambda d: next(e for e in d["lineage"] if e["state"] == "COMPLETED").update(segments_to=["ghost"]),
        lambda d: d["dvs"].update(ghost={"cardinality": 1, "inline": "AA"}),
        lambda d: d["history"].append([1, 2]),
        lambda d: d.pop("segments"),
        lambda d: d.update(extra=1),
    ],
)
def test_invalid_content(doc, mutate) -> None:
    parse_error(_mutated(doc, mutate))


def test_unsafe_path(doc) -> None:
    err = parse_error(_mutated(doc, lambda d: d["segments"][0]["file"].update(path="../../etc/passwd")))
    assert isinstance(err, UnsafePathError)
    err = parse_error(_mutated(doc, lambda d: d["dvs"]["b"].update(path="s3://elsewhere/x.dv")))
    assert isinstance(err, UnsafePathError)


# -- the log's use of checkpoints ------------------------------------------------------------
def log_with_checkpoints(root) -> tuple[CommitLog, Snapshot]:
    log = rich_table(root, interval=3)  # versions 0..9, checkpoints at 3, 6, 9
    commit(log, AddSegment(segment=seg("f")))  # version 10
    assert log.listing().checkpoints == [3, 6, 9]
    return log, log.snapshot()


def test_corrupt_checkpoint_falls_back_to_the_commits(tmp_path, caplog) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), b'{"format": 1, "version": 9, "trunc')
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
    with pytest.raises(CorruptMetadataError) as info:
        log.snapshot()
    assert info.value.path.endswith("00000000000000000009.checkpoint.json")
    # a version that needs no checkpoint is unaffected, and one that is gone says so
    with pytest.raises(VersionNotFoundError):
        log.snapshot(5)


def test_checkpoint_of_another_version_is_not_used(tmp_path) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.write(checkpoint_path(9), log.io.read(checkpoint_path(6)))  # a misplaced file
    assert log.snapshot() == expected
    log.io.delete([commit_path(v) for v in range(0, 10)])
    log.io.delete([checkpoint_path(3), checkpoint_path(6)])
    with pytest.raises(CorruptMetadataError):
        log.snapshot()


def test_missing_checkpoint_is_only_an_optimisation_lost(tmp_path) -> None:
    log, expected = log_with_checkpoints(tmp_path)
    log.io.delete([checkpoint_path(c) for c in (3, 6, 9)])
    assert log.snapshot() == expected
