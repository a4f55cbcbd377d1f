"""Rollback of a consistent push, restore to a version, write-audit-publish."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.errors import (
    FilesMissingError,
    InvalidLineageTransitionError,
    InvalidOptionError,
    SegmentInUseError,
    VersionNotFoundError,
)


def ids_of(n0: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n0 + n), pa.int64())})


def live(t: Table, **kw) -> list[int]:
    return sorted(t.scan(**kw).to_arrow().column("id").to_pylist())


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=ids_of(0, 1).schema, properties={"rowGroupRows": "4"})
    table.append(ids_of(0, 10))
    return table


def test_rollback_flips_back_with_deletes_as_they_were(t):
    t.delete(pc.field("id") < 3)
    before = live(t)
    t.overwrite(ids_of(100, 5), consistent_push=True)
    entry = t.lineage()[-1].id
    t.delete(pc.field("id") == 100)  # a delete on the pushed snapshot
    result = t.rollback(entry=entry)
    assert result.changed and result.operation == "ROLLBACK"
    assert live(t) == before  # the old snapshot, with its own deletes
    assert t.lineage()[-1].state == "REVERTED"
    again = t.rollback(entry=entry)
    assert not again.changed and "already REVERTED" in again.message
    assert again.version == result.version


def test_rollback_of_replaced_push_names_the_blocker(t):
    t.overwrite(ids_of(100, 5), consistent_push=True)
    t.overwrite(ids_of(200, 5), consistent_push=True)
    first, second = [e.id for e in t.lineage()]
    with pytest.raises(InvalidLineageTransitionError, match=second):
        t.rollback(entry=first)
    t.rollback(entry=second)
    assert live(t) == list(range(100, 105))
    t.rollback(entry=first)
    assert live(t) == list(range(10))


def test_rollback_after_plain_overwrite_is_refused(t):
    t.overwrite(ids_of(100, 5), consistent_push=True)
    entry = t.lineage()[-1].id
    t.overwrite(ids_of(300, 2))
    with pytest.raises(InvalidLineageTransitionError, match="removed by the commit"):
        t.rollback(entry=entry)


def test_rollback_in_progress_and_unknown_entry(t):
    t.overwrite(ids_of(100, 5), consistent_push=True, publish=False)
    entry = t.lineage()[-1].id
    assert t.rollback(entry=entry).changed
    assert live(t) == list(range(10))
    with pytest.raises(InvalidLineageTransitionError, match="no lineage entry"):
        t.rollback(entry="push-nope")
    with pytest.raises(InvalidOptionError):
        t.rollback()
    with pytest.raises(InvalidOptionError):
        t.rollback(entry=entry, version=1)


def test_restore_equals_old_version_and_can_be_undone(t):
    t.delete(pc.field("id") == 4)
    v_target = t.version
    t.append(ids_of(50, 3))
    t.delete(pc.field("id") < 2)
    t.overwrite(ids_of(100, 5), consistent_push=True)
    before_restore = t.version
    res = t.restore(version=v_target)
    assert res.changed
    assert live(t) == live(t, version=v_target)
    assert not t.restore(version=v_target).changed  # idempotent
    undo = t.rollback(version=before_restore)
    assert undo.changed and live(t) == list(range(100, 105))
    assert [h.operation for h in t.history()][-2:] == ["RESTORE", "RESTORE"]
    # the restored table keeps working: deletes and pushes on it
    t.restore(version=v_target)
    t.delete(pc.field("id") == 9)
    assert 9 not in live(t) and 9 in live(t, version=v_target)


def test_restore_refused_when_files_are_gone(t):
    v = t.version
    t.overwrite(ids_of(100, 5))
    t.vacuum(retention="0s", force=True, now_ms=None)
    with pytest.raises(FilesMissingError, match="vacuum already removed"):
        t.restore(version=v)
    with pytest.raises(VersionNotFoundError):
        t.restore(version=999)


def test_restore_refused_while_a_push_holds_the_segments(t):
    v0 = t.version
    t.append(ids_of(20, 2))
    t.overwrite(ids_of(100, 5), consistent_push=True, publish=False)
    with pytest.raises(SegmentInUseError):
        t.restore(version=v0)


def test_write_audit_publish(t):
    t.overwrite(ids_of(100, 5), consistent_push=True, publish=False)
    entry = t.lineage()[-1]
    assert entry.state == "IN_PROGRESS"
    assert live(t) == list(range(10))  # invisible to readers
    assert live(t, lineage_entry=entry.id) == list(range(100, 105))  # the auditor sees it
    res = t.publish(entry.id)
    assert res.changed and live(t) == list(range(100, 105))
    assert not t.publish(entry.id).changed
    t.overwrite(ids_of(200, 1), consistent_push=True, publish=False)
    staged = t.lineage()[-1].id
    t.rollback(entry=staged)
    with pytest.raises(InvalidLineageTransitionError, match="REVERTED"):
        t.publish(staged)
    with pytest.raises(InvalidOptionError, match="REVERTED"):
        t.scan(lineage_entry=staged)


def test_third_push_keeps_two_snapshots(t):
    for k in range(1, 4):
        t.overwrite(ids_of(100 * k, 3), consistent_push=True)
    entries = t.lineage()
    assert len(entries) == 2  # the first push's entry was purged with its replaced segments
    snap = t.snapshot()
    kept = [s for s in snap.segments.values() if s.removed_version is None]
    assert len(kept) == 3  # snapshot before the previous push's + previous + current
    t.rollback(entry=entries[-1].id)
    assert live(t) == list(range(200, 203))


def _rollback_in_process(uri: str, entry: str, barrier, out) -> None:
    t = Table.open(uri)
    barrier.wait()
    r = t.rollback(entry=entry)
    out.put((r.changed, r.version))


def test_racing_rollbacks_are_idempotent(t):
    """Two processes (a Spark task and its retry, say) roll back the same push at once:
    one commits, the other reports that nothing changed; nobody gets an error."""
    import multiprocessing as mp

    t.overwrite(ids_of(100, 5), consistent_push=True)
    entry = t.lineage()[-1].id
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_rollback_in_process, args=(t.uri, entry, barrier, out)) for _ in range(3)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [changed for changed, _ in results] == [False, False, True]
    assert len({v for _, v in results}) == 1  # all name the version that reverted it
    assert [h.operation for h in t.history()].count("ROLLBACK") == 1
    assert live(t) == list(range(10))
