"""``create_view`` / ``read_native`` ``filters=`` prune segments by partition before statistics,
footers and deletion masks: only the matching partitions' files are planned."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from mvtable.connector.partitions.transforms import parse_transform
from mvtable.connector.spark import native_jvm
from mvtable.connector.spark.native_mask import _MASKS
from tests.connector.export.partitioned import add_spec, append_by_partition

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 5, 1, tzinfo=dt.timezone.utc)
TS = pa.timestamp("us", tz="UTC")


def events(start: int, n: int) -> pa.Table:
    """200 rows a day from 2026-05-01, ids in order."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([T0 + dt.timedelta(seconds=432 * i) for i in ids], TS),
            "status": ["cancelled" if i % 10 == 0 else "ok" for i in ids],
        }
    )


@pytest.fixture
def table(tmp_path) -> Table:
    """Ten days by ``day(ts)`` and four buckets of ``id``, two appends, every tenth row deleted."""
    t = Table.create(str(tmp_path / "t"), schema=events(0, 1).schema)
    add_spec(t, ["day(ts)", "bucket(4, id)"])
    append_by_partition(t, events(0, 1000))
    append_by_partition(t, events(1000, 1000))
    t.delete(pc.field("status") == "cancelled")
    return t


def day(d: int) -> dt.datetime:
    return T0 + dt.timedelta(days=d)


def names(paths) -> set[str]:
    return {os.path.basename(p) for p in paths}


def test_a_one_day_view_plans_only_that_days_files(spark, table, monkeypatch) -> None:
    segments = table.snapshot().visible_segments()
    day3 = (day(3).date() - dt.date(1970, 1, 1)).days
    that_day = names(seg.file.path for seg in segments if seg.file.partition[0] == day3)
    assert len(that_day) == 4 and len(segments) == 40
    mvtable.create_view(spark, "mv_one_day", table.uri, filters=[("ts", ">=", day(3)), ("ts", "<", day(4))])
    try:
        df = spark.table("mv_one_day")
        assert names(df.inputFiles()) == that_day
        want = table.scan(filter=(pc.field("ts") >= day(3)) & (pc.field("ts") < day(4))).to_arrow()
        got = sorted(r.id for r in spark.sql("SELECT id FROM mv_one_day").collect())
        assert got == sorted(want.column("id").to_pylist()) and len(got) == 180
    finally:
        mvtable.drop_view(spark, "mv_one_day")

    # by bucket, which statistics cannot do: every bucket's file of a day spans that day's ids
    bucket = parse_transform("bucket[4]").apply_scalar(417, pa.int64())
    day2 = day3 - 1
    wanted = [seg for seg in segments if seg.file.partition == (day2, bucket)]
    others = [seg for seg in segments if seg.file.partition[0] == day2 and seg not in wanted]
    assert len(wanted) == 1 and len(others) == 3
    # another bucket's file and deletion vector gone: a read that opened its footer or built its
    # mask would fail; pruning by partition never looks at them
    os.remove(os.path.join(table.uri, others[0].file.path))
    for jvm in ("on", "off"):
        monkeypatch.setenv(native_jvm.SWITCH, jvm)
        _MASKS.clear()
        df = mvtable.read_native(spark, table.uri, filters=[("id", "==", 417)])
        assert names(df.inputFiles()) == names([wanted[0].file.path])
        assert [r.id for r in df.select("id").collect()] == [417]
        if jvm == "off":  # the expression mask: one bitmap, of the planned file only
            assert [len(key[1]) for key in _MASKS] == [1]
