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
from tests.support.spark_session import assert_route

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
    t = Table.create(str(tmp_path / "t"), schema=events(0, 1).schema, partition_by=["day(ts)", "bucket(4, id)"])
    t.append(events(0, 1000))
    t.append(events(1000, 1000))
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


def test_a_where_on_sparks_parquet_scan_skips_other_partitions_files(spark, table) -> None:
    """``format("mvtable")`` with the jar, and ``read_native``/``create_view`` without ``filters=``,
    are planned before Spark knows the query's filters: their file index drops the files whose
    partition the filters rule out (SQL on a ``USING mvtable`` view and on a ``create_view`` view too)."""
    segments = table.snapshot().visible_segments()
    day3 = (day(3).date() - dt.date(1970, 1, 1)).days
    # every file but day 3's and id 417's bucket's gone: a scan that opened one would fail
    bucket = parse_transform("bucket[4]").apply_scalar(417, pa.int64())
    keep = {seg.file.path for seg in segments if seg.file.partition[0] == day3 or seg.file.partition[1] == bucket}
    assert len(keep) == 4 + 10 - 1
    want = sorted(table.scan(filter=(pc.field("ts") >= day(3)) & (pc.field("ts") < day(4))).to_arrow().column("id").to_pylist())
    df = spark.read.format("mvtable").load(table.uri)  # planned while every file is there
    native = mvtable.read_native(spark, table.uri)  # and read_native / create_view without filters=
    mvtable.create_view(spark, "mv_where_only", table.uri)
    for seg in segments:
        if seg.file.path not in keep:
            os.remove(os.path.join(table.uri, seg.file.path))
    assert_route(df, "native")
    one_day = df.where(f"ts >= timestamp'{day(3):%Y-%m-%d %H:%M:%S}+00:00' AND ts < timestamp'{day(4):%Y-%m-%d %H:%M:%S}+00:00'")
    assert sorted(r.id for r in one_day.select("id").collect()) == want and len(want) == 180
    assert [r.id for r in df.where("id = 417 OR id IN (417, 418) AND id = 417").select("id").collect()] == [417]
    assert [r.id for r in df.where("status = 'ok' AND id <=> 417").select("id").collect()] == [417]
    df.createOrReplaceTempView("mv_days_where")
    try:
        [row] = spark.sql(
            f"SELECT count(*) AS n FROM mv_days_where WHERE ts BETWEEN timestamp'{day(3):%Y-%m-%d} 00:00:00+00:00' AND timestamp'{day(3):%Y-%m-%d} 23:59:59+00:00'"
        ).collect()
        assert row.n == 180
    finally:
        spark.catalog.dropTempView("mv_days_where")
    # read_native and create_view: a WHERE on the result skips the other partitions' files too
    between = f"ts >= timestamp'{day(3):%Y-%m-%d} 00:00:00+00:00' AND ts < timestamp'{day(4):%Y-%m-%d} 00:00:00+00:00'"
    try:
        assert sorted(r.id for r in native.where(between).select("id").collect()) == want
        assert sorted(r.id for r in spark.sql(f"SELECT id FROM mv_where_only WHERE {between}").collect()) == want
        assert [r.id for r in spark.sql("SELECT id FROM mv_where_only WHERE id = 417").collect()] == [417]
    finally:
        mvtable.drop_view(spark, "mv_where_only")
    # a filter on a column no partition bounds keeps every file, and so fails on the missing ones
    with pytest.raises(Exception, match="(?i)not exist|FileNotFound|FILE_NOT_EXIST|missing"):
        df.where("status = 'cancelled'").count()
