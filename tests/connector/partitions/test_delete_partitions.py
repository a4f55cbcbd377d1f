"""A delete whose filter covers whole partitions drops their segments: no file read, no deletion vector."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from mvtable import Table
from mvtable.lineage.actions import RemoveSegment, SetDeletionVector

_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("region", pa.string())])
_BASE = dt.datetime(2024, 1, 1)


def _rows(days: int, per_day: int = 4) -> pa.Table:
    ts = [_BASE + dt.timedelta(days=d, hours=h) for d in range(days) for h in range(per_day)]
    return pa.table(
        {"id": list(range(len(ts))), "ts": ts, "region": ["eu" if i % 2 else "us" for i in range(len(ts))]}, schema=_SCHEMA
    )


def _last_actions(t: Table) -> tuple:
    return t.commit_log.read_commit(t.version).actions


def test_a_delete_covering_days_removes_their_segments_whole(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    t.append(_rows(5))
    result = t.delete((pc.field("ts") >= _BASE + dt.timedelta(days=1)) & (pc.field("ts") < _BASE + dt.timedelta(days=3)))
    assert result.deleted_rows == 8
    actions = _last_actions(t)
    assert sum(isinstance(a, RemoveSegment) for a in actions) == 2
    assert not any(isinstance(a, SetDeletionVector) for a in actions)
    assert sorted(t.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, *range(12, 20)]
    assert t.partitions().num_rows == 3
    # time travel still sees the dropped days
    assert t.scan(version=t.version - 1).to_arrow().num_rows == 20


def test_a_delete_covering_part_of_a_day_writes_a_deletion_vector(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    t.append(_rows(3))
    cut = (pc.field("ts") >= _BASE + dt.timedelta(days=1)) & (pc.field("ts") < _BASE + dt.timedelta(days=2, hours=2))
    assert t.delete(cut).deleted_rows == 6
    actions = _last_actions(t)
    assert sum(isinstance(a, RemoveSegment) for a in actions) == 1  # day 1 whole
    assert sum(isinstance(a, SetDeletionVector) for a in actions) == 1  # two rows of day 2
    assert sorted(t.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 10, 11]


def test_identity_partitions_and_an_existing_deletion_vector(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["region"])
    t.append(_rows(2))
    t.delete(pc.field("id") == 1)  # a deletion vector on the eu segment first
    result = t.delete(pc.field("region") == "eu")
    assert result.deleted_rows == 3  # the live rows only
    assert any(isinstance(a, RemoveSegment) for a in _last_actions(t))
    assert set(t.scan().to_arrow()["region"].to_pylist()) == {"us"}


def test_nulls_keep_a_partition_from_being_covered(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["region"])
    t.append(pa.table({"id": [1, 2], "ts": [_BASE, None], "region": ["eu", "eu"]}, schema=_SCHEMA))
    assert t.delete(pc.field("ts") >= _BASE).deleted_rows == 1  # the null ts does not match
    assert not any(isinstance(a, RemoveSegment) for a in _last_actions(t))
    assert t.scan().to_arrow()["id"].to_pylist() == [2]


def test_a_segment_a_push_holds_is_deleted_by_deletion_vector(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    t.append(_rows(2))
    staged = t.overwrite(_rows(1), consistent_push=True, publish=False)  # holds every segment
    assert staged.entry is not None
    assert t.delete(pc.field("ts") < _BASE + dt.timedelta(days=1)).deleted_rows == 4
    assert not any(isinstance(a, RemoveSegment) for a in _last_actions(t))


def test_a_published_push_stays_revertible_after_a_delete_of_its_days(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["day(ts)"])
    t.append(_rows(2))
    push = t.overwrite(_rows(2), consistent_push=True)
    assert t.delete(pc.field("ts") < _BASE + dt.timedelta(days=1)).deleted_rows == 4
    assert not any(isinstance(a, RemoveSegment) for a in _last_actions(t))  # a deletion vector on the push's segment
    assert push.entry is not None
    t.rollback(entry=push.entry)
    assert t.to_arrow().num_rows == 8  # the rows the push replaced are back
