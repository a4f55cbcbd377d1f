"""Compaction per partition: where= limits a run, and old segments move into a new grain (HOUR → DAY)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable import Table
from mvtable.errors import InvalidFilterError

_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string())])
_BASE = dt.datetime(2024, 1, 1)


def _rows(hours: list[int], start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": list(range(start, start + len(hours))),
            "ts": [_BASE + dt.timedelta(hours=h) for h in hours],
            "v": [f"r{h}" for h in hours],
        },
        schema=_SCHEMA,
    )


def _sorted(t: Table, **kw) -> list[int]:
    return sorted(t.scan(**kw).to_arrow()["id"].to_pylist())


def test_where_limits_compaction_to_the_partitions_it_may_match(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    for i in range(3):  # three small segments in each of two days
        t.append(_rows([i, 24 + i], start=10 * i))
    day2 = (pc.field("ts") >= _BASE + dt.timedelta(days=1)) & (pc.field("ts") < _BASE + dt.timedelta(days=2))
    result = t.compact(min_input_files=2, where=day2)
    assert result.bins == 1
    by_day = {}
    for seg in t.snapshot().visible_segments():
        by_day.setdefault(seg.file.partition, []).append(seg.id)
    assert sorted(len(v) for v in by_day.values()) == [1, 3]  # day 2 in one segment, day 1 untouched
    with pytest.raises(InvalidFilterError):
        t.compact(where=pc.field("nope") == 1)


def test_compaction_moves_hour_segments_into_days_and_time_travel_sees_each_version(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)"])
    t.append(_rows([0, 1, 2, 25, 26]))  # five hour partitions over two days
    t.delete(pc.field("id") == 1)
    hourly = t.version
    t.update_partitioning(["day(ts)"])
    t.append(_rows([3, 27], start=100))  # new writes: day segments, beside the hour ones
    before = t.version
    result = t.compact(min_input_files=100)  # no size-driven bins: only the grain change
    assert result.bins == 2
    snap = t.snapshot()
    assert {(s.file.spec_id, s.file.partition) for s in snap.visible_segments()} == {(2, (19723,)), (2, (19724,))}
    assert _sorted(t) == [0, 2, 3, 4, 100, 101]
    # each version as it was
    assert len(t.snapshot(version=hourly).visible_segments()) == 5
    assert _sorted(t, version=before) == [0, 2, 3, 4, 100, 101]
    assert {s.file.spec_id for s in t.snapshot(version=before).visible_segments()} == {1, 2}
    # pruning by day reads one segment
    day1 = (pc.field("ts") >= _BASE) & (pc.field("ts") < _BASE + dt.timedelta(days=1))
    scan = t.scan(filter=day1)
    assert len(scan.plan.tasks) == 1 and _sorted(t, filter=day1) == [0, 2, 100]


def test_a_segment_that_would_have_to_be_split_keeps_its_spec(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    t.append(_rows([0, 5]))  # one day segment spanning two hours
    t.update_partitioning(["hour(ts)"])
    t.compact(min_input_files=100)
    assert [s.file.spec_id for s in t.snapshot().visible_segments()] == [1]
    assert _sorted(t, filter=pc.field("ts") == _BASE + dt.timedelta(hours=5)) == [1]


def test_compaction_beside_a_push_of_another_day_and_rollback_after_regrain(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)"])
    t.append(_rows([0, 1]))
    push = t.overwrite(_rows([2, 3], start=50), consistent_push=True)
    t.update_partitioning(["day(ts)"])
    t.compact(min_input_files=100)
    # the push's rows were compacted into a day segment of its own origin: rolling it back still hides exactly them
    assert push.entry is not None
    t.rollback(entry=push.entry)
    assert _sorted(t) == [0, 1]
