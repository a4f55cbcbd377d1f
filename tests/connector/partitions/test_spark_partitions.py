"""Spark: ``.option("partitionBy", …)`` on the write that creates a table (batch and the
streaming sink), tasks splitting rows by partition, a filtered read, and a partitionBy that
differs from an existing table's refused."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

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
