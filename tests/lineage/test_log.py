"""CommitLog on local disk: listing, time travel, timestamps, checkpoints, the commit loop."""

from __future__ import annotations

import os
import time

import pytest

from mvtable.errors import (
    CommitConflictError,
    ConcurrentLineageError,
    ConcurrentReplaceError,
    CorruptMetadataError,
    InvalidLineageTransitionError,
    LogGapError,
    SegmentInUseError,
    TableNotFoundError,
    VersionNotFoundError,
)
from mvtable.lineage.actions import AddSegment, LineageStart, MetadataAction, RemoveSegment, SegmentFile
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import LOG_DIR, CommitLog, checkpoint_path, commit_path
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.snapshot_cache import process_snapshots
from mvtable.storage import LocalFileIO


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)


def new_log(root, **properties: str) -> CommitLog:
    log = CommitLog(LocalFileIO(str(root)), check_files=False)
    log.commit(
        read=Snapshot(),
        operation=Operation.CREATE,
        build=lambda s: [MetadataAction(table_id="t", table_schema={}, properties=properties)],
    )
    return log


def append(log: CommitLog, *sids: str, **kw):
    return log.commit(
        read=log.snapshot(), operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg(x)) for x in sids], **kw
    )


def log_files(log: CommitLog) -> list[str]:
    return sorted(f.name for f in log.io.list(LOG_DIR))


# -- existence -------------------------------------------------------------------------------
def test_table_not_found(tmp_path) -> None:
    for root in (tmp_path / "missing", tmp_path):
        log = CommitLog(LocalFileIO(str(root)), check_files=False)
        assert not log.exists() and log.latest_version() == -1
        with pytest.raises(TableNotFoundError):
            log.snapshot()
        with pytest.raises(TableNotFoundError):
            log.snapshot(0)
    (tmp_path / "_mvtable" / "log").mkdir(parents=True)
    (tmp_path / "_mvtable" / "log" / "README.txt").write_text("not a table")
    with pytest.raises(TableNotFoundError):
        CommitLog(LocalFileIO(str(tmp_path))).snapshot()


def test_create_and_read_back(tmp_path) -> None:
    log = new_log(tmp_path, k="v")
    assert log.exists() and log.latest_version() == 0
    s = log.snapshot()
    assert s.version == 0 and s.table_id == "t" and s.properties == {"k": "v"}
    assert log_files(log) == ["00000000000000000000.json"]
    c = log.read_commit(0)
    assert c.operation == "CREATE" and c.read_version == -1 and "txn" in c.parameters and c.writer.startswith("mvtable ")


