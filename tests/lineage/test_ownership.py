"""The pure rules of push recovery (``mvtable.lineage.ownership`` and ``ops.push_start``):
which IN_PROGRESS entry a new push may clean up, in the same commit, and which it must
refuse with a typed error; plus the log/checkpoint fields that carry owners, leases,
staging, revert reasons and pruning."""

from __future__ import annotations

import pytest

from mvtable.errors import InvalidLineageTransitionError, PushInProgressError, StagedPushError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import (
    AddSegment,
    Commit,
    LineageRevert,
    LineageStage,
    LineageStart,
    MetadataAction,
    PruneState,
    PushOwner,
    RemoveSegment,
    SegmentFile,
    parse_commit,
)
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.lineage_retention import plan_entry_cleanup
from mvtable.lineage.ownership import Liveness, PushClaim, blocking_entries, verdict
from mvtable.lineage.snapshot import Snapshot, apply_commit

IN_PROGRESS, REVERTED = LineageState.IN_PROGRESS, LineageState.REVERTED

T0 = 1_700_000_000_000
OWNER = PushOwner(host="host-a", machine="m1", pid=4242, start_ticks=99)
ME = PushOwner(host="host-a", machine="m1", pid=5151, start_ticks=7)


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=10, size_bytes=100)


def commit(s: Snapshot, *actions, ts: int | None = None) -> Snapshot:
    c = Commit(
        version=s.version + 1,
        read_version=s.version,
        timestamp_ms=ts or T0 + s.version + 1,
        operation=Operation.APPEND,
        actions=actions,
    )
    apply_commit(s, c)
    return s


def table_with_push(*, staged: bool = False, lease_ms: int = 60_000) -> Snapshot:
    """v0 create, v1 append s1, v2 push p1 started (owner OWNER) over s1."""
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, AddSegment(segment=seg("s1")))
    commit(s, LineageStart(entry_id="p1", segments_from=("s1",), owner=OWNER, lease_expires_ms=T0 + lease_ms))
    if staged:
        commit(s, AddSegment(segment=seg("s2"), lineage_entry="p1"), LineageStage(entry_id="p1"))
    return s


def claim(now: int, **facts: Liveness) -> PushClaim:
    return PushClaim(owner=ME, lease_ms=60_000, now_ms=now, liveness=facts)


def test_dead_owner_is_reverted_in_the_same_commit_as_the_new_start():
    s = table_with_push()
    facts = Liveness(process_gone=True, detail="pid 4242 on host-a no longer runs", lease_expires_ms=T0 + 60_000)
    actions = ops.push_start(s, s, "p2", claim=claim(T0 + 1000, p1=facts))
    reverts = [a for a in actions if isinstance(a, LineageRevert)]
    starts = [a for a in actions if isinstance(a, LineageStart)]
    assert [r.entry_id for r in reverts] == ["p1"] and "no longer runs" in reverts[0].reason
    assert starts[0].owner == ME and starts[0].lease_expires_ms == T0 + 1000 + 60_000
    commit(s, *actions)  # valid as ONE commit: the revert clears the way for the start
    assert s.lineage["p1"].state == REVERTED and "owner died" in (s.lineage["p1"].revert_reason or "")
    assert s.lineage["p2"].state == IN_PROGRESS and s.lineage["p2"].owner == ME


def test_expired_lease_is_reverted_even_when_the_process_cannot_be_checked():
    s = table_with_push(lease_ms=5_000)
    facts = Liveness(process_gone=False, detail="another machine", lease_expires_ms=T0 + 5_000)
    actions = ops.push_start(s, s, "p2", claim=claim(T0 + 5_000, p1=facts))
    (revert,) = [a for a in actions if isinstance(a, LineageRevert)]
    assert "lease expired" in (revert.reason or "")


def test_a_renewed_lease_keeps_the_push_alive():
    s = table_with_push(lease_ms=5_000)
    renewed = Liveness(process_gone=False, detail="pid 4242 on host-a is running", lease_expires_ms=T0 + 120_000)
    with pytest.raises(PushInProgressError) as err:
        ops.push_start(s, s, "p2", claim=claim(T0 + 60_000, p1=renewed))
    assert err.value.entry_id == "p1" and err.value.owner == "pid 4242 on host-a"
    assert err.value.lease_expires_ms == T0 + 120_000
    assert "p1" in str(err.value) and "pid 4242" in str(err.value)
    assert isinstance(err.value, InvalidLineageTransitionError)  # callers catching the old error still do


def test_an_entry_the_facts_do_not_cover_counts_as_alive():
    """It appeared after the facts were gathered (a retry after a lost race)."""
    s = table_with_push(lease_ms=1)
    with pytest.raises(PushInProgressError):
        ops.push_start(s, s, "p2", claim=PushClaim(owner=ME, lease_ms=60_000, now_ms=T0 + 10**9, liveness={}))


def test_no_claim_recovers_nothing():
    s = table_with_push(lease_ms=1)
    with pytest.raises(PushInProgressError):
        ops.push_start(s, s, "p2")


