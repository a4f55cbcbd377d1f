"""A day-partitioned table written from a standalone Spark cluster (mvtable installed from its
wheel; executors are separate JVMs and Python workers) and read back with a time filter that
prunes days, through the Python source and through ``read_native``."""

from __future__ import annotations

import datetime as dt

import pytest

from mvtable.connector import Table
from mvtable.connector.scan import plan_scan
from mvtable.connector.stats import Predicate

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import datetime as dt, os
import mvtable
wait_for_executors(2)
path = os.environ["TABLE"]
df = spark.range(0, 960, numPartitions=4).selectExpr(
    "id", "timestamp_seconds(1704067200 + id * 1800) AS ts", "CASE WHEN id % 2 = 0 THEN 'eu' ELSE 'us' END AS region"
)
df.write.format("mvtable").mode("append").option("partitionBy", "day(ts)").save(path)
spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
where = "ts >= timestamp'2024-01-05 00:00:00' AND ts < timestamp'2024-01-07 00:00:00'"
py = spark.read.format("mvtable").option("maxPartitionBytes", "1").load(path).where(where)
utc = dt.timezone.utc
native = mvtable.read_native(
    spark, path, filters=[("ts", ">=", dt.datetime(2024, 1, 5, tzinfo=utc)), ("ts", "<", dt.datetime(2024, 1, 7, tzinfo=utc))]
)
emit({
    "python": sorted(r.id for r in py.collect()),
    "python_partitions": py.rdd.getNumPartitions(),
    "native": sorted(r.id for r in native.collect()),
    "all": spark.read.format("mvtable").load(path).count(),
})
"""


def test_a_cluster_writes_a_day_partitioned_table_and_reads_a_filtered_range(spark_cluster, mvtable_wheel_site, tmp_path):
    path = str(tmp_path / "t")
    run = spark_cluster.run(SCRIPT, env={"TABLE": path}, pythonpath=[mvtable_wheel_site], work_dir=tmp_path / "driver")
    result = run.result[0]
    days_5_and_6 = list(range(4 * 48, 6 * 48))  # one row every 30 minutes from 2024-01-01
    assert result["all"] == 960
    assert result["python"] == days_5_and_6 and result["native"] == days_5_and_6
    assert result["python_partitions"] == 2  # the two days' segments, one each
    t = Table.open(path)
    snapshot = t.snapshot()
    assert sorted({s.file.partition for s in snapshot.visible_segments()}) == [(19723 + d,) for d in range(20)]
    assert len(snapshot.visible_segments()) == 20  # each executor task wrote whole days
    utc = dt.timezone.utc
    day = [Predicate("ts", ">=", dt.datetime(2024, 1, 5, tzinfo=utc)), Predicate("ts", "<", dt.datetime(2024, 1, 7, tzinfo=utc))]
    assert plan_scan(snapshot, predicates=day).pruned_segments == 18
