"""The pure rules of multi-table transactions (``lineage.transactions``): prepare, finalize, what a finder does, consistency."""

from __future__ import annotations

import pytest

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import (
    ConcurrentLineageError,
    ConcurrentReplaceError,
    CorruptMetadataError,
    InvalidLineageTransitionError,
    NothingToCommit,
)
from mvtable.lineage import transactions as tx
from mvtable.lineage.actions import (
    AddSegment,
    Commit,
    LineageStart,
    MetadataAction,
    PushOwner,
    RemoveSegment,
    SegmentFile,
    SetDeletionVector,
    TransactionPrepare,
    parse_commit,
    seal,
)
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.ownership import Liveness, PushClaim, recover_blocked
from mvtable.lineage.snapshot import Snapshot, apply_commit
from mvtable.lineage.transactions import Outcome, Step

IN_PROGRESS, COMPLETED, REVERTED = LineageState.IN_PROGRESS, LineageState.COMPLETED, LineageState.REVERTED
T0 = 1_700_000_000_000
OWNER = PushOwner(host="h", machine="m", pid=42, start_ticks=1)
TXN = "txn-20260101T000000-abcdef01"


def seg(sid: str, rows: int = 10) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=rows, size_bytes=100)


def dv(cardinality: int) -> DeletionVectorRef:
    return DeletionVectorRef(cardinality=cardinality, inline="AAAA")


def commit(s: Snapshot, *actions, op: Operation = Operation.APPEND) -> Snapshot:
    c = Commit(version=s.version + 1, read_version=s.version, timestamp_ms=T0 + s.version + 1, operation=op, actions=actions)
    apply_commit(s, c)
    return s


def table() -> Snapshot:
    s = Snapshot()
    commit(s, MetadataAction(table_id="t", table_schema={}))
    commit(s, AddSegment(segment=seg("s1")), AddSegment(segment=seg("s2")))
    return s


def prepare(s: Snapshot, *, replaced=(), segments=(), clones=None, txn: str = TXN, metadata=None) -> list:
    return tx.prepare(
        s,
        transaction_id=txn,
        participants=("/a", "/b"),
        decision_uri="/a",
        replaced=list(replaced),
        segments=list(segments),
        clones=clones or {},
        owner=OWNER,
        lease_expires_ms=T0 + 60_000,
        metadata=metadata,
    )


def test_a_prepared_append_is_invisible_until_its_finalize_publishes_it():
    s = table()
    commit(s, *prepare(s, segments=[seg("n1")]), op=Operation.TXN_PREPARE)
    assert s.visible_segment_ids() == ["s1", "s2"]
    entry = s.lineage[TXN]
    assert entry.state == IN_PROGRESS and entry.staged and entry.segments_from == () and entry.segments_to == ("n1",)
    commit(s, *tx.finalize(s, TXN, target=COMPLETED), op=Operation.TXN_COMMIT)
    assert s.visible_segment_ids() == ["s1", "s2", "n1"]


def test_an_aborted_overwrite_leaves_the_table_as_it_was():
    s = table()
    commit(s, *prepare(s, replaced=["s1", "s2"], segments=[seg("n1")]))
    assert s.visible_segment_ids() == ["s1", "s2"]
    commit(s, *tx.finalize(s, TXN, target=REVERTED, reason="aborted"))
    assert s.visible_segment_ids() == ["s1", "s2"] and s.lineage[TXN].revert_reason == "aborted"


def test_a_committed_overwrite_replaces_what_it_read():
    s = table()
    commit(s, *prepare(s, replaced=["s1", "s2"], segments=[seg("n1")]))
    commit(s, *tx.finalize(s, TXN, target=COMPLETED))
    assert s.visible_segment_ids() == ["n1"]


def test_a_delete_is_a_clone_with_its_deletion_vector_shown_at_finalize_and_later_deletes_merge_in():
    s = table()
    clone = seg("c1")
    commit(s, *prepare(s, clones={"s1": (clone, dv(2))}))
    assert s.visible_segment_ids() == ["s1", "s2"] and s.dvs["c1"].cardinality == 2
    commit(s, SetDeletionVector(segment_id="s1", dv=dv(1)))  # a concurrent delete on the held original lands
    commit(s, *tx.finalize(s, TXN, target=COMPLETED, dvs={"c1": dv(3)}))
    assert s.visible_segment_ids() == ["s2", "c1"] and s.dvs["c1"].cardinality == 3


def test_prepare_holds_its_segments_against_other_replaces():
    s = table()
    commit(s, *prepare(s, replaced=["s1", "s2"], segments=[seg("n1")]))
    with pytest.raises(InvalidLineageTransitionError):  # an overwrite removing a held segment
        commit(s.copy(), RemoveSegment(segment_id="s1"))
    with pytest.raises(ConcurrentLineageError, match="in progress over the same segments"):
        prepare(s, replaced=["s1"], txn="txn-other-1")


def test_prepare_conflicts_when_what_it_replaces_is_gone():
    s = table()
    read = s.copy()
    commit(s, RemoveSegment(segment_id="s1"))
    with pytest.raises(ConcurrentReplaceError):
        prepare(s, replaced=read.visible_segment_ids(), segments=[seg("n1")])
    assert prepare(s, segments=[seg("n2")])  # an append never conflicts


