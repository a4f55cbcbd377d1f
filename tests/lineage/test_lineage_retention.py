"""Lineage retention planning: pure functions of a snapshot and a clock."""

from __future__ import annotations

from mvtable.lineage.actions import AddSegment, Commit, LineageEnd, LineageStart, MetadataAction, PushOwner, SegmentFile
from mvtable.lineage.enums import Operation
from mvtable.lineage.lineage_retention import keep_two_snapshots, plan_entry_cleanup
from mvtable.lineage.snapshot import Snapshot, apply_commit

HOUR_MS = 3_600_000


def seg(i: str) -> SegmentFile:
    return SegmentFile(id=i, path=f"data/{i}.parquet", num_rows=1, size_bytes=1)


class Builder:
    def __init__(self) -> None:
        self.s = Snapshot()
        self.ts = 1_000_000

    def commit(self, *actions, at_ms: int | None = None) -> None:
        self.ts = at_ms if at_ms is not None else self.ts + 1
        apply_commit(
            self.s,
            Commit(
                version=self.s.version + 1,
                read_version=self.s.version,
                timestamp_ms=self.ts,
                operation=Operation.APPEND,
                actions=actions,
            ),
        )

    def push(self, name: str, new: str, *, end: bool = True, at_ms: int | None = None) -> None:
        # an owner, as every push records now (an ownerless entry with data and no end is
        # a staged push of an older log, which retention leaves to a person)
        owner = PushOwner(host="h", machine="m", pid=1, start_ticks=1)
        self.commit(LineageStart(entry_id=name, segments_from=tuple(self.s.visible_segment_ids()), owner=owner), at_ms=at_ms)
        self.commit(AddSegment(segment=seg(new), lineage_entry=name), *([LineageEnd(entry_id=name)] if end else []), at_ms=at_ms)


def base() -> Builder:
    b = Builder()
    b.commit(MetadataAction(table_id="t", table_schema={}), AddSegment(segment=seg("a")))
    return b


def test_completed_entry_expires_after_replaced_retention():
    b = base()
    b.push("p1", "b")
    t_done = b.ts
    assert plan_entry_cleanup(b.s, now_ms=t_done + HOUR_MS, replaced_retention_s=86400, entry_retention_s=86400) == []
    [c] = plan_entry_cleanup(b.s, now_ms=t_done + 25 * HOUR_MS, replaced_retention_s=86400, entry_retention_s=86400)
    assert c.entry_id == "p1" and c.removed_segments == 1
    trial = b.s.copy()
    b.commit(*c.actions)
    assert b.s.lineage == {} and b.s.visible_segment_ids() == ["b"]
    assert trial.visible_segment_ids() == ["b"]


def test_reverted_and_stale_entries_use_the_cleanup_period():
    b = base()
    b.push("p1", "b", end=False)  # never finished
    t0 = b.ts
    cleanups = plan_entry_cleanup(b.s, now_ms=t0 + 2 * HOUR_MS, replaced_retention_s=0, entry_retention_s=3600)
    assert [c.entry_id for c in cleanups] == ["p1"]
    b.commit(*cleanups[0].actions)
    assert b.s.lineage == {} and b.s.visible_segment_ids() == ["a"]
    assert b.s.segments["b"].removed_version is not None


def test_keep_two_snapshots_drops_older_completed_entries():
    b = base()
    b.push("p1", "b")
    b.push("p2", "c")
    actions = keep_two_snapshots(b.s)
    b.commit(*actions)
    assert set(b.s.lineage) == {"p2"}
    assert b.s.segments["a"].removed_version is not None and b.s.segments["b"].removed_version is None
    assert keep_two_snapshots(b.s) == []