# -- time travel -----------------------------------------------------------------------------
def test_snapshot_at_every_version(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    append(log, "b", "c")
    log.commit(
        read=log.snapshot(),
        operation=Operation.OVERWRITE,
        build=lambda s: [RemoveSegment(segment_id="a"), RemoveSegment(segment_id="b"), AddSegment(segment=seg("d"))],
    )
    expected = {0: [], 1: ["a"], 2: ["a", "b", "c"], 3: ["c", "d"]}
    for v, visible in expected.items():
        s = log.snapshot(v)
        assert s.version == v and s.visible_segment_ids() == visible
    assert log.snapshot().version == 3


@pytest.mark.parametrize("version", [-1, -2, -100, 4, 5, 10**6])
def test_versions_that_do_not_exist(tmp_path, version: int) -> None:
    log = new_log(tmp_path)
    for x in "abc":
        append(log, x)
    with pytest.raises(VersionNotFoundError):
        log.snapshot(version)


def test_missing_commit_file(tmp_path) -> None:
    log = new_log(tmp_path)
    for x in "abcd":
        append(log, x)
    os.unlink(log.io._p(commit_path(2)))
    process_snapshots().clear()  # read as a fresh process would: none of its snapshots kept
    with pytest.raises(VersionNotFoundError):
        log.read_commit(2)
    # not garbage collection (GC never leaves commit 1 and 3 around a missing 2): a gap, named
    for version in (None, 3):
        with pytest.raises(LogGapError, match=r"00000000000000000002\.json: commit files of versions 2\.\.2 are missing") as err:
            log.snapshot(version)
        assert err.value.missing == (2, 2) and "Restore them from a backup" in str(err.value)
    assert log.snapshot(1).visible_segment_ids() == ["a"]


def test_corrupt_commit_is_a_typed_error_that_names_the_file(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    append(log, "b")
    log.io.write(commit_path(2), b'{"format": 1, "version": 2, ')
    with pytest.raises(CorruptMetadataError) as info:
        log.snapshot()
    assert info.value.path == f"{log.io.uri}/{commit_path(2)}"
    assert log.snapshot(1).visible_segment_ids() == ["a"]


def test_commit_that_cannot_be_applied_is_corrupt_metadata(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    bad = log.read_commit(1).model_copy(update={"version": 2})  # adds "a" a second time
    log.io.write(commit_path(2), bad.to_json_bytes())
    with pytest.raises(CorruptMetadataError):
        log.snapshot()


# -- timestamps ------------------------------------------------------------------------------
def test_timestamps_strictly_increase_even_when_the_clock_does_not(tmp_path, monkeypatch) -> None:
    log = new_log(tmp_path)
    for i in range(5):  # the real clock, commits within the same millisecond
        append(log, f"r{i}")
    now = [5_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    for i in range(10):
        now[0] = 5_000.0 if i < 5 else 4_000.0  # frozen, then going backwards (an NTP step)
        append(log, f"f{i}")
    monkeypatch.undo()
    stamps = [log.read_commit(v).timestamp_ms for v in range(log.latest_version() + 1)]
    assert all(a < b for a, b in zip(stamps, stamps[1:])), stamps
    assert [h.timestamp_ms for h in log.snapshot().history] == stamps


def test_version_at(tmp_path, monkeypatch) -> None:
    now = [1_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    log = new_log(tmp_path)  # at 1_000_000 ms
    for i, t in enumerate((2_000.0, 3_000.0, 3_000.0, 9_000.0)):  # v1..v4; v3 is bumped to 3_000_001
        now[0] = t
        append(log, f"s{i}")
    monkeypatch.undo()
    assert [log.read_commit(v).timestamp_ms for v in range(5)] == [1_000_000, 2_000_000, 3_000_000, 3_000_001, 9_000_000]
    assert log.version_at(1_000_000) == 0
    assert log.version_at(1_999_999) == 0
    assert log.version_at(2_000_000) == 1
    assert log.version_at(3_000_000) == 2
    assert log.version_at(3_000_001) == 3
    assert log.version_at(8_999_999) == 3
    assert log.version_at(10**13) == 4
    with pytest.raises(VersionNotFoundError):
        log.version_at(999_999)
    with pytest.raises(VersionNotFoundError):
        log.version_at(-1)


# -- checkpoints -----------------------------------------------------------------------------
def test_checkpoint_every_interval_from_the_table_property(tmp_path) -> None:
    log = new_log(tmp_path, checkpointInterval="3")
    for i in range(1, 11):
        append(log, f"s{i}")
    assert log.listing().checkpoints == [3, 6, 9]
    assert log.listing().commits == list(range(11))
    assert log.read_checkpoint(9) == log.snapshot(9)


def test_checkpoint_interval_argument_and_default(tmp_path) -> None:
    log = new_log(tmp_path)
    for i in range(1, 13):
        append(log, f"s{i}")
    assert log.listing().checkpoints == [10]  # checkpointInterval in defaults.toml
    log2 = new_log(tmp_path / "t2")
    for i in range(1, 9):
        append(log2, f"s{i}", checkpoint_interval=4)
    assert log2.listing().checkpoints == [4, 8]


def test_bad_checkpoint_interval_property_does_not_fail_a_landed_commit(tmp_path) -> None:
    log = new_log(tmp_path, checkpointInterval="often")
    for i in range(1, 11):
        result = append(log, f"s{i}")  # used to raise ValueError after the commit had landed
        assert result.commit.version == i
    assert log.listing().checkpoints == [10]


def test_snapshot_reads_the_newest_checkpoint_and_the_commits_after_it(tmp_path) -> None:
    log = new_log(tmp_path, checkpointInterval="3")
    for i in range(1, 11):
        append(log, f"s{i}")
    expected = log.snapshot()
    process_snapshots().clear()  # read as a fresh process would: none of its snapshots kept

    reads: list[str] = []
    real_read = log.io.read
    log.io.read = lambda path: reads.append(path) or real_read(path)
    assert log.snapshot() == expected
    assert reads == [checkpoint_path(9), commit_path(10)]
    del log.io.read

    # proof without spying: the log before the newest checkpoint can go entirely
    log.io.delete([commit_path(v) for v in range(9)] + [checkpoint_path(3), checkpoint_path(6)])
    fresh = CommitLog(LocalFileIO(str(tmp_path)), check_files=False)
    assert fresh.snapshot() == expected
    assert fresh.snapshot(9).visible_segment_ids() == [f"s{i}" for i in range(1, 10)]
    with pytest.raises(VersionNotFoundError):
        fresh.snapshot(8)
    assert fresh.version_at(10**15) == 10  # history survives in the checkpoint


def test_checkpoint_only_versions_are_listed(tmp_path) -> None:
    log = new_log(tmp_path, checkpointInterval="3")
    for i in range(1, 4):
        append(log, f"s{i}")
    log.io.delete([commit_path(v) for v in range(4)])
    assert log.listing().commits == [] and log.latest_version() == 3
    assert log.snapshot().visible_segment_ids() == ["s1", "s2", "s3"]
    append(log, "s4")
    assert log.snapshot().version == 4


# -- garbage ---------------------------------------------------------------------------------
GARBAGE = [
    "README.txt",
    ".DS_Store",
    "00000000000000000005.json.tmp",
    ".00000000000000000005.json.3f2a.tmp",
    "00000000000000000005.json.bak",
    "0000000000000000005.json",
    "000000000000000000005.json",
    "0000000000000000000x.json",
    "-0000000000000000005.json",
    "00000000000000000009.checkpoint.json.partial",
    "0000000000000000009.checkpoint.json",
    "abcdefghijabcdefghij.checkpoint.json",
    "0000000000000000000\u00b2.json",  # "²".isdigit() is True, int("²") fails
    "\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0665.json",
    "00000000000000000005.JSON",
]


def test_garbage_in_the_log_folder_is_ignored(tmp_path) -> None:
    log = new_log(tmp_path, checkpointInterval="2")
    for i in range(1, 4):
        append(log, f"s{i}")
    expected = log.snapshot()
    folder = tmp_path / "_mvtable" / "log"
    for name in GARBAGE:
        (folder / name).write_bytes(b"garbage")
    (folder / "00000000000000000007.json").mkdir()  # a folder with a commit's name
    listing = log.listing()
    assert listing.commits == [0, 1, 2, 3] and listing.checkpoints == [2]
    assert log.snapshot() == expected
    result = append(log, "s4")
    assert result.commit.version == 4


# -- the commit loop -------------------------------------------------------------------------
def test_refused_transition_writes_nothing(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    before = log_files(log)
    with pytest.raises(InvalidLineageTransitionError):
        log.commit(
            read=log.snapshot(),
            operation=Operation.PUSH_START,
            build=lambda s: [LineageStart(entry_id="e", segments_from=("nope",))],
        )
    log.commit(
        read=log.snapshot(), operation=Operation.PUSH_START, build=lambda s: [LineageStart(entry_id="e", segments_from=("a",))]
    )
    with pytest.raises(SegmentInUseError):
        log.commit(read=log.snapshot(), operation=Operation.DELETE, build=lambda s: [RemoveSegment(segment_id="a")])
    assert len(log_files(log)) == len(before) + 1


def test_stale_blind_append_retries_and_lands(tmp_path) -> None:
    log = new_log(tmp_path)
    stale = log.snapshot()
    append(log, "a")
    append(log, "b")
    result = log.commit(read=stale, operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg("c"))])
    assert result.commit.version == 3 and result.commit.read_version == 0 and result.attempts == 2
    assert result.snapshot.visible_segment_ids() == ["a", "b", "c"]
    assert result.snapshot == log.snapshot()


def test_validation_that_fails_only_on_a_newer_snapshot_is_a_conflict(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    stale = log.snapshot()
    log.commit(read=log.snapshot(), operation=Operation.DELETE, build=lambda s: [RemoveSegment(segment_id="a")])
    with pytest.raises(ConcurrentLineageError) as info:
        log.commit(read=stale, operation=Operation.DELETE, build=lambda s: [RemoveSegment(segment_id="a")])
    assert isinstance(info.value, CommitConflictError)
    assert log.latest_version() == 2


def test_build_raising_a_conflict_writes_nothing(tmp_path) -> None:
    log = new_log(tmp_path)
    append(log, "a")
    stale = log.snapshot()
    append(log, "b")
    calls = []

    def build(s: Snapshot):
        calls.append(s.version)
        if s.version != stale.version:
            raise ConcurrentReplaceError("what I read changed")
        return [AddSegment(segment=seg("c"))]

    with pytest.raises(ConcurrentReplaceError):
        log.commit(read=stale, operation=Operation.OVERWRITE, build=build)
    assert calls == [1, 2] and log.latest_version() == 2


def test_after_commit_sees_each_landed_commit_once_after_it_is_durable(tmp_path) -> None:
    seen: list[tuple[int, int, bool]] = []

    def after(log: CommitLog, result) -> None:
        seen.append((result.commit.version, result.attempts, os.path.exists(tmp_path / commit_path(result.commit.version))))

    log = new_log(tmp_path)
    watched = CommitLog(LocalFileIO(str(tmp_path)), after_commit=after, check_files=False)
    stale = watched.snapshot()
    append(log, "a")  # another writer's log: not watched
    append(watched, "b")  # a lost race, then landed
    with pytest.raises(InvalidLineageTransitionError):  # refused: nothing landed, nothing seen
        watched.commit(read=stale, operation=Operation.DELETE, build=lambda s: [RemoveSegment(segment_id="x")])
    assert seen == [(2, 1, True)]
    result = watched.commit(read=stale, operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg("c"))])
    assert seen == [(2, 1, True), (3, 2, True)] and result.attempts == 2


def test_catch_up(tmp_path) -> None:
    log = new_log(tmp_path)
    old = log.snapshot()
    append(log, "a")
    append(log, "b")
    assert log.catch_up(old) == log.snapshot()
    assert old.version == 0  # untouched
    latest = log.snapshot()
    assert log.catch_up(latest) is latest


def test_catch_up_reads_forward_without_listing_the_log(tmp_path) -> None:
    log = new_log(tmp_path)
    old = log.snapshot()
    append(log, "a")
    append(log, "b")

    def no_listing(folder: str) -> list[str]:
        raise AssertionError(f"catch_up listed {folder}")

    log.io.list_names = no_listing  # type: ignore[method-assign]
    caught_up = log.catch_up(old)
    assert caught_up.version == 2 and set(caught_up.segments) == {"a", "b"}
    assert log.catch_up(caught_up) is caught_up


def test_catch_up_after_gc_cut_the_log_past_the_snapshot_reads_it_afresh(tmp_path) -> None:
    log = new_log(tmp_path)
    old = log.snapshot()
    for sid in "abc":
        append(log, sid)
    log.write_checkpoint(log.snapshot())
    log.io.delete([commit_path(v) for v in range(0, 4)])  # as GC does: oldest first, up to a checkpoint
    assert not log.io.exists(commit_path(old.version + 1))
    caught_up = log.catch_up(old)
    assert caught_up.version == 3 and set(caught_up.segments) == {"a", "b", "c"}


def test_a_commit_collected_while_the_snapshot_is_built_lists_the_log_again(tmp_path) -> None:
    """Writers went on, a newer checkpoint landed and GC cut the log to it between the listing
    and the read of a commit it showed: the snapshot is built again from a fresh listing."""
    log = new_log(tmp_path, checkpointInterval="3")
    for i in range(1, 8):
        append(log, f"s{i}")
    stale = log.listing()  # versions 0..7, checkpoints 3 and 6
    append(log, "s8")
    append(log, "s9")  # checkpoint 9
    assert 9 in log.listing().checkpoints
    log.io.delete([commit_path(v) for v in range(0, 9)])  # GC down to checkpoint 9
    process_snapshots().clear()
    newest = log.snapshot(listing=stale)
    assert newest.version == 9 and newest.visible_segment_ids() == [f"s{i}" for i in range(1, 10)]
    with pytest.raises(VersionNotFoundError, match="can no longer be read"):
        log.snapshot(7, listing=stale)  # an old version: why it is gone, from the fresh listing
