"""The process-wide cache of parsed checkpoints: a fresh ``CommitLog`` on the same table
reuses the parse, callers get independent copies, and changed bytes are parsed again."""

from __future__ import annotations

import pytest

from mvtable.errors import CorruptMetadataError
from mvtable.lineage.checkpoint_cache import CheckpointCache, process_checkpoints
from mvtable.lineage.log import CommitLog, checkpoint_path
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import LocalFileIO

from .test_checkpoint import rich_table


def test_a_fresh_log_reuses_the_parse_and_gets_its_own_copy(tmp_path) -> None:
    log = rich_table(tmp_path, interval=3)
    version = max(log.listing().checkpoints)
    cache = process_checkpoints()
    first = CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version)
    hits = cache.hits
    second = CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version)
    assert cache.hits == hits + 1
    assert second == first and second is not first
    first.segments.clear()  # replay advances snapshots in place: no caller sees another's changes
    first.properties["x"] = "changed"
    third = CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version)
    assert third == second and third.segments and third.properties["x"] == "ü"
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot() == log.snapshot()


def test_changed_bytes_are_parsed_again(tmp_path) -> None:
    log = rich_table(tmp_path, interval=3)
    version = max(log.listing().checkpoints)
    log.read_checkpoint(version)  # cached
    path = tmp_path / checkpoint_path(version)
    data = path.read_bytes()
    path.write_bytes(data[:-20] + b"\0" * 20)  # same name, other bytes
    with pytest.raises(CorruptMetadataError):
        CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version)


def test_cache_answers_only_for_equal_bytes_and_stays_bounded() -> None:
    cache = CheckpointCache(max_entries=2)
    parsed: list[bytes] = []

    def parse(data: bytes) -> Snapshot:
        parsed.append(data)
        return Snapshot(version=len(data))

    assert cache.load("s", 1, b"a", parse).version == 1
    assert cache.load("s", 1, b"a", parse).version == 1
    assert cache.load("s", 1, b"bb", parse).version == 2  # same key, other bytes: parsed
    cache.load("s", 2, b"ccc", parse)
    cache.load("s", 3, b"dddd", parse)  # evicts version 1 (least recently used)
    cache.load("s", 1, b"bb", parse)
    assert parsed == [b"a", b"bb", b"ccc", b"dddd", b"bb"]
    assert CheckpointCache(max_entries=0).load("s", 1, b"a", parse).version == 1


def test_a_shared_read_is_the_cached_parse_and_leaves_every_copy_alone(tmp_path) -> None:
    log = rich_table(tmp_path, interval=4)
    listing = log.listing()
    version = max(listing.checkpoints)
    assert listing.latest > version  # commits follow the checkpoint
    copy = CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version)  # cached
    shared = CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version, shared=True)
    assert shared == copy and shared is not copy
    assert CommitLog(LocalFileIO(str(tmp_path))).read_checkpoint(version, shared=True) is shared
    copy.lineage.clear()  # a copy's changes never reach the shared parse
    assert shared.lineage
    # at the checkpoint's version, the shared snapshot is that parse; later ones replay onto a copy
    at_checkpoint = CommitLog(LocalFileIO(str(tmp_path))).snapshot(version, shared=True)
    assert at_checkpoint is shared
    newest = CommitLog(LocalFileIO(str(tmp_path))).snapshot(shared=True)
    assert newest == log.snapshot() and newest is not shared
    assert shared.version == version  # the replay did not advance the cached parse
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot(version) == shared


def test_a_shared_read_of_an_uncached_checkpoint_is_cached_as_it_is() -> None:
    cache = CheckpointCache(max_entries=2)
    first = cache.load("s", 1, b"a", lambda data: Snapshot(version=7), shared=True)
    assert cache.load("s", 1, b"a", lambda data: Snapshot(version=8), shared=True) is first
    copy = cache.load("s", 1, b"a", lambda data: Snapshot(version=9))
    assert copy == first and copy is not first
