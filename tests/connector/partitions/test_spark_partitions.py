"""Spark: ``.option("partitionBy", …)`` on the write that creates a table (batch and the
streaming sink), tasks splitting rows by partition, a filtered read, and a partitionBy that
differs from an existing table's refused."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from tests.support.spark_session import PYTHON_ROUTE, spark_conf

from ..test_spark_streaming import stream

pytestmark = pytest.mark.spark

ROWS = "id", "timestamp_seconds(1704067200 + id * 7200) AS ts", "CASE WHEN id % 3 = 0 THEN 'eu' ELSE 'us' END AS region"


def frame(spark, n: int = 240, start: int = 0):
    return spark.range(start, start + n, numPartitions=3).selectExpr(*ROWS)


def test_partition_by_creates_a_partitioned_table_and_reads_filter(spark, tmp_path):
    path = str(tmp_path / "t")
    frame(spark).write.format("mvtable").mode("append").option("partitionBy", "day(ts), region").save(path)
    t = Table.open(path)
    s = t.snapshot()
    assert [f.name for f in s.partition_specs[1].fields] == ["ts_day", "region"]
    parts = t.partitions()
    assert len(parts) == 20 * 2 and sum(parts.column("rows").to_pylist()) == 240
    # each task met every partition of its rows: one segment per (task, partition), never a mix
    assert all(seg.file.spec_id == 1 for seg in s.visible_segments())
    assert len(s.visible_segments()) >= 40
    where = "ts < timestamp_seconds(1704067200 + 3 * 86400) AND region = 'eu'"
    got = sorted(r.id for r in spark.read.format("mvtable").load(path).where(where).collect())
    assert got == sorted(r.id for r in frame(spark).where(where).collect()) and len(got) == 12
    # appending with the same spec is fine; another is refused and names the way to change it
    frame(spark, 12, 240).write.format("mvtable").mode("append").option("partitionBy", "day(ts),region").save(path)
    with pytest.raises(Exception, match="update_partitioning"):
        frame(spark, 12, 252).write.format("mvtable").mode("append").option("partitionBy", "month(ts)").save(path)
    assert Table.open(path).to_arrow().num_rows == 252


def test_the_streaming_sink_creates_a_partitioned_table(spark, tmp_path):
    src = str(tmp_path / "src")
    Table(src).append(frame(spark).toArrow())
    dst = str(tmp_path / "dst")
    df = stream(spark, src)
    q = (
        df.writeStream.format("mvtable")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .option("partitionBy", "day(ts)")
        .trigger(availableNow=True)
        .start(dst)
    )
    q.awaitTermination(180)
    assert q.exception() is None
    t = Table.open(dst)
    assert t.to_arrow().num_rows == 240
    assert sorted(seg.file.partition for seg in t.snapshot().visible_segments()) == [(19723 + d,) for d in range(20)]


def test_a_keyed_partitioned_table_from_spark(spark, tmp_path):
    path = str(tmp_path / "k")
    write = frame(spark, 60).write.format("mvtable").mode("append")
    write.option("partitionBy", "region").option("primaryKey", "id").save(path)
    changes = frame(spark, 20, 50).selectExpr("id", "ts", "'apac' AS region")  # 10 updates move rows to apac, 10 inserts
    changes.write.format("mvtable").mode("append").option("operation", "upsert").save(path)
    t = Table.open(path)
    rows = t.to_arrow()
    assert rows.num_rows == 70 and sorted(rows.column("id").to_pylist()) == list(range(70))
    assert {seg.file.partition for seg in t.snapshot().visible_segments()} == {("eu",), ("us",), ("apac",)}
    apac = t.to_arrow(filter=pc.field("region") == "apac")
    assert sorted(apac.column("id").to_pylist()) == list(range(50, 70))


def _segments_read(spark, path: str, where: str) -> tuple[list[int], int]:
    """(the ids the Python source reads for ``where``, how many segments it plans: one Spark partition each)."""
    df = spark.read.format("mvtable").option("maxPartitionBytes", "1").load(path).where(where)
    return sorted(r.id for r in df.collect()), df.rdd.getNumPartitions()


@pytest.mark.parametrize("zone", ["UTC", "America/Los_Angeles"])
@pytest.mark.parametrize(
    "column, where",
    [
        ("ts", "ts >= timestamp'2024-01-05 00:00:00' AND ts < timestamp'2024-01-08 00:00:00'"),
        ("ts", "ts IN (timestamp'2024-01-05 06:00:00', timestamp'2024-01-09 00:00:00')"),
        ("wall", "wall >= timestamp_ntz'2024-01-05 00:00:00' AND wall < timestamp_ntz'2024-01-08 00:00:00'"),
    ],
)
def test_a_pushed_time_range_prunes_days_in_any_session_zone(spark, tmp_path, zone, column, where):
    """A ``timestamp`` literal is the instant the session's zone gave its text (Los Angeles:
    08:00 UTC), a ``timestamp_ntz`` literal the wall-clock time: the Python source prunes the
    days of ``day(ts)``/``day(wall)`` by them and reads the rows it reads without pushdown."""
    path = str(tmp_path / "t")
    frame(spark, 240).coalesce(1).selectExpr("id", "ts", "cast(ts AS timestamp_ntz) AS wall").write.format("mvtable").mode(
        "append"
    ).option("partitionBy", f"day({column})").save(path)
    assert len(Table.open(path).snapshot().visible_segments()) == 20
    with spark_conf(spark, {**PYTHON_ROUTE, "spark.sql.session.timeZone": zone}):
        with spark_conf(spark, {"spark.sql.python.filterPushdown.enabled": "false"}):
            expected, unpruned = _segments_read(spark, path, where)
        with spark_conf(spark, {"spark.sql.python.filterPushdown.enabled": "true"}):
            got, planned = _segments_read(spark, path, where)
    assert got == expected and expected
    assert unpruned == 20
    shifted = zone != "UTC" and column == "ts"  # the bounds fall inside a UTC day: one more is read
    assert planned == (2 if " IN " in where else 4 if shifted else 3)


def test_spark_partition_by_on_a_stream_creates_identity_fields(spark, tmp_path):
    """``df.writeStream.partitionBy(...)``, which Spark drops for a Python sink, reaches the sink as identity fields."""
    src = str(tmp_path / "src")
    Table(src).append(frame(spark).toArrow())
    dst = str(tmp_path / "dst")
    q = (
        stream(spark, src)
        .writeStream.format("mvtable")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .partitionBy("region")
        .trigger(availableNow=True)
        .start(dst)
    )
    q.awaitTermination(180)
    assert q.exception() is None
    t = Table.open(dst)
    assert [(f.name, f.transform) for f in t.snapshot().default_spec.fields] == [("region", "identity")]
    assert sorted(seg.file.partition for seg in t.snapshot().visible_segments()) == [("eu",), ("us",)]
    assert t.to_arrow().num_rows == 240


def test_a_nan_partition_is_read_by_a_pushed_comparison(spark, tmp_path):
    """Spark orders NaN above every number: ``f > 0.4`` matches the NaN partition's row."""
    path = str(tmp_path / "t")
    df = spark.range(0, 6).selectExpr("id", "if(id = 5, double('NaN'), id / 10.0) AS f")
    df.write.format("mvtable").mode("append").option("partitionBy", "f").save(path)
    with spark_conf(spark, {**PYTHON_ROUTE, "spark.sql.python.filterPushdown.enabled": "true"}):
        got = sorted(r.id for r in spark.read.format("mvtable").load(path).where("f > 0.2").collect())
    assert got == [3, 4, 5]
