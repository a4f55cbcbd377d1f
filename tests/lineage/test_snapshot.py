"""Replay and the lineage rules, by example. The random exploration is in
test_state_machine.py; these pin down the individual rules and the bugs found there."""

from __future__ import annotations

import pytest

from mvtable.errors import CorruptMetadataError, InvalidLineageTransitionError, SegmentInUseError
from mvtable.lineage.actions import (
    AddSegment,
    Commit,
    DeletionVectorRef,
    LineageEnd,
    LineagePurge,
    LineageRevert,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    SegmentFile,
    SetDeletionVector,
)
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.snapshot import Snapshot, apply_commit, replay


def seg(sid: str, rows: int = 10) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=rows, size_bytes=100)


def add(*sids: str, entry: str | None = None) -> list[AddSegment]:
    return [AddSegment(segment=seg(s), lineage_entry=entry) for s in sids]


def remove(*sids: str) -> list[RemoveSegment]:
    return [RemoveSegment(segment_id=s) for s in sids]


def start(eid: str, frm=(), to=()) -> LineageStart:
    return LineageStart(entry_id=eid, segments_from=tuple(frm), segments_to=tuple(to))


class Table:
    """A snapshot plus the commits that made it; ``do`` applies on a copy like the commit loop."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        self.snap = Snapshot()
        self.commits: list[Commit] = []
        self.do(MetadataAction(table_id="t", table_schema={"a": "long"}, properties=properties or {}))

    def commit(self, *actions, ts: int | None = None) -> Commit:
        flat = []
        for a in actions:
            flat.extend(a if isinstance(a, list) else [a])
        return Commit(
            version=self.snap.version + 1,
            read_version=self.snap.version,
            timestamp_ms=ts if ts is not None else 1000 + self.snap.version + 1,
            operation=Operation.APPEND,
            actions=tuple(flat),
        )

    def do(self, *actions, ts: int | None = None) -> Snapshot:
        c = self.commit(*actions, ts=ts)
        trial = self.snap.copy()
        apply_commit(trial, c)
        self.snap = trial
        self.commits.append(c)
        return trial

    def refused(self, *actions, error=InvalidLineageTransitionError) -> InvalidLineageTransitionError:
        before = checkpoint_bytes(self.snap)
        with pytest.raises(error) as info:
            self.do(*actions)
        assert checkpoint_bytes(self.snap) == before
        return info.value

    @property
    def visible(self) -> list[str]:
        return self.snap.visible_segment_ids()

    def state(self, eid: str) -> str:
        return self.snap.lineage[eid].state

    def durable_forms_agree(self) -> None:
        assert replay(self.commits) == self.snap
        assert parse_checkpoint(checkpoint_bytes(self.snap), source="cp") == self.snap


# -- basics --------------------------------------------------------------------------------
def test_first_commit_must_carry_metadata() -> None:
    c = Commit(version=0, read_version=-1, timestamp_ms=1, operation=Operation.APPEND, actions=tuple(add("a")))
    with pytest.raises(InvalidLineageTransitionError):
        apply_commit(Snapshot(), c)


def test_versions_must_follow_each_other() -> None:
    t = Table()
    c = t.commit(add("a"))
    skipped = c.model_copy(update={"version": c.version + 1})
    with pytest.raises(InvalidLineageTransitionError):
        apply_commit(t.snap.copy(), skipped)
    with pytest.raises(InvalidLineageTransitionError):
        apply_commit(t.snap.copy(), c.model_copy(update={"version": 0}))


def test_table_id_cannot_change() -> None:
    t = Table()
    t.refused(MetadataAction(table_id="other", table_schema={}))
    t.do(MetadataAction(table_id="t", table_schema={"a": "long", "b": "string"}, properties={"x": "1"}))
    assert t.snap.properties == {"x": "1"} and "b" in t.snap.table_schema


def test_append_and_overwrite_visibility_in_add_order() -> None:
    t = Table()
    t.do(add("c", "a"))
    t.do(add("b"))
    assert t.visible == ["c", "a", "b"]
    t.do(remove("c", "a", "b"), add("d"))
    assert t.visible == ["d"]
    assert t.snap.segments["a"].removed_version == 3  # the file stays known for time travel
    t.refused(add("a"))  # segment ids are never reused
    t.refused(remove("a"))  # nor removed twice
    t.refused(remove("nope"))
    t.durable_forms_agree()


def test_a_copy_shares_segment_states_until_a_commit_replaces_them() -> None:
    # copies share SegmentState records (copying them all made appends slower as the table
    # grew), so applying a commit must replace a record, never change it in place
    t = Table()
    t.do(add("a", "b"))
    copy = t.snap.copy()
    assert copy.segments["a"] is t.snap.segments["a"]
    apply_commit(copy, t.commit(remove("a")))
    assert copy.segments["a"].removed_version == copy.version
    assert t.snap.segments["a"].removed_version is None and t.visible == ["a", "b"]
    assert copy.segments["b"] is t.snap.segments["b"]


def test_copy_is_independent() -> None:
    t = Table()
    t.do(add("a", "b"), start("e", ["a"], []), add("x", entry="e"))
    copy = t.snap.copy()
    apply_commit(
        copy,
        t.commit(LineageEnd(entry_id="e"), SetDeletionVector(segment_id="b", dv=DeletionVectorRef(cardinality=1, inline="AA"))),
    )
    assert t.state("e") == LineageState.IN_PROGRESS and copy.lineage["e"].state == LineageState.COMPLETED
    assert "b" not in t.snap.dvs and t.visible == ["a", "b"]
    assert t.snap.version + 1 == copy.version and len(t.snap.history) + 1 == len(copy.history)


def test_replay_does_not_touch_its_base() -> None:
    t = Table()
    t.do(add("a"))
    base = t.snap.copy()
    frozen = checkpoint_bytes(base)
    later = replay([t.commit(remove("a"), add("b"))], base=base)
    assert later.visible_segment_ids() == ["b"]
    assert checkpoint_bytes(base) == frozen


def test_replay_of_an_invalid_log_is_a_corrupt_metadata_error() -> None:
    t = Table()
    t.do(add("a"))
    bad = t.commit(remove("zzz"))
    with pytest.raises(CorruptMetadataError) as info:
        replay([*t.commits, bad])
    assert "log version 2" in str(info.value)


# -- deletion vectors ------------------------------------------------------------------------
def test_deletion_vectors() -> None:
    t = Table()
    t.do(add("a", "b"))
    dv1 = DeletionVectorRef(cardinality=2, inline="AA")
    dv2 = DeletionVectorRef(cardinality=3, path="_mvtable/dv/x.dv", offset=0, size=10)
    t.do(SetDeletionVector(segment_id="a", dv=dv1))
    t.do(SetDeletionVector(segment_id="a", dv=dv2))
    assert t.snap.dvs == {"a": dv2}  # the newest cumulative DV wins
    t.refused(SetDeletionVector(segment_id="b", dv=DeletionVectorRef(cardinality=11, inline="AA")))  # more than num_rows
    t.refused(SetDeletionVector(segment_id="nope", dv=dv1))
    t.do(remove("a"))
    assert t.snap.dvs == {}
    t.refused(SetDeletionVector(segment_id="a", dv=dv1))
    t.durable_forms_agree()


# -- consistent push ---------------------------------------------------------------------------
def test_consistent_push_then_revert_brings_the_old_snapshot_back() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e1", ["a", "b"]), add("x", entry="e1"))
    assert t.visible == ["a", "b"] and t.state("e1") == LineageState.IN_PROGRESS  # the push is invisible
    t.do(add("y", entry="e1"))
    assert t.snap.lineage["e1"].segments_to == ("x", "y")
    assert t.visible == ["a", "b"]
    t.do(LineageEnd(entry_id="e1"))
    assert t.visible == ["x", "y"] and t.state("e1") == LineageState.COMPLETED  # one atomic swap
    t.do(LineageRevert(entry_id="e1"))
    assert t.visible == ["a", "b"] and t.state("e1") == LineageState.REVERTED
    t.refused(LineageRevert(entry_id="e1"))
    t.refused(LineageEnd(entry_id="e1"))
    t.refused(add("z", entry="e1"))
    t.durable_forms_agree()


def test_push_of_a_subset_keeps_the_rest_and_concurrent_appends_visible() -> None:
    t = Table()
    t.do(add("a", "b", "c"))
    t.do(start("e", ["a", "b"]), add("ab", entry="e"))
    t.do(add("late"))  # an append while the push runs: visible at once, never replaced
    t.do(LineageEnd(entry_id="e"))
    assert sorted(t.visible) == ["ab", "c", "late"]


def test_revert_of_an_in_progress_push() -> None:
    t = Table()
    t.do(add("a"))
    t.do(start("e", ["a"]), add("x", entry="e"))
    t.do(LineageRevert(entry_id="e"))
    assert t.visible == ["a"] and t.state("e") == LineageState.REVERTED
    t.refused(LineageEnd(entry_id="e"))
    t.do(start("e2", ["a"]))  # what a reverted push read may be pushed over again
    t.durable_forms_agree()


def test_start_needs_visible_segments_from() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e", ["a"]), add("x", entry="e"))
    t.refused(start("f", ["x"]))  # pushed but not ended
    t.refused(start("f", ["nope"]))
    t.do(LineageEnd(entry_id="e"))
    t.refused(start("f", ["a"]))  # replaced
    t.do(remove("b"))
    t.refused(start("f", ["b"]))  # removed
    t.refused(start("e", []))  # entry ids are unique
    t.do(start("f", ["x"]))


def test_two_pushes_cannot_replace_the_same_segment_at_once() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e", ["a"]))
    t.refused(start("f", ["a", "b"]))
    t.do(start("f", ["b"]))
    t.do(LineageRevert(entry_id="e"))
    t.do(start("g", ["a"]))


def test_end_rechecks_what_it_replaces() -> None:
    t = Table()
    t.do(add("a"))
    t.do(start("e", ["a"], ["x"]))
    t.refused(LineageEnd(entry_id="e"))  # declared output not uploaded yet
    t.do(add("x"))
    assert t.visible == ["a"]  # an upload of a declared segment joins the push
    t.do(LineageEnd(entry_id="e"))
    assert t.visible == ["x"]


def test_segments_held_by_a_live_push_cannot_be_removed_another_way() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e", ["a"]), add("x", entry="e"))
    t.refused(remove("a"), error=SegmentInUseError)  # its input
    t.refused(remove("x"), error=SegmentInUseError)  # its output
    t.refused(remove("b", "a"), add("c"), error=SegmentInUseError)  # an overwrite: all or nothing
    assert sorted(t.visible) == ["a", "b"]
    t.do(LineageEnd(entry_id="e"))
    t.do(remove("a"))  # retention of a COMPLETED push's input is fine
    t.durable_forms_agree()


# -- revert blockers -------------------------------------------------------------------------
@pytest.fixture
def completed() -> Table:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e1", ["a"]), add("x", entry="e1"))
    t.do(LineageEnd(entry_id="e1"))
    assert sorted(t.visible) == ["b", "x"]
    return t


def test_revert_refused_while_a_live_push_replaces_the_output(completed: Table) -> None:
    t = completed
    t.do(start("e2", ["x"]), add("y", entry="e2"))
    t.refused(LineageRevert(entry_id="e1"))  # e2 IN_PROGRESS on x
    t.do(LineageEnd(entry_id="e2"))
    t.refused(LineageRevert(entry_id="e1"))  # e2 COMPLETED over x
    t.do(LineageRevert(entry_id="e2"))
    t.do(LineageRevert(entry_id="e1"))  # undo in reverse order works
    assert sorted(t.visible) == ["a", "b"]
    t.durable_forms_agree()


def test_revert_refused_once_the_output_was_overwritten(completed: Table) -> None:
    t = completed
    t.do(remove("x", "b"), add("o"))
    t.refused(LineageRevert(entry_id="e1"))
    assert t.visible == ["o"]


def test_revert_refused_once_retention_removed_the_replaced_segments(completed: Table) -> None:
    t = completed
    t.do(remove("a"))
    t.refused(LineageRevert(entry_id="e1"))


def test_revert_allowed_when_the_later_push_was_reverted_or_appends_came_in(completed: Table) -> None:
    t = completed
    t.do(add("late"))
    t.do(start("e2", ["x"]))
    t.do(LineageRevert(entry_id="e2"))
    t.do(LineageRevert(entry_id="e1"))
    assert sorted(t.visible) == ["a", "b", "late"]


# -- purge -----------------------------------------------------------------------------------
def test_purge_needs_the_hidden_segments_removed(completed: Table) -> None:
    t = completed
    t.refused(LineagePurge(entry_id="e1"))
    t.do(remove("a"), LineagePurge(entry_id="e1"))
    assert "e1" not in t.snap.lineage and sorted(t.visible) == ["b", "x"]
    t.do(start("e2", ["x"]), add("y", entry="e2"))
    t.refused(LineagePurge(entry_id="e2"))  # IN_PROGRESS
    t.do(LineageRevert(entry_id="e2"))
    t.refused(LineagePurge(entry_id="e2"))
    t.do(remove("y"), LineagePurge(entry_id="e2"))
    assert sorted(t.visible) == ["b", "x"]
    t.durable_forms_agree()


# -- segments_to declared at start (bugs found by the state machine) -------------------------
def test_purge_of_a_reverted_push_whose_declared_output_never_arrived() -> None:
    """Used to raise a bare KeyError from inside apply_commit."""
    t = Table()
    t.do(add("a"))
    t.do(start("e", ["a"], ["never"]))
    t.do(LineageRevert(entry_id="e"))
    t.do(LineagePurge(entry_id="e"))
    assert t.visible == ["a"] and not t.snap.lineage
    t.durable_forms_agree()


def test_checkpoint_of_a_push_with_declared_output_round_trips() -> None:
    """Used to be written fine and then refused on read ("names unknown segments")."""
    t = Table()
    t.do(add("a"))
    t.do(start("e", ["a"], ["x", "y"]), add("x"))
    t.durable_forms_agree()
    t.do(LineageRevert(entry_id="e"))
    t.durable_forms_agree()


def test_two_pushes_cannot_declare_the_same_output() -> None:
    """Used to be accepted: once one push was REVERTED, the other's COMPLETED output stayed
    hidden forever (the REVERTED entry hides its segments_to)."""
    t = Table()
    t.do(add("a", "b"))
    t.do(start("e1", ["a"], ["x"]))
    t.refused(start("e2", ["b"], ["x"]))
    t.do(start("e2", ["b"]))
    t.refused(add("x", entry="e2"))  # nor claim it when uploading
    t.do(add("x", entry="e1"))
    t.do(LineageEnd(entry_id="e1"))
    assert sorted(t.visible) == ["b", "x"]


def test_uploading_a_declared_segment_does_not_duplicate_it() -> None:
    t = Table()
    t.do(start("e", [], ["x"]), add("x", entry="e"))
    assert t.snap.lineage["e"].segments_to == ("x",)
    t.do(LineageEnd(entry_id="e"))
    assert t.visible == ["x"]


def test_unknown_entries() -> None:
    t = Table()
    for action in (LineageEnd(entry_id="nope"), LineageRevert(entry_id="nope"), LineagePurge(entry_id="nope")):
        t.refused(action)
    t.refused(add("a", entry="nope"))
