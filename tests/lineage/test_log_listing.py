"""Versions missing from a listing of the log: a listing that raced a writer is never read as
garbage collection, GC's own cut still is, and what really is wrong with a log (a gap, a stray
file, an undecodable commit, a directory where a commit belongs) is a typed error naming it.

The pure rules (``log_listing``) are fed listings directly; the I/O (``CommitLog``) runs on
local disk through ``RacyLocalFileIO``, the real local store whose listings leave out given
files a given number of times, as a listing taken while those files were linked in does."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.compaction import compact
from mvtable.errors import (
    CorruptCommitError,
    CorruptMetadataError,
    LogGapError,
    StrayLogFileError,
    UnsupportedFormatError,
    VersionNotFoundError,
)
from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile, seal, unseal
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import LOG_DIR, CommitLog, checkpoint_path, commit_path
from mvtable.lineage.log_listing import Listing, MissingKind, explain_missing, missing_commits, runs, unsettled_runs
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import LocalFileIO


class RacyLocalFileIO(LocalFileIO):
    """Local disk whose next ``times`` listings leave out the names in ``hide``."""

    def __init__(self, root: str, *, hide: set[str], times: int) -> None:
        super().__init__(root)
        self.hide = hide
        self.times = times
        self.listings = 0

    def list_names(self, folder: str) -> list[str]:
        names = super().list_names(folder)
        self.listings += 1
        if self.times > 0 and folder == LOG_DIR:
            self.times -= 1
            names = [n for n in names if n not in self.hide]
        return names


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)


def build_log(root, n: int, *, checkpoint_every: int = 1000) -> CommitLog:
    """Versions 0 (create) to ``n`` (one segment each), a checkpoint every ``checkpoint_every``."""
    log = CommitLog(LocalFileIO(str(root)), check_files=False)
    snap = log.commit(
        read=Snapshot(),
        operation=Operation.CREATE,
        build=lambda s: [MetadataAction(table_id="t", table_schema={}, properties={})],
    ).snapshot
    for i in range(1, n + 1):
        build = lambda s, i=i: [AddSegment(segment=seg(f"s{i}"))]
        snap = log.commit(read=snap, operation=Operation.APPEND, build=build, checkpoint_interval=checkpoint_every).snapshot
    return log


def name(version: int) -> str:
    return commit_path(version).rsplit("/", 1)[1]


# -- the pure rules --------------------------------------------------------------------------
def test_a_listing_with_a_gap_is_not_garbage_collection() -> None:
    """What the race looks like: version 10 listed, 9 not (no checkpoint after it)."""
    racy = Listing(commits=[*range(9), 10], checkpoints=[5])
    assert unsettled_runs(racy) == [(9, 9)]
    assert missing_commits(racy, 6, 10) == [9]
    assert explain_missing(racy, [9]) is MissingKind.GAP
    # the newest commit missing below a listed one, with no checkpoint at all
    assert explain_missing(Listing([0, 1, 3], []), [2]) is MissingKind.GAP
    assert unsettled_runs(Listing([0, 1, 3], [])) == [(2, 2)]
    # a fresh table's first commits missed: nothing stands in for versions 0..2
    assert unsettled_runs(Listing([3, 4], [])) == [(0, 2)]
    assert explain_missing(Listing([3, 4], []), [0, 1, 2]) is MissingKind.GAP
    # missing versions with older commits listed: GC removes the oldest first, never these
    assert explain_missing(Listing([*range(15), *range(20, 30)], [20]), [15, 16, 17]) is MissingKind.GAP


def test_what_garbage_collection_leaves_is_settled_and_collected() -> None:
    cut = Listing(commits=list(range(11, 31)), checkpoints=[10, 20])
    assert unsettled_runs(cut) == []
    assert explain_missing(cut, [0, 1, 2, 3]) is MissingKind.COLLECTED
    assert missing_commits(cut, 0, 3) == [0, 1, 2, 3]
    # GC keeps the checkpoint it cut at, and may have removed that version's commit too
    assert unsettled_runs(Listing(commits=list(range(21, 31)), checkpoints=[20])) == []
    assert explain_missing(Listing(list(range(21, 31)), [20]), [20]) is MissingKind.COLLECTED
    # a whole log and an empty one
    assert unsettled_runs(Listing(list(range(50)), [10, 20])) == []
    assert unsettled_runs(Listing([], [])) == []
    assert missing_commits(Listing(list(range(50)), []), 3, 49) == []


def test_runs() -> None:
    assert runs([]) == []
    assert runs([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 7), (9, 10)]


# -- a listing that raced a writer, on disk ---------------------------------------------------
@pytest.mark.parametrize("times", [1, 2, 100])
def test_a_racing_listing_does_not_fail_reads(tmp_path, times: int) -> None:
    """The newest commit's predecessor is left out of ``times`` listings in a row: a second
    listing sees it, or (when every listing misses it) a direct read does."""
    build_log(tmp_path, 12, checkpoint_every=5)
    io = RacyLocalFileIO(str(tmp_path), hide={name(11)}, times=times)
    log = CommitLog(io, check_files=False)
    assert log.raw_listing().commits == [*range(11), 12]  # what the old code read as "11 was collected"
    listing = log.listing()
    assert listing.commits == list(range(13)) and listing.gaps == ()
    for version in (None, 12, 11):
        io.times = times
        snap = log.snapshot(version)
        assert snap.version == (12 if version is None else version)
        assert snap.visible_segment_ids() == [f"s{i}" for i in range(1, snap.version + 1)]


def test_a_stale_listing_handed_in_is_checked(tmp_path) -> None:
    """A caller's listing that missed commits (taken while they were linked) still rebuilds."""
    log = build_log(tmp_path, 12, checkpoint_every=5)
    stale = Listing(commits=[*range(9), 12], checkpoints=[5])
    assert log.snapshot(12, listing=stale).version == 12
    assert log.snapshot(listing=stale).visible_segment_ids()[-1] == "s12"


