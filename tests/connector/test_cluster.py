"""mvtable as a user deploys it: installed from its wheel (no editable install, no
``register()`` call: Spark finds ``format("mvtable")`` through the top-level
``pyspark_mvtable`` module) and run on a real standalone cluster (master + 2 workers on
127.0.0.1, started with ``spark-class``).  Executors are separate JVMs with their own
Python workers, so every piece of state must travel in the pickled plan, partitions and
commit messages.  One driver run checks both, because each Spark driver costs ~20 CPU
seconds on a small machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import os, pkgutil
import mvtable, pyspark_mvtable
from mvtable.connector.spark import source
wait_for_executors(2)
path = os.environ["TABLE"]
df = spark.range(0, 4000, numPartitions=4).selectExpr("id", "id % 10 AS k", "cast(id AS string) AS s")
df.write.format("mvtable").mode("append").option("property.rowGroupRows", "250").save(path)
spark.range(4000, 5000, numPartitions=2).selectExpr("id", "id % 10 AS k", "cast(id AS string) AS s") \
    .write.format("mvtable").mode("append").save(path)
deleted = mvtable.delete(spark, path, "k = 3")
pushed = spark.range(0, 600, numPartitions=3).selectExpr("id * 7 AS id", "id % 10 AS k", "cast(id AS string) AS s")
pushed.write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(path)
now = spark.read.format("mvtable").load(path)
before = spark.read.format("mvtable").option("versionAsOf", 2).load(path)
kpath = os.environ["KEYED"]  # primary keys: looked up in executor tasks, one upsert commit
spark.range(0, 2000, numPartitions=2).selectExpr("id", "cast(id AS string) AS s") \
    .write.format("mvtable").mode("append").option("primaryKey", "id").save(kpath)
spark.range(1500, 2500, numPartitions=3).selectExpr("id", "'new' AS s") \
    .write.format("mvtable").mode("append").option("operation", "upsert").save(kpath)
keyed = spark.read.format("mvtable").load(kpath)
# read_native: the JVM deletion mask, compiled from the wheel's source, shipped to the executors
native = mvtable.read_native(spark, path, version=2)
native_plan = native._jdf.queryExecution().executedPlan().toString()
# format("mvtable") with mvtable.register: the jar attached, Spark's Parquet scan on the executors
mvtable.register(spark)
fast = spark.read.format("mvtable").option("versionAsOf", 2).load(path)
fast_plan = fast._jdf.queryExecution().executedPlan().toString()
spark.sql(f"CREATE TEMPORARY VIEW fast_now USING mvtable OPTIONS (path '{path}')")
fast_now = spark.sql("SELECT count(*) AS n, sum(id) AS s FROM fast_now").first().asDict()
tasks = spark.read.format("mvtable").option("maxPartitionBytes", "1").load(path) \
    .rdd.mapPartitions(lambda it: [(os.getpid(), __import__("mvtable").__file__)]).collect()
emit({
    "deleted": deleted,
    "now": now.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "before": before.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "driver_pid": os.getpid(),
    "partition_pids": sorted({pid for pid, _ in tasks}),
    "executor_mvtable": sorted({file for _, file in tasks}),
    "driver_mvtable": [mvtable.__file__, source.__file__, pyspark_mvtable.__file__],
    "scan_sees_shim": any(m.name == "pyspark_mvtable" for m in pkgutil.iter_modules()),
    "partitions": now.rdd.getNumPartitions(),
    "native_before": native.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "native_masked_in_jvm": "MvtableMaskedParquet" in native_plan,
    "fast_before": fast.selectExpr("count(*) AS n", "sum(id) AS s").first().asDict(),
    "fast_file_scan": "FileScan mvtable-parquet" in fast_plan and "(Python)" not in fast_plan,
    "fast_now": fast_now,
    "upsert": keyed.selectExpr("count(*) AS n", "count(distinct id) AS d", "sum(if(s = 'new', 1, 0)) AS new").first().asDict(),
})
"""


def test_wheel_install_writes_pushes_deletes_and_reads_on_a_cluster(spark_cluster, mvtable_wheel_site, tmp_path):
    path = str(tmp_path / "t")
    run = spark_cluster.run(
        SCRIPT,
        env={"TABLE": path, "KEYED": str(tmp_path / "keyed")},
        pythonpath=[mvtable_wheel_site],
        work_dir=tmp_path / "driver",
    )
    result = run.result[0]
    # driver and executors import the wheel's copy; Spark's module scan found the shim
    assert (mvtable_wheel_site / "pyspark_mvtable.py").is_file()
    assert result["scan_sees_shim"] is True
    assert all(Path(f).is_relative_to(mvtable_wheel_site) for f in result["driver_mvtable"]), result
    assert result["executor_mvtable"] and all(Path(f).is_relative_to(mvtable_wheel_site) for f in result["executor_mvtable"])
    assert result["deleted"] == 500
    assert result["upsert"] == {"n": 2500, "d": 2500, "new": 1000}
    assert Table.open(str(tmp_path / "keyed")).history()[-1].metrics["updated_rows"] == 500
    assert result["now"] == {"n": 600, "s": sum(i * 7 for i in range(600))}
    kept = [i for i in range(5000) if i % 10 != 3]
    assert result["before"] == {"n": len(kept), "s": sum(kept)}
    assert result["native_before"] == result["before"] and result["native_masked_in_jvm"] is True
    assert result["fast_before"] == result["before"] and result["fast_file_scan"] is True
    assert result["fast_now"] == result["now"]
    assert result["driver_pid"] not in result["partition_pids"]  # read() ran in executor processes
    t = Table.open(path)
    assert [e.state for e in t.lineage()] == ["COMPLETED"]
    assert [h.operation for h in t.history()] == ["CREATE", "APPEND", "DELETE", "PUSH_START", "CONSISTENT_PUSH"]
    segs = t.snapshot().visible_segments()
    assert len(segs) == 3  # one segment per task of the push
