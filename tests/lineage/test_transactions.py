"""SetTransaction: a streaming writer's (app id, batch id) replays into the snapshot, survives
checkpoints, never goes back, and makes a replayed batch a no-op in the builder."""

from __future__ import annotations

import pytest

from mvtable.errors import CorruptMetadataError, InvalidLineageTransitionError, NothingToCommit
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import AddSegment, Commit, MetadataAction, PruneState, SegmentFile, SetTransaction, parse_commit
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.snapshot import Snapshot, apply_commit, replay


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=10, size_bytes=100)


def commit(version: int, *actions) -> Commit:
    return Commit(
        version=version, read_version=version - 1, timestamp_ms=1000 + version, operation=Operation.APPEND, actions=actions
    )


def base() -> Snapshot:
    return replay([commit(0, MetadataAction(table_id="t", table_schema={"a": "long"}))])


def test_replay_keeps_the_last_batch_of_each_application():
    s = replay(
        [
            commit(1, AddSegment(segment=seg("a")), SetTransaction(app_id="q1", batch_id=0)),
            commit(2, SetTransaction(app_id="q2", batch_id=7)),
            commit(3, AddSegment(segment=seg("b")), SetTransaction(app_id="q1", batch_id=1)),
        ],
        base=base(),
    )
    assert s.transactions == {"q1": 1, "q2": 7}
    assert s.copy().transactions == s.transactions and s.copy().transactions is not s.transactions


@pytest.mark.parametrize("batch", [3, 2])
def test_a_batch_id_cannot_repeat_or_go_back(batch):
    s = replay([commit(1, SetTransaction(app_id="q", batch_id=3))], base=base())
    with pytest.raises(InvalidLineageTransitionError, match="committed batch 3 already"):
        apply_commit(s, commit(2, SetTransaction(app_id="q", batch_id=batch)))
    with pytest.raises(CorruptMetadataError, match="log version 2"):
        replay([commit(2, SetTransaction(app_id="q", batch_id=batch))], base=s)


def test_transactions_survive_a_checkpoint():
    s = replay([commit(1, SetTransaction(app_id="q-1.a_b", batch_id=41))], base=base())
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert back.transactions == {"q-1.a_b": 41}


def test_a_checkpoint_without_transactions_reads_as_none():
    back = parse_checkpoint(checkpoint_bytes(base()), source="cp")
    assert back.transactions == {}


@pytest.mark.parametrize("bad", ['{"app_id": "q", "batch_id": -1}', '{"app_id": "../x", "batch_id": 1}', '{"app_id": "q"}'])
def test_malformed_transactions_are_corrupt_commits(bad):
    raw = (
        '{"format": 1, "version": 1, "read_version": 0, "timestamp_ms": 5, "operation": "X", "actions": [{"kind": "txn", '
        + bad[1:]
        + "]}"
    )
    with pytest.raises(CorruptMetadataError):
        parse_commit(raw.encode(), source="c")


def test_stream_batch_refuses_a_committed_batch():
    s = replay([commit(1, SetTransaction(app_id="q", batch_id=5))], base=base())
    with pytest.raises(NothingToCommit, match="batch 5 of application q"):
        ops.stream_batch(s, [seg("x")], app_id="q", batch_id=5)
    actions = ops.stream_batch(s, [seg("x")], app_id="q", batch_id=6)
    assert actions == [AddSegment(segment=seg("x")), SetTransaction(app_id="q", batch_id=6)]
    assert ops.stream_batch(s, [], app_id="other", batch_id=0) == [SetTransaction(app_id="other", batch_id=0)]


def test_complete_mode_batch_is_a_revertible_push_in_one_commit():
    s = replay([commit(1, AddSegment(segment=seg("old")))], base=base())
    actions = ops.stream_batch(s, [seg("new")], app_id="q", batch_id=0, complete_entry="push-1")
    apply_commit(s, commit(2, *actions))
    assert s.visible_segment_ids() == ["new"]
    assert s.lineage["push-1"].state == LineageState.COMPLETED and s.lineage["push-1"].segments_from == ("old",)
    apply_commit(s, commit(3, *ops.revert(s, "push-1")))
    assert s.visible_segment_ids() == ["old"]
    assert s.transactions == {"q": 0}


def test_each_application_keeps_the_time_of_its_last_batch_through_checkpoints():
    s = replay(
        [commit(1, SetTransaction(app_id="q1", batch_id=0)), commit(2, SetTransaction(app_id="q2", batch_id=0))], base=base()
    )
    apply_commit(s, commit(3, SetTransaction(app_id="q1", batch_id=1)))
    assert s.transaction_times == {"q1": 1003, "q2": 1002}
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert back.transaction_times == s.transaction_times and back.transactions == s.transactions


def test_a_checkpoint_from_before_the_times_reads_them_as_its_own_time():
    s = replay([commit(1, SetTransaction(app_id="q", batch_id=4))], base=base())
    s.transaction_times.clear()  # what a checkpoint written before the times were kept holds
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert back.transaction_times == {"q": s.timestamp_ms}  # never older than it can be: forgotten no sooner


def test_prune_forgets_idle_applications_and_only_known_ones():
    s = replay(
        [commit(1, SetTransaction(app_id="old", batch_id=9)), commit(2, SetTransaction(app_id="live", batch_id=1))], base=base()
    )
    apply_commit(s, commit(3, PruneState(app_ids=("old",))))
    assert s.transactions == {"live": 1} and set(s.transaction_times) == {"live"}
    # a forgotten application starts over: its next batch is new again
    assert ops.stream_batch(s, [], app_id="old", batch_id=0)
    with pytest.raises(InvalidLineageTransitionError, match="no record of it"):
        apply_commit(s, commit(4, PruneState(app_ids=("never",))))