def test_first_commits_of_a_new_table_missed(tmp_path) -> None:
    build_log(tmp_path, 3)
    io = RacyLocalFileIO(str(tmp_path), hide={name(0), name(1)}, times=100)
    assert CommitLog(io).snapshot().version == 3
    assert CommitLog(io).snapshot(0).version == 0


def test_commits_missed_below_a_checkpoint_are_read_directly(tmp_path) -> None:
    """Versions 0..4 left out of every listing look like a log GC cut at checkpoint 5; a
    read of version 3 finds them on a direct read instead of calling them collected."""
    build_log(tmp_path, 12, checkpoint_every=5)
    io = RacyLocalFileIO(str(tmp_path), hide={name(v) for v in range(5)}, times=1000)
    log = CommitLog(io, check_files=False)
    assert unsettled_runs(log.listing()) == [] and log.listing().commits[0] == 5
    assert log.snapshot(3).visible_segment_ids() == ["s1", "s2", "s3"]
    assert log.snapshot().version == 12


def test_compaction_and_table_reads_beside_a_racing_listing(tmp_path) -> None:
    """``Table`` opens, appends and ``compact()`` all go through the settled listing."""
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties={"checkpointInterval": "5"})
    for i in range(12):
        t.append(pa.table({"id": [i]}))
    racy = RacyLocalFileIO(t.io.uri, hide={name(12)}, times=1000)
    t.io, t.commit_log = racy, CommitLog(racy)
    assert t.snapshot().version == 12
    report = compact(racy, CommitLog(racy), min_input_files=2)
    assert report.commits
    racy.hide = {name(CommitLog(racy).latest_version() - 1)}
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(12))
    t.append(pa.table({"id": [12]}))
    assert sorted(Table.open(t.uri).to_arrow().column("id").to_pylist()) == list(range(13))


def test_collected_versions_are_still_reported_as_collected(tmp_path) -> None:
    log = build_log(tmp_path, 25, checkpoint_every=10)
    log.io.delete([commit_path(v) for v in range(0, 21)] + [checkpoint_path(10)])
    with pytest.raises(
        VersionNotFoundError, match="version 5 can no longer be read: log files from version 0 were garbage-collected"
    ):
        log.snapshot(5)
    with pytest.raises(VersionNotFoundError, match="garbage-collected .the log now starts at checkpoint 20"):
        log.snapshot(15)
    assert log.snapshot(20).version == 20 and log.snapshot().version == 25


