"""The change feed: for every version, rows before - deleted + inserted == rows after
(as multisets), across appends, deletes, overwrites, pushes, rollbacks, restores and a
data-neutral compaction; upsert pairing; typed errors."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.streaming import CommitKind, advance
from mvtable.connector.streaming.changes import DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE, pair_updates
from mvtable.errors import InvalidOptionError, VersionNotFoundError

from ..conftest import orders


def rows(t: pa.Table) -> Counter:
    return Counter(zip(t.column("id").to_pylist(), t.column("status").to_pylist(), t.column("price").to_pylist()))


def compact(t: Table) -> None:
    """Merge every segment (the default thresholds leave a small test table alone)."""
    assert t.compact(min_input_files=2, delete_ratio=0.01).commits, "nothing was compacted"


def history_of_operations(t: Table) -> None:
    t.append(orders(2000, 300))  # 3
    t.delete(pc.field("status") == "cancelled")  # 4: DV on every segment
    t.delete(pc.field("id") < 50)  # 5: DVs grow
    t.overwrite(orders(5000, 120), consistent_push=True)  # 6 PUSH_START, 7 CONSISTENT_PUSH
    entry = t.lineage()[-1].id
    t.append(orders(9000, 10))  # 8
    t.rollback(entry=entry)  # 9: the old snapshot comes back with its DVs
    t.restore(version=3)  # 10: undeletes rows, drops the push output segments
    compact(t)  # 11: data-neutral
    t.overwrite(orders(7000, 40))  # 12: plain overwrite


def test_every_version_is_the_previous_one_plus_its_changes(small_table):
    t = small_table
    history_of_operations(t)
    feed = t.changes(1)
    assert feed.column_names == ["id", "status", "price", "_change_type", "_commit_version", "_commit_timestamp"]
    assert feed.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    by_version = {v: feed.filter(pc.field("_commit_version") == v) for v in range(1, t.version + 1)}
    times = {h.version: h.timestamp for h in t.history()}
    for v in range(1, t.version + 1):
        changes = by_version[v]
        deleted = rows(changes.filter(pc.field("_change_type") == DELETE))
        inserted = rows(changes.filter(pc.field("_change_type") == INSERT))
        before, after = rows(t.scan(version=v - 1).to_arrow()), rows(t.scan(version=v).to_arrow())
        assert not deleted - before, f"version {v} deletes rows that were not there"
        assert before - deleted + inserted == after, f"version {v}"
        assert set(changes.column("_commit_timestamp").to_pylist()) <= {times[v]}
    assert by_version[11].num_rows == 0, "compaction is data-neutral"
    assert by_version[6].num_rows == 0, "a push that only started changes nothing"
    assert rows(by_version[4].filter(pc.field("_change_type") == DELETE)) == rows(
        t.scan(version=3).to_arrow().filter(pc.field("status") == "cancelled")
    )


def test_a_range_of_versions_and_a_projection(small_table):
    t = small_table
    t.delete(pc.field("id") < 10)  # 3
    t.append(orders(3000, 5))  # 4
    feed = t.changes(3, 3, columns=["id"])
    assert feed.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sorted(feed.column("id").to_pylist()) == list(range(10))
    assert set(feed.column("_change_type").to_pylist()) == {DELETE}
    assert t.changes(4).num_rows == 5
    assert t.changes(5 - 1, None).num_rows == 5


@pytest.mark.parametrize(
    "args,error,match",
    [
        ((3, 1), InvalidOptionError, "after end_version"),
        ((0, 99), VersionNotFoundError, "end_version 99"),
        ((-1,), InvalidOptionError, "start_version"),
        (("1",), InvalidOptionError, "start_version"),
    ],
)
def test_bad_ranges_are_typed_errors(small_table, args, error, match):
    with pytest.raises(error, match=match):
        small_table.changes(*args)


def test_commit_kinds(small_table):
    t = small_table
    t.append(orders(3000, 5))  # 3
    t.delete(pc.field("id") == 1)  # 4
    compact(t)  # 5
    state = t.commit_log.snapshot(2)  # advanced in place below: a snapshot of our own, not the read-only view
    kinds = [advance(state, t.commit_log.read_commit(v)).kind for v in (3, 4, 5)]
    assert kinds == [CommitKind.APPEND, CommitKind.CHANGE, CommitKind.NEUTRAL]
    assert state.visible_segment_ids() == t.snapshot().visible_segment_ids()


def test_an_upsert_is_update_images_and_inserts(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, primary_key=["id"])
    t.append(orders(0, 10))  # 1
    new = orders(8, 4)
    t.upsert(new.set_column(1, "status", pa.array(["upd"] * 4)))  # 2: 8, 9 updated; 10, 11 new
    feed = t.changes(2, columns=["id", "status"])
    got = sorted(zip(feed["_change_type"].to_pylist(), feed["id"].to_pylist(), feed["status"].to_pylist()))
    assert got == [
        (INSERT, 10, "upd"),
        (INSERT, 11, "upd"),
        (UPDATE_POSTIMAGE, 8, "upd"),
        (UPDATE_POSTIMAGE, 9, "upd"),
        (UPDATE_PREIMAGE, 8, "ok"),
        (UPDATE_PREIMAGE, 9, "ok"),
    ]
    t.delete(keys=pa.table({"id": [3]}))  # 3: a delete by key is a plain delete
    assert t.changes(3)["_change_type"].to_pylist() == [DELETE]


def test_upsert_pairs_deletes_and_inserts_by_key():
    old = pa.table({"k": [1, 2, 3], "j": ["a", "a", "b"], "v": [10, 20, 30]})
    new = pa.table({"k": [2, 3, 4], "j": ["a", "x", "a"], "v": [21, 31, 41]})
    out = dict(pair_updates([(DELETE, old), (INSERT, new)], ["k", "j"]))
    assert out[DELETE].column("k").to_pylist() == [1, 3]
    assert out[UPDATE_PREIMAGE].to_pylist() == [{"k": 2, "j": "a", "v": 20}]
    assert out[UPDATE_POSTIMAGE].to_pylist() == [{"k": 2, "j": "a", "v": 21}]
    assert out[INSERT].column("k").to_pylist() == [3, 4]


def test_the_walker_goes_back_and_forth_and_recovers_from_a_missing_commit(small_table):
    from mvtable.connector.streaming.walker import VersionWalker
    from mvtable.lineage.log import commit_path

    t = small_table
    t.delete(pc.field("id") < 5)  # 3
    t.append(orders(3000, 5))  # 4
    walker = VersionWalker(t.commit_log, cached_versions=1)
    fresh = [VersionWalker(t.commit_log).delta(v) for v in (4, 2, 3)]
    assert [walker.delta(v) for v in (4, 2, 3)] == fresh
    assert [d.kind for d in fresh] == [CommitKind.APPEND, CommitKind.APPEND, CommitKind.CHANGE]
    walker = VersionWalker(t.commit_log)
    walker.delta(2)
    moved = t.io.read(commit_path(3))
    t.io.delete([commit_path(3)])
    with pytest.raises(VersionNotFoundError):
        walker.delta(4)
    t.io.write(commit_path(3), moved)
    assert walker.delta(4) == fresh[0]


def collected_table(uri: str) -> Table:
    """Versions 0..7 of appends (ids 0..69) whose log GC cut to checkpoint 3 and commits 4..7,
    while the newest snapshot's history still lists versions 0..7."""
    zero = ("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod", "versionRetentionPeriod")
    t = Table.create(uri, schema=orders(0, 1).schema, properties={"checkpointInterval": "3", **dict.fromkeys(zero, "0s")})
    for i in range(5):
        t.append(orders(i * 10, 10))  # 1..5
    t.vacuum(retention="0s", force=True)
    t.collect_garbage()
    t.append(orders(50, 10))  # 6
    t.append(orders(60, 10))  # 7
    listing = t.commit_log.listing()
    assert (listing.commits, listing.checkpoints) == ([4, 5, 6, 7], [3, 6])
    assert [h.version for h in t.history()] == list(range(8))
    return t


