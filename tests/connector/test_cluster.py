"""mvtable on a real standalone cluster (master + 2 workers on 127.0.0.1, started with
``spark-class``): executors are separate JVMs with their own Python workers, so every
piece of state must travel in the pickled plan, partitions and commit messages."""

from __future__ import annotations

import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import os
from mvtable.connector import delete, register
register(spark)
wait_for_executors(2)
path = os.environ["TABLE"]
df = spark.range(0, 4000, numPartitions=4).selectExpr("id", "id % 10 AS k", "cast(id AS string) AS s")
df.write.format("mvtable").mode("append").option("property.rowGroupRows", "250").save(path)
spark.range(4000, 5000, numPartitions=2).selectExpr("id", "id % 10 AS k", "cast(id AS string) AS s") \
    .write.format("mvtable").mode("append").save(path)
deleted = delete(spark, path, "k = 3")
pushed = spark.range(0, 600, numPartitions=3).selectExpr("id * 7 AS id", "id % 10 AS k", "cast(id AS string) AS s")
pushed.write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(path)
now = spark.read.format("mvtable").load(path)
before = spark.read.format("mvtable").option("versionAsOf", 2).load(path)
pids = spark.read.format("mvtable").option("maxPartitionBytes", "1").load(path) \
    .rdd.mapPartitions(lambda it: [os.getpid()]).collect()
emit({
    "deleted": deleted,
    "now": now.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "before": before.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "driver_pid": os.getpid(),
    "partition_pids": sorted(set(pids)),
    "partitions": now.rdd.getNumPartitions(),
})
"""


def test_write_push_delete_and_read_on_a_cluster(spark_cluster, tmp_path):
    path = str(tmp_path / "t")
    result = spark_cluster.run(SCRIPT, env={"TABLE": path}).result[0]
    assert result["deleted"] == 500
    assert result["now"] == {"n": 600, "s": sum(i * 7 for i in range(600))}
    kept = [i for i in range(5000) if i % 10 != 3]
    assert result["before"] == {"n": len(kept), "s": sum(kept)}
    assert result["driver_pid"] not in result["partition_pids"]  # read() ran in executor processes
    t = Table.open(path)
    assert [e.state for e in t.lineage()] == ["COMPLETED"]
    assert [h.operation for h in t.history()] == ["CREATE", "APPEND", "DELETE", "PUSH_START", "CONSISTENT_PUSH"]
    segs = t.snapshot().visible_segments()
    assert len(segs) == 3  # one segment per task of the push