# -- what really is wrong, named ---------------------------------------------------------------
def test_stray_file_after_the_end_of_the_log(tmp_path) -> None:
    """``…099.json`` with junk after version 14: not "garbage-collected", the file named."""
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    for i in range(14):
        t.append(pa.table({"id": [i]}))
    stray = os.path.join(t.io.uri, LOG_DIR, name(99))
    with open(stray, "wb") as f:
        f.write(b"junk\x00\xff not a commit")
    assert CommitLog(LocalFileIO(t.io.uri)).listing().gaps == ((15, 98),)  # listed twice, read directly: absent
    fresh = Table.open(t.uri)
    for operation in (
        fresh.snapshot,
        fresh.to_arrow,
        lambda: fresh.append(pa.table({"id": [100]})),
        lambda: Table.open(t.uri).compact(),
        lambda: Table.open(t.uri).history(),
    ):
        with pytest.raises(StrayLogFileError) as err:
            operation()
        message = str(err.value)
        assert err.value.path == stray and "garbage-collected" not in message
        assert "commits 15..98 before it do not exist" in message and "Move the file out of _mvtable/log/" in message
        assert "version=14" in message
    assert fresh.to_arrow(version=14).num_rows == 14
    os.rename(stray, str(tmp_path / "moved.json"))  # what the message says to do
    Table.open(t.uri).append(pa.table({"id": [14]}))
    assert Table.open(t.uri).to_arrow().num_rows == 15


def test_a_valid_commit_after_a_gap_is_a_gap(tmp_path) -> None:
    log = build_log(tmp_path, 6)
    moved = log.read_commit(6).model_copy(update={"version": 9})
    log.io.write(commit_path(9), moved.to_json_bytes())
    log.io.delete([commit_path(6)])
    assert log.read_commit(9).version == 9
    with pytest.raises(LogGapError, match=r"versions 6\.\.8 are missing while commit 9 is there") as err:
        log.snapshot()
    assert err.value.missing == (6, 8) and err.value.path.endswith(name(6))


def test_missing_first_commits_without_a_checkpoint_is_a_gap(tmp_path) -> None:
    log = build_log(tmp_path, 4)
    log.io.delete([commit_path(0), commit_path(1)])
    with pytest.raises(LogGapError, match=r"versions 0\.\.1 are missing while commit 2 is there.*no version can be read"):
        log.snapshot()


def test_undecodable_commit_names_the_file_and_what_to_do(tmp_path) -> None:
    log = build_log(tmp_path, 3)
    log.io.write(commit_path(2), b'{"format": 1, "version": 2, ')
    with pytest.raises(CorruptCommitError) as err:
        log.snapshot()
    assert err.value.path == f"{log.io.uri}/{commit_path(2)}" and err.value.version == 2
    assert "restore the file from a backup" in str(err.value) and "move it out of _mvtable/log/" in str(err.value)
    # GC's light reader says the same
    with pytest.raises(CorruptCommitError):
        log.read_commit_summary(2)
    # a commit of another version under this name
    log.io.write(commit_path(2), log.io.read(commit_path(1)))
    with pytest.raises(CorruptCommitError, match="holds version 1, expected 2"):
        log.read_commit(2)
    # errors with a meaning of their own keep it
    unsealed, _ = unseal(log.io.read(commit_path(1)), source="test")
    log.io.write(commit_path(2), seal(unsealed.replace(b'"format":2', b'"format":99')))
    with pytest.raises(UnsupportedFormatError):
        log.read_commit(2)


def test_a_directory_where_the_next_commit_belongs(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    folder = os.path.join(t.io.uri, LOG_DIR, name(2))
    os.mkdir(folder)
    for operation in (
        lambda: t.append(pa.table({"id": [2]})),
        lambda: Table.open(t.uri).append(pa.table({"id": [2]})),
        lambda: t.commit_log.read_commit(2),
    ):
        with pytest.raises(StrayLogFileError, match="a directory where the file of commit 2 belongs") as err:
            operation()
        assert err.value.path == folder
    assert Table.open(t.uri).to_arrow().num_rows == 1  # reads are not affected
    os.rmdir(folder)
    t.append(pa.table({"id": [2]}))
    assert Table.open(t.uri).to_arrow().num_rows == 2


def test_a_directory_where_a_checkpoint_belongs_costs_only_speed(tmp_path) -> None:
    log = build_log(tmp_path, 3)
    os.mkdir(log.io._p(checkpoint_path(2)))
    # local listings name files only: hand the directory to the log as another store would list it
    listing = Listing(commits=list(range(4)), checkpoints=[2])
    assert log.snapshot(listing=listing).version == 3
    with pytest.raises(StrayLogFileError, match="a directory where the file of checkpoint 2 belongs"):
        log.read_checkpoint(2)
    assert isinstance(StrayLogFileError("x", "y"), CorruptMetadataError)
