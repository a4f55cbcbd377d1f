"""Scoped consistent pushes in the pure lineage (``push_scopes``, ``ownership``, ``lineage_retention``, ``ops.push_start``).

Pushes on disjoint partitions pass each other by (Druid's locks on disjoint intervals); an
overlap is a ``PushInProgressError`` naming the partitions and the owner; retention keeps
the last push of every partition, so one day's push can be rolled back after later pushes of
other days; the scope survives the log and the checkpoint."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from mvtable.errors import PushInProgressError, StagedPushError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import (
    AddSegment,
    Commit,
    LineageRevert,
    LineageStage,
    LineageStart,
    MetadataAction,
    PushOwner,
    SegmentFile,
    parse_commit,
)
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.lineage_retention import keep_two_snapshots
from mvtable.lineage.ownership import Liveness, PushClaim, blocking_entries
from mvtable.lineage.push_scopes import PushScope, describe_scope, scopes_overlap, shared_partitions
from mvtable.lineage.snapshot import Snapshot, apply_commit

T0 = 1_700_000_000_000
OWNER = PushOwner(host="host-a", machine="m1", pid=4242, start_ticks=99)
ME = PushOwner(host="host-a", machine="m1", pid=5151, start_ticks=7)
DAY_A, DAY_B, DAY_C = 19727, 19728, 19729  # 2024-01-05, -06, -07 as days since 1970


def day(n: int) -> PushScope:
    return scope(n)


def scope(*days: int, spec_id: int = 1) -> PushScope:
    import datetime as dt

    labels = tuple(f"ts_day={dt.date(1970, 1, 1) + dt.timedelta(days=d)}" for d in days)
    return PushScope(spec_id=spec_id, partitions=tuple((d,) for d in days), labels=labels)


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=10, size_bytes=100)


def commit(s: Snapshot, *actions, ts: int | None = None) -> Snapshot:
    apply_commit(
        s,
        Commit(
            version=s.version + 1,
            read_version=s.version,
            timestamp_ms=ts or T0 + s.version + 1,
            operation=Operation.APPEND,
            actions=actions,
        ),
    )
    return s


def claim(**liveness: Liveness) -> PushClaim:
    return PushClaim(owner=ME, lease_ms=60_000, now_ms=T0 + 10, liveness=liveness)


ALIVE = Liveness(process_gone=False, detail="pid 4242 runs", lease_expires_ms=T0 + 60_000)
DEAD = Liveness(process_gone=True, detail="pid 4242 is gone", lease_expires_ms=T0 + 60_000)


def two_days() -> Snapshot:
    """v0 create, v1 segment a1 (day A), v2 segment b1 (day B)."""
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, AddSegment(segment=seg("a1")))
    commit(s, AddSegment(segment=seg("b1")))
    return s


def start(s: Snapshot, entry: str, replaced: list[str], sc: PushScope | None, *, owner: PushOwner = OWNER, **kw) -> None:
    actions = ops.push_start(
        s, s, entry, claim=PushClaim(owner=owner, lease_ms=60_000, now_ms=T0, liveness=kw), replaced=replaced, scope=sc
    )
    commit(s, *actions)


def finish(s: Snapshot, entry: str, new: str) -> None:
    commit(s, *ops.push_segments(s, entry, [seg(new)], publish=True))


# -- the overlap rule ---------------------------------------------------------------------


def test_scopes_overlap_by_partition_whole_table_and_spec():
    assert not scopes_overlap(day(DAY_A), day(DAY_B))
    assert scopes_overlap(scope(DAY_A, DAY_B), scope(DAY_B, DAY_C))
    assert scopes_overlap(None, day(DAY_A)) and scopes_overlap(day(DAY_A), None) and scopes_overlap(None, None)
    # another spec (the table's partitioning evolved between them): conservative
    assert scopes_overlap(scope(DAY_A, spec_id=1), scope(DAY_B, spec_id=2))
    assert shared_partitions(scope(DAY_A, DAY_B), scope(DAY_B, DAY_C)) == ["ts_day=2024-01-06"]
    assert describe_scope(scope(*range(DAY_A, DAY_A + 7))) == (
        "partitions ts_day=2024-01-05, ts_day=2024-01-06, ts_day=2024-01-07, ts_day=2024-01-08, ts_day=2024-01-09 and 2 more"
    )
    assert describe_scope(None) == "the whole table"


def test_a_scope_is_checked_when_read():
    with pytest.raises(ValidationError, match="labels"):
        PushScope(spec_id=1, partitions=((1,), (2,)), labels=("only one",))
    with pytest.raises(ValidationError, match="twice"):
        PushScope(spec_id=1, partitions=((1,), (1,)))
    with pytest.raises(ValidationError, match="JSON scalar"):
        PushScope(spec_id=1, partitions=(([1],),))


# -- concurrency ----------------------------------------------------------------------------


def test_pushes_on_disjoint_days_run_at_once_and_both_complete():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    start(s, "pb", ["b1"], day(DAY_B), pa=ALIVE)  # pa is alive, and not in the way
    finish(s, "pb", "b2")
    finish(s, "pa", "a2")
    assert sorted(s.visible_segment_ids()) == ["a2", "b2"]
    assert s.lineage["pa"].state == s.lineage["pb"].state == LineageState.COMPLETED


def test_two_pushes_into_new_disjoint_partitions_do_not_block():
    """Both replace nothing: only their scopes tell them apart (two whole-table pushes would block)."""
    s = two_days()
    start(s, "pc", [], day(DAY_C))
    assert blocking_entries(s, [], scope=scope(DAY_C + 1)) == []
    assert [e.id for e in blocking_entries(s, [], scope=day(DAY_C))] == ["pc"]


def test_a_push_over_a_live_push_of_the_same_day_names_the_day_and_the_owner():
    s = two_days()
    start(s, "pa", ["a1"], scope(DAY_A, DAY_B))
    with pytest.raises(PushInProgressError) as err:
        ops.push_start(s, s, "p2", claim=claim(pa=ALIVE), replaced=[], scope=scope(DAY_B, DAY_C))
    assert err.value.entry_id == "pa" and err.value.owner == "pid 4242 on host-a"
    assert err.value.partitions == ("ts_day=2024-01-06",)
    assert "over partition ts_day=2024-01-06, owned by pid 4242 on host-a" in err.value.message


def test_whole_table_and_scoped_pushes_block_each_other():
    s = two_days()
    start(s, "pa", [], day(DAY_C))  # a new day: it replaces no segment
    with pytest.raises(PushInProgressError, match="over partition ts_day=2024-01-07"):
        ops.push_start(s, s, "w", claim=claim(pa=ALIVE), replaced=["a1", "b1"], scope=None)
    s2 = two_days()
    start(s2, "w", ["a1", "b1"], None)
    with pytest.raises(PushInProgressError, match="over the whole table"):
        ops.push_start(s2, s2, "pc", claim=claim(w=ALIVE), replaced=[], scope=day(DAY_C))


def test_two_whole_table_pushes_into_an_empty_table_still_block_each_other():
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    start(s, "p0", [], None)
    with pytest.raises(PushInProgressError, match="over the same segments"):
        ops.push_start(s, s, "p1", claim=claim(p0=ALIVE), scope=None)


def test_a_push_of_another_spec_is_in_the_way():
    s = two_days()
    start(s, "old", ["a1"], scope(DAY_A, spec_id=1))
    with pytest.raises(PushInProgressError, match="of partition spec 1 \\(this push uses spec 2\\)"):
        ops.push_start(s, s, "new", claim=claim(old=ALIVE), replaced=[], scope=scope(40, spec_id=2))


def test_a_dead_push_is_reverted_by_a_push_of_its_scope_and_left_alone_by_others():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    commit(s, AddSegment(segment=seg("a2"), lineage_entry="pa"))  # half written, then killed
    other = ops.push_start(s, s, "pb", claim=claim(pa=DEAD), replaced=["b1"], scope=day(DAY_B))
    assert not any(isinstance(a, LineageRevert) for a in other)  # another day: not its business
    commit(s, *other)
    assert s.lineage["pa"].state == LineageState.IN_PROGRESS
    same = ops.push_start(s, s, "pa2", claim=claim(pa=DEAD, pb=ALIVE), replaced=["a1"], scope=day(DAY_A))
    [revert] = [a for a in same if isinstance(a, LineageRevert)]
    assert revert.entry_id == "pa" and "owner died" in (revert.reason or "")
    commit(s, *same)
    assert s.lineage["pa"].state == LineageState.REVERTED and s.lineage["pb"].state == LineageState.IN_PROGRESS


def test_a_staged_push_of_the_day_waits_for_a_person():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    commit(s, AddSegment(segment=seg("a2"), lineage_entry="pa"), LineageStage(entry_id="pa"))
    with pytest.raises(StagedPushError, match="staged push over partition ts_day=2024-01-05"):
        ops.push_start(s, s, "p2", claim=claim(), replaced=["a1"], scope=day(DAY_A))
    commit(s, *ops.push_start(s, s, "pb", claim=claim(), replaced=["b1"], scope=day(DAY_B)))  # another day passes


# -- retention: the last push of every partition can be rolled back -----------------------


def test_rolling_back_one_days_push_after_later_pushes_of_other_days():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    finish(s, "pa", "a2")
    for i, d in enumerate((DAY_B, DAY_B, DAY_B, DAY_C)):
        replaced = [sid for sid in s.visible_segment_ids() if sid.startswith("b")] if d == DAY_B else []
        start(s, f"p{i}", replaced, day(d))
        finish(s, f"p{i}", f"{'b' if d == DAY_B else 'c'}{i + 3}")
    assert "pa" in s.lineage  # pushes of other days kept it
    assert "p0" not in s.lineage and "p1" in s.lineage  # day B keeps its two newest snapshots
    assert s.segments["b1"].removed_version is not None
    commit(s, *ops.revert(s, "pa"))
    assert sorted(s.visible_segment_ids()) == ["a1", "b5", "c6"]


def test_keep_two_snapshots_within_a_scope():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    finish(s, "pa", "a2")
    start(s, "pb", ["b1"], day(DAY_B))
    finish(s, "pb", "b2")
    assert keep_two_snapshots(s, scope=day(DAY_C)) == []
    assert keep_two_snapshots(s, scope=day(DAY_A)) == []  # pa is the newest push of day A
    dropped = keep_two_snapshots(s, scope=None)  # a whole-table push keeps only the newest push
    assert [getattr(a, "segment_id", getattr(a, "entry_id", None)) for a in dropped] == ["a1", "pa"]


# -- the scope in the log and the checkpoint ----------------------------------------------


def test_the_scope_is_in_the_log_and_checkpoint_and_absent_without_one():
    s = two_days()
    sc = PushScope(spec_id=1, partitions=((DAY_A, "eu"), (None, "us")), labels=("a", "b"), predicate="ts >= '2024-01-05'")
    actions = ops.push_start(s, s, "pa", claim=claim(), replaced=["a1"], scope=sc)
    c = Commit(
        version=s.version + 1, read_version=s.version, timestamp_ms=T0 + 9, operation=Operation.PUSH_START, actions=actions
    )
    raw = c.to_json_bytes()
    again = parse_commit(raw, source="log", expected_version=c.version)
    [st] = [a for a in again.actions if isinstance(a, LineageStart)]
    assert st.scope == sc
    apply_commit(s, again)
    assert s.lineage["pa"].scope == sc
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert back.lineage["pa"].scope == sc
    # a whole-table push writes no scope at all: an mvtable from before scopes reads it
    plain = LineageStart(entry_id="w", segments_from=("b1",))
    assert "scope" not in json.loads(plain.model_dump_json())
    whole = two_days()
    commit(whole, plain)
    assert b'"scope"' not in checkpoint_bytes(whole)
    assert parse_checkpoint(checkpoint_bytes(whole), source="cp").lineage["w"].scope is None


def test_end_of_a_scoped_push_leaves_appends_of_its_day_visible():
    s = two_days()
    start(s, "pa", ["a1"], day(DAY_A))
    commit(s, AddSegment(segment=seg("a9")))  # an append into day A while the push runs
    finish(s, "pa", "a2")
    assert sorted(s.visible_segment_ids()) == ["a2", "a9", "b1"]
