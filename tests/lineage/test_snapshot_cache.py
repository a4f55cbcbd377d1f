"""The newest snapshot kept per process: a fresh ``CommitLog`` of the same table replays only
the commits since, never another history's snapshot, and callers never share a snapshot
they may change."""

from __future__ import annotations

import shutil

from mvtable.lineage.log import CommitLog, checkpoint_path, commit_path
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.snapshot_cache import RecentSnapshots, process_snapshots
from mvtable.storage import LocalFileIO

from .test_log import append, new_log


def counted(root) -> tuple[CommitLog, list[str]]:
    """A fresh log of the table at ``root`` that records the files it reads."""
    log = CommitLog(LocalFileIO(str(root)), check_files=False)
    reads: list[str] = []
    real_read = log.io.read
    log.io.read = lambda path: reads.append(path) or real_read(path)  # type: ignore[method-assign]
    return log, reads


def cold(root) -> Snapshot:
    """What a process that never read the table builds."""
    process_snapshots().clear()
    return CommitLog(LocalFileIO(str(root)), check_files=False).snapshot()


def test_a_fresh_log_replays_only_the_commits_since(tmp_path) -> None:
    writer = new_log(tmp_path, checkpointInterval="100")
    for i in range(1, 9):
        append(writer, f"s{i}")
    writer.snapshot()  # version 8 kept
    log, reads = counted(tmp_path)
    hits = process_snapshots().hits
    assert log.snapshot().version == 8
    assert reads == [commit_path(8)]  # only the check that it is the same history
    assert process_snapshots().hits == hits + 1

    append(writer, "s9")
    append(writer, "s10")
    log, reads = counted(tmp_path)
    newest = log.snapshot()
    assert reads == [commit_path(9), commit_path(10)]  # the writer's open for s10 kept version 9
    assert newest == cold(tmp_path) and newest.visible_segment_ids() == [f"s{i}" for i in range(1, 11)]


def test_shared_readers_get_the_kept_snapshot_and_others_a_copy(tmp_path) -> None:
    writer = new_log(tmp_path)
    for i in range(1, 4):
        append(writer, f"s{i}")
    first = CommitLog(LocalFileIO(str(tmp_path))).snapshot(shared=True)
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot(shared=True) is first
    mine = CommitLog(LocalFileIO(str(tmp_path))).snapshot()
    assert mine == first and mine is not first
    mine.segments.clear()  # a caller's own snapshot: nobody else sees the change
    mine.properties["x"] = "changed"
    again = CommitLog(LocalFileIO(str(tmp_path))).snapshot()
    assert again == first and len(again.segments) == 3 and "x" not in again.properties


def test_a_table_made_again_at_the_same_path_is_read_afresh(tmp_path) -> None:
    writer = new_log(tmp_path)
    append(writer, "old1")
    append(writer, "old2")
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot().visible_segment_ids() == ["old1", "old2"]
    shutil.rmtree(tmp_path / "_mvtable")
    writer = new_log(tmp_path)
    append(writer, "new1")
    append(writer, "new2")  # the same versions, another history
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot().visible_segment_ids() == ["new1", "new2"]


def test_older_versions_and_nearer_checkpoints_do_not_use_it(tmp_path) -> None:
    writer = new_log(tmp_path, checkpointInterval="4")
    for i in range(1, 7):
        append(writer, f"s{i}")
    CommitLog(LocalFileIO(str(tmp_path))).snapshot()  # version 6 kept
    log, reads = counted(tmp_path)
    assert log.snapshot(5).visible_segment_ids() == [f"s{i}" for i in range(1, 6)]  # time travel: checkpoint 4 + commit 5
    assert reads == [checkpoint_path(4), commit_path(5)]
    assert process_snapshots().get(log.io.uri)[0].version == 6  # the newer one stays kept
    for i in range(7, 10):
        append(writer, f"s{i}")  # checkpoint 8 lies between the kept 6 and the newest 9
    log, reads = counted(tmp_path)
    assert log.snapshot() == cold(tmp_path)
    assert reads == [checkpoint_path(8), commit_path(9)]


def test_bounded_least_recently_used_first() -> None:
    cache = RecentSnapshots(max_entries=2)
    for name, version in (("a", 1), ("b", 1), ("c", 1)):
        cache.keep(name, Snapshot(version=version), b"d")
    assert cache.get("a") is None and cache.get("b") is not None and cache.get("c") is not None
    cache.keep("b", Snapshot(version=0), b"e")  # older than the kept one: ignored
    assert cache.get("b") == (Snapshot(version=1), b"d")
    RecentSnapshots(max_entries=0).keep("a", Snapshot(version=1), b"d")
