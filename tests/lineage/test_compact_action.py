"""The ``compact`` action: replay rules, lineage substitution, the pure builder's blockers,
and what GC's commit summary takes from it. Pure: no files, no JVM."""

from __future__ import annotations

import pytest

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import SegmentInUseError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import (
    AddSegment,
    CompactedInput,
    CompactSegments,
    LineageEnd,
    LineageRevert,
    SegmentFile,
    SetDeletionVector,
)
from mvtable.lineage.summary import parse_commit_summary

from .test_snapshot import Table, add, start


def dv(cardinality: int, path: str | None = None) -> DeletionVectorRef:
    if path is None:
        return DeletionVectorRef(cardinality=cardinality, inline="AAAA")
    return DeletionVectorRef(cardinality=cardinality, path=path, offset=4, size=10)


def out(sid: str, rows: int) -> AddSegment:
    return AddSegment(segment=SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=rows, size_bytes=100))


def moved(sid: str, output: str | None, first_row: int, deleted: DeletionVectorRef | None = None) -> CompactedInput:
    return CompactedInput(segment_id=sid, output=output, first_row=first_row, dv=deleted)


def compact(*inputs: CompactedInput) -> CompactSegments:
    return CompactSegments(inputs=inputs)


def test_compaction_replaces_inputs_by_outputs() -> None:
    t = Table()
    t.do(add("a", "b", "c"))  # 10 rows each
    t.do(SetDeletionVector(segment_id="b", dv=dv(4)))
    t.do(out("x", 26), compact(moved("a", "x", 0), moved("b", "x", 10, dv(4)), moved("c", "x", 16)))
    assert t.visible == ["x"]
    assert "b" not in t.snap.dvs and t.snap.segments["b"].removed_version == t.snap.version
    t.durable_forms_agree()


@pytest.mark.parametrize(
    "actions",
    [
        [out("x", 19), compact(moved("a", "x", 0), moved("b", "x", 10))],  # rows do not add up
        [out("x", 20), compact(moved("a", "x", 0), moved("b", "x", 11))],  # gap in the output
        [out("x", 20), compact(moved("b", "x", 10), moved("a", "x", 0))],  # out of order
        [compact(moved("a", "x", 0))],  # output not added by this commit
        [out("x", 10), compact(moved("a", None, 0), moved("b", "x", 0))],  # live rows without an output
        [out("x", 20), compact(moved("a", "x", 0), moved("gone", "x", 10))],  # unknown input
    ],
)
def test_inconsistent_row_maps_are_refused(actions) -> None:
    t = Table()
    t.do(add("a", "b"))
    t.refused(*actions)


def test_an_output_that_existed_before_is_refused() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(out("x", 0))
    t.refused(compact(moved("a", "x", 0)))


def test_the_model_refuses_duplicate_inputs_and_outputs_among_inputs() -> None:
    with pytest.raises(ValueError):
        compact(moved("a", "x", 0), moved("a", "x", 10))
    with pytest.raises(ValueError):
        compact(moved("a", "b", 0), moved("b", "c", 0))


def test_fully_deleted_inputs_need_no_output() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(SetDeletionVector(segment_id="a", dv=dv(10)))
    t.do(out("x", 10), compact(moved("a", None, 0, dv(10)), moved("b", "x", 0)))
    assert t.visible == ["x"]


def test_segments_held_by_a_push_in_progress_are_never_compacted() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("p", frm=["a", "b"]))  # staged or running push holds a and b
    t.refused(out("x", 20), compact(moved("a", "x", 0), moved("b", "x", 10)), error=SegmentInUseError)
    assert ops.compaction_candidates(t.snap) == {}
    assert "consistent push in progress" in (ops.compaction_blocker(t.snap, ["a"]) or "")


def test_a_compacted_push_rolls_back_exactly() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(start("p", frm=["a", "b"]))
    t.do(add("c", "d", entry="p"), LineageEnd(entry_id="p"))
    t.do(add("e"))  # a plain append after the push
    assert ops.compaction_candidates(t.snap) == {"c": "p", "d": "p", "e": None}
    # one output for the push's segments; mixing the plain append in is refused
    t.refused(out("x", 30), compact(moved("c", "x", 0), moved("d", "x", 10), moved("e", "x", 20)))
    t.do(out("x", 20), compact(moved("c", "x", 0), moved("d", "x", 10)))
    assert t.snap.lineage["p"].segments_to == ("x",)
    assert t.snap.segments["x"].lineage_entry == "p"
    assert sorted(t.visible) == ["e", "x"]
    assert ops.compaction_candidates(t.snap) == {"e": None, "x": "p"}
    t.do(LineageRevert(entry_id="p"))
    assert sorted(t.visible) == ["a", "b", "e"]  # the pushed rows are gone, the replaced ones back
    t.durable_forms_agree()


def test_blockers_name_what_happened() -> None:
    t = Table()
    t.do(add("a", "b", "c"))
    assert ops.compaction_blocker(t.snap, ["a", "b"]) is None
    t.do(out("x", 20), compact(moved("a", "x", 0), moved("b", "x", 10)))
    assert "removed or compacted" in (ops.compaction_blocker(t.snap, ["a", "c"]) or "")
    t.do(start("p", frm=["c", "x"]))
    t.do(add("d", entry="p"), LineageEnd(entry_id="p"))
    assert "replaced by a consistent push" in (ops.compaction_blocker(t.snap, ["c"]) or "")
    t.do(add("e"))
    assert "lineage origin" in (ops.compaction_blocker(t.snap, ["d", "e"]) or "")


def test_builder_puts_outputs_before_their_deletes_and_row_map() -> None:
    t = Table()
    t.do(add("a", "b"))
    rewritten = [([moved("a", "x", 0), moved("b", "x", 10)], out("x", 20).segment)]
    actions = ops.compact(t.snap, rewritten, {"x": dv(3)})
    assert [a.kind for a in actions] == ["add", "dv", "compact"]
    t.do(*actions)
    assert t.snap.dvs["x"].cardinality == 3


def test_gc_summary_keeps_row_map_deletion_vectors() -> None:
    t = Table()
    t.do(add("a", "b"))
    t.do(SetDeletionVector(segment_id="a", dv=dv(2, "_mvtable/dv/one.dv")))
    t.do(out("x", 18), compact(moved("a", "x", 0, dv(2, "_mvtable/dv/one.dv")), moved("b", "x", 8)))
    summary = parse_commit_summary(t.commits[-1].to_json_bytes(), source="log")
    assert set(summary.removed) == {"a", "b"}
    assert summary.dv_paths == {"_mvtable/dv/one.dv"}