def test_push_recovery_never_reverts_a_transaction_entry():
    # the entry is staged: only the transaction's decision may end it, never a dead-owner cleanup
    s = table()
    commit(s, *prepare(s, replaced=["s1", "s2"], segments=[seg("n1")]))
    gone = Liveness(process_gone=True, detail="gone", lease_expires_ms=0)
    claim = PushClaim(owner=OWNER, lease_ms=1, now_ms=T0 + 10**9, liveness={TXN: gone})
    with pytest.raises(InvalidLineageTransitionError):
        recover_blocked(s, ["s1", "s2"], claim)


@pytest.mark.parametrize(
    ("decision", "rolled_back", "state", "expected"),
    [
        (None, False, IN_PROGRESS, Step.NONE),
        (Outcome.COMMITTED, False, IN_PROGRESS, Step.PUBLISH),
        (Outcome.COMMITTED, False, COMPLETED, Step.NONE),
        (Outcome.ABORTED, False, IN_PROGRESS, Step.REVERT),
        (Outcome.ABORTED, False, REVERTED, Step.NONE),
        (Outcome.COMMITTED, True, COMPLETED, Step.REVERT),
        (Outcome.COMMITTED, True, IN_PROGRESS, Step.REVERT),
        (Outcome.COMMITTED, True, REVERTED, Step.NONE),
    ],
)
def test_what_a_finder_does_in_each_state(decision, rolled_back, state, expected):
    s = table()
    commit(s, *prepare(s, segments=[seg("n1")]))
    entry = s.lineage[TXN]
    entry.state = state
    assert tx.step(entry, tx.target_state(decision, rolled_back=rolled_back)) == expected
    assert tx.step(None, tx.target_state(decision, rolled_back=rolled_back)) == Step.NONE  # purged


def test_finalize_twice_commits_nothing():
    s = table()
    commit(s, *prepare(s, segments=[seg("n1")]))
    commit(s, *tx.finalize(s, TXN, target=COMPLETED))
    with pytest.raises(NothingToCommit):
        tx.finalize(s, TXN, target=COMPLETED)
    with pytest.raises(NothingToCommit, match="purged"):
        tx.finalize(table(), TXN, target=COMPLETED)


def test_mismatched_names_every_transaction_a_set_of_versions_shows_in_part():
    a, b = table(), table()
    commit(a, *prepare(a, segments=[seg("n1")]))
    commit(b, *prepare(b, segments=[seg("m1")]))
    parts = {TXN: ("/a", "/b")}
    assert tx.mismatched({"/a": a, "/b": b}, parts) == {}  # prepared in both: invisible in both
    a_before = a.copy()
    commit(a, *tx.finalize(a, TXN, target=COMPLETED))
    assert tx.mismatched({"/a": a, "/b": b}, parts) == {TXN: ["/a", "/b"]}
    commit(b, *tx.finalize(b, TXN, target=COMPLETED))
    assert tx.mismatched({"/a": a, "/b": b}, parts) == {}
    assert tx.mismatched({"/a": a_before, "/b": b}, parts) == {TXN: ["/a", "/b"]}
    assert tx.mismatched({"/a": a, "/b": table()}, parts) == {TXN: ["/a", "/b"]}  # b read before its prepare
    assert tx.mismatched({"/a": a}, parts) == {}  # a table set without the other participant


def test_the_prepare_record_survives_its_commit_file_and_checkpoints_keep_the_entry():
    s = table()
    actions = prepare(s, replaced=["s1"], segments=[seg("n1")], clones={"s2": (seg("c2"), dv(1))})
    c = Commit(version=2, read_version=1, timestamp_ms=T0, operation=Operation.TXN_PREPARE, actions=actions)
    back = parse_commit(c.to_json_bytes(), source="t", expected_version=2)
    (record,) = [a for a in back.actions if isinstance(a, TransactionPrepare)]
    assert record.participants == ("/a", "/b") and record.decision_uri == "/a" and record.clones == {"c2": "s2"}
    apply_commit(s, back)
    again = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert again.lineage[TXN].staged and again.lineage[TXN].state == IN_PROGRESS
    assert again.visible_segment_ids() == s.visible_segment_ids() == ["s1", "s2"]


def test_a_prepare_record_must_name_its_peers():
    bad = Commit(version=0, read_version=-1, timestamp_ms=T0, operation=Operation.TXN_PREPARE, actions=())
    doc = bad.model_dump_json().replace(
        '"actions":[]', '"actions":[{"kind":"txn_prepare","transaction_id":"txn-x","participants":[],"decision_uri":"/a"}]'
    )
    with pytest.raises(CorruptMetadataError, match="participants"):
        parse_commit(seal(doc.encode()), source="t")


def test_lineage_start_of_a_transaction_is_an_ordinary_entry_id():
    assert tx.is_transaction(TXN) and not tx.is_transaction("push-20260101T000000-abcdef01")
    s = table()
    commit(s, LineageStart(entry_id="push-1", segments_from=("s1",)))
    assert [e.id for e in tx.transaction_entries(s)] == []
