"""Planning rules, on snapshots built by replay (no files): small vs worn inputs, the
minimum number of inputs, one origin per bin, held segments left out, commit batches."""

from __future__ import annotations

from mvtable.connector.compaction import CompactionOptions, plan_bins
from mvtable.connector.compaction.plan import commit_batches
from mvtable.dvref import DeletionVectorRef
from mvtable.lineage.actions import AddSegment, LineageEnd, LineageStart, SegmentFile, SetDeletionVector

from ..lineage.test_snapshot import Table

OPTIONS = CompactionOptions(target_file_size=1000, min_input_files=3, delete_ratio=0.3, max_bytes_per_commit=1000)


def seg(sid: str, size: int, rows: int = 100) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=rows, size_bytes=size)


def adds(*specs: tuple[str, int], entry: str | None = None) -> list[AddSegment]:
    return [AddSegment(segment=seg(sid, size), lineage_entry=entry) for sid, size in specs]


def deleted(sid: str, n: int) -> SetDeletionVector:
    return SetDeletionVector(segment_id=sid, dv=DeletionVectorRef(cardinality=n, inline="AAAA"))


def ids(bins) -> list[tuple[str, ...]]:
    return [b.segment_ids for b in bins]


def test_small_segments_are_packed_in_order_up_to_the_target() -> None:
    t = Table()
    t.do(adds(("a", 300), ("b", 300), ("c", 300), ("d", 300), ("big", 900), ("e", 100)))
    # big is not small (>= 3/4 of the target); a-c fill one bin, d+e are too few
    assert ids(plan_bins(t.snap, OPTIONS)) == [("a", "b", "c")]


def test_worn_segments_are_rewritten_even_alone_and_small_ones_never_alone() -> None:
    t = Table()
    t.do(adds(("big", 5000), ("a", 100)))
    t.do(deleted("big", 30), deleted("a", 10))
    bins = plan_bins(t.snap, OPTIONS)
    assert ids(bins) == [("big",)] and bins[0].worn == ("big",) and bins[0].rows_dropped == 30
    one = CompactionOptions(target_file_size=1000, min_input_files=1, delete_ratio=0.3, max_bytes_per_commit=1000)
    assert ids(plan_bins(t.snap, one)) == [("big",)]  # "a" alone and not worn: nothing to gain


def test_bins_keep_to_one_origin_and_skip_held_segments() -> None:
    t = Table()
    t.do(adds(("a", 100), ("b", 100), ("c", 100)))
    t.do(LineageStart(entry_id="p", segments_from=("a", "b", "c")))
    t.do(adds(("x", 100), ("y", 100), ("z", 100), entry="p"), LineageEnd(entry_id="p"))
    t.do(adds(("m", 100), ("n", 100), ("o", 100)))
    bins = plan_bins(t.snap, OPTIONS)
    assert ids(bins) == [("x", "y", "z"), ("m", "n", "o")] and [b.origin for b in bins] == ["p", None]
    assert ids(plan_bins(t.snap, OPTIONS, only={"n"})) == [("m", "n", "o")]
    t.do(LineageStart(entry_id="q", segments_from=("x", "y", "z", "m", "n", "o")))  # a push in progress holds them all
    assert plan_bins(t.snap, OPTIONS) == []


def test_commit_batches_are_bounded_by_input_bytes() -> None:
    t = Table()
    t.do(adds(*[(f"s{i}", 200) for i in range(9)]))
    bins = plan_bins(t.snap, CompactionOptions(600, 3, 0.3, 1000))
    assert [len(b.inputs) for b in bins] == [3, 3, 3]
    assert [[b.segment_ids for b in batch] for batch in commit_batches(bins, 1000)] == [
        [("s0", "s1", "s2")],
        [("s3", "s4", "s5")],
        [("s6", "s7", "s8")],
    ]
    assert len(commit_batches(bins, 1200)) == 2


def test_bins_never_mix_partitions() -> None:
    from mvtable.lineage.actions import MetadataAction
    from mvtable.lineage.partitioning import PartitionField, PartitionSpec

    spec = PartitionSpec(spec_id=1, fields=(PartitionField(source_id=1, field_id=1000, name="d", transform="day"),))
    t = Table()
    t.do([MetadataAction(table_id="t", table_schema={"fields": []}, partition_specs=(spec,), default_spec_id=1)])
    parted = [
        AddSegment(segment=seg(sid, 100).model_copy(update={"spec_id": 1, "partition": (day,)}))
        for sid, day in (("a", 1), ("b", 2), ("c", 1), ("d", 2), ("e", 1), ("f", None))
    ]
    t.do(parted + [AddSegment(segment=seg("g", 100)), AddSegment(segment=seg("h", 100)), AddSegment(segment=seg("i", 100))])
    bins = plan_bins(t.snap, OPTIONS)
    assert ids(bins) == [("a", "c", "e"), ("g", "h", "i")]  # day 2 and the null partition have too few
    assert [(b.spec_id, b.partition) for b in bins] == [(1, (1,)), (None, None)]