@pytest.mark.parametrize(
    ("commits", "checkpoints", "first"),
    [
        ([0, 1, 2, 3], [], 0),  # the whole log: version 0's changes are diffed against nothing
        ([0, 1, 2, 3], [3], 0),
        ([4, 5, 6, 7], [3, 6], 4),  # 4 is diffed against checkpoint 3
        ([3, 4, 5], [3], 4),  # 3 needs snapshot 2, which nothing rebuilds
        ([2, 3, 4, 5], [3], 4),  # commit 2 alone does not rebuild 2 (no checkpoint at or before it)
        ([4, 5, 6, 7], [6], 7),  # a pass cut short after checkpoint 3: 6 is the first base left
        ([7], [7], 8),  # only what the newest version needs: no version's changes
        ([2, 3, 5, 6], [1, 4], 5),  # a hole at 4, bridged by its checkpoint
    ],
)
def test_first_readable_change_needs_the_previous_snapshot(commits, checkpoints, first):
    from mvtable.connector.streaming.walker import first_readable_change
    from mvtable.lineage.log import Listing

    assert first_readable_change(Listing(commits, checkpoints)) == first


def test_a_collected_start_is_refused_naming_the_oldest_readable_version(table_uri):
    t = collected_table(table_uri)
    for start in (0, 3):
        with pytest.raises(VersionNotFoundError, match=f"start_version {start} can no longer be read.*is 4; start there"):
            t.changes(start)
    feed = t.changes(4)
    assert sorted(feed["id"].to_pylist()) == list(range(30, 70)) and set(feed["_commit_version"].to_pylist()) == {4, 5, 6, 7}