def test_a_staged_push_is_never_reverted_automatically():
    s = table_with_push(staged=True, lease_ms=1)
    dead = Liveness(process_gone=True, detail="gone", lease_expires_ms=T0)
    with pytest.raises(StagedPushError, match="publish or rollback it first") as err:
        ops.push_start(s, s, "p2", claim=claim(T0 + 10**9, p1=dead))
    assert err.value.entry_id == "p1"
    assert verdict(s.lineage["p1"], dead, now_ms=T0 + 10**9, default_lease_ms=1).kind == "staged"
    # nor by vacuum, however old
    assert plan_entry_cleanup(s, now_ms=T0 + 10**10, replaced_retention_s=0, entry_retention_s=0) == []


def test_pushes_on_other_segments_do_not_block():
    s = table_with_push()
    commit(s, AddSegment(segment=seg("s9")))
    assert [e.id for e in blocking_entries(s, ["s9"])] == []
    assert [e.id for e in blocking_entries(s, ["s1", "s9"])] == ["p1"]
    empty = Snapshot()
    commit(empty, MetadataAction(table_id="t", table_schema={}))
    commit(empty, LineageStart(entry_id="p0"))
    assert [e.id for e in blocking_entries(empty, [])] == ["p0"]  # two pushes into an empty table


def test_entries_from_old_logs_without_owner_use_start_plus_default_lease():
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, LineageStart(entry_id="old"), ts=T0)
    entry = s.lineage["old"]
    assert entry.owner is None and entry.lease_expires_ms is None
    assert verdict(entry, None, now_ms=T0 + 59_000, default_lease_ms=60_000).kind == "alive"
    assert verdict(entry, None, now_ms=T0 + 60_000, default_lease_ms=60_000).kind == "expired"


def test_vacuum_reverts_dead_pushes_and_keeps_live_ones():
    s = table_with_push()
    dead = verdict(s.lineage["p1"], Liveness(True, "gone", T0 + 60_000), now_ms=T0 + 1, default_lease_ms=1)
    alive = verdict(s.lineage["p1"], Liveness(False, "running", T0 + 60_000), now_ms=T0 + 1, default_lease_ms=1)
    kw = {"now_ms": T0 + 1, "replaced_retention_s": 0, "entry_retention_s": 3600}
    assert plan_entry_cleanup(s, verdicts={"p1": alive}, **kw) == []
    (cleanup,) = plan_entry_cleanup(s, verdicts={"p1": dead}, **kw)
    assert [type(a) for a in cleanup.actions] == [LineageRevert]  # young: revert only, segments go later
    (old,) = plan_entry_cleanup(s, verdicts={"p1": dead}, **{**kw, "now_ms": T0 + 10_000, "entry_retention_s": 0})
    assert [type(a).__name__ for a in old.actions] == ["LineageRevert", "LineagePurge"]


def test_owner_lease_stage_and_reason_survive_json_and_checkpoints():
    s = table_with_push(staged=True)
    c = Commit(
        version=9,
        read_version=8,
        timestamp_ms=T0,
        operation=Operation.ROLLBACK,
        actions=(LineageRevert(entry_id="p1", reason="why"),),
    )
    assert parse_commit(c.to_json_bytes(), source="t").actions[0].reason == "why"
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    entry = back.lineage["p1"]
    assert (entry.owner, entry.lease_expires_ms, entry.staged) == (OWNER, T0 + 60_000, True)
    old = b'{"format":1,"version":0,"read_version":-1,"timestamp_ms":1,"operation":"PUSH_START","actions":[{"kind":"lineage_start","entry_id":"e"}]}'
    assert parse_commit(old, source="old").actions[0].owner is None  # logs from before owners still parse


def test_prune_forgets_removed_segments_and_old_history():
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, AddSegment(segment=seg("a")), AddSegment(segment=seg("b")))
    commit(s, RemoveSegment(segment_id="a"))
    with pytest.raises(InvalidLineageTransitionError, match="not a removed segment"):
        commit(s.copy(), PruneState(segment_ids=("b",)))
    commit(s, PruneState(segment_ids=("a",), history_before=2))
    assert set(s.segments) == {"b"} and [h.version for h in s.history] == [2, 3]
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert set(back.segments) == {"b"} and [h.version for h in back.history] == [2, 3]


def test_prune_refuses_segments_a_lineage_entry_names():
    s = table_with_push()
    commit(s, AddSegment(segment=seg("s2"), lineage_entry="p1"))
    commit(s, LineageRevert(entry_id="p1"))
    commit(s, RemoveSegment(segment_id="s2"))
    with pytest.raises(InvalidLineageTransitionError, match="lineage entry still names"):
        commit(s, PruneState(segment_ids=("s2",)))


def test_staged_pushes_from_logs_before_owners_are_recognised():
    """Before LineageStage, a staged push was an ownerless entry with data and no end."""
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, AddSegment(segment=seg("s1")))
    commit(s, LineageStart(entry_id="old", segments_from=("s1",)), ts=T0)
    commit(s, AddSegment(segment=seg("s2"), lineage_entry="old"))
    assert s.lineage["old"].staged
    assert verdict(s.lineage["old"], None, now_ms=T0 + 10**9, default_lease_ms=1).kind == "staged"
    with pytest.raises(StagedPushError):
        ops.push_start(s, s, "p2", claim=claim(T0 + 10**9, old=Liveness(True, "gone", None)))
