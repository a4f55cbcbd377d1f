"""update_partitioning: a new spec for new writes, old segments keep theirs, pruning works on both."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable import Table
from mvtable.connector.partitions.evolution import evolved_spec
from mvtable.errors import PartitionSpecError
from mvtable.lineage.enums import Operation

_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("region", pa.string())])


def _rows(hours: list[int], *, start_id: int = 0) -> pa.Table:
    base = dt.datetime(2024, 1, 1)
    return pa.table(
        {
            "id": list(range(start_id, start_id + len(hours))),
            "ts": [base + dt.timedelta(hours=h) for h in hours],
            "region": ["eu" if h % 2 else "us" for h in hours],
        },
        schema=_SCHEMA,
    )


def test_new_writes_use_the_new_spec_and_old_segments_keep_theirs(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)"])
    t.append(_rows([0, 1, 25]))
    result = t.update_partitioning(["day(ts)"])
    assert result.changed and result.spec_id == 2 and result.fields == ("day(ts)",)
    assert t.history()[-1].operation == Operation.UPDATE_PARTITIONING
    t.append(_rows([2, 26, 50], start_id=100))
    snap = t.snapshot()
    specs = {seg.file.spec_id for seg in snap.visible_segments()}
    assert specs == {1, 2}
    assert len([s for s in snap.visible_segments() if s.file.spec_id == 1]) == 3  # one per hour
    assert len([s for s in snap.visible_segments() if s.file.spec_id == 2]) == 3  # one per day
    # pruning works through both specs
    day2 = (pc.field("ts") >= dt.datetime(2024, 1, 2)) & (pc.field("ts") < dt.datetime(2024, 1, 3))
    scan = t.scan(filter=day2)
    assert sorted(scan.to_arrow()["id"].to_pylist()) == [2, 101]
    assert scan.plan.pruned_segments == 4


def test_going_back_to_a_grain_reuses_its_spec_and_ids(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)", "region"])
    first = t.snapshot().partition_specs[1]
    t.update_partitioning(["day(ts)", "region"])
    second = t.snapshot().partition_specs[2]
    assert second.fields[1].field_id == first.fields[1].field_id  # region keeps its partition field id
    assert second.fields[0].field_id == max(f.field_id for f in first.fields) + 1
    back = t.update_partitioning(["hour(ts)", "region"])
    assert back.spec_id == 1 and back.changed
    again = t.update_partitioning(["hour(ts)", "region"])
    assert not again.changed and again.version is None


def test_a_bad_spec_commits_nothing(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)"])
    version = t.version
    with pytest.raises(PartitionSpecError, match="nope"):
        t.update_partitioning(["day(nope)"])
    assert t.version == version


def test_unpartitioning_a_table(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=_SCHEMA, partition_by=["hour(ts)"])
    assert t.update_partitioning([]).spec_id == 0
    t.append(_rows([0, 1, 2]))
    assert [s.file.spec_id for s in t.snapshot().visible_segments()] in ([0], [None])
    assert evolved_spec(t.snapshot(), []).spec_id == 0
