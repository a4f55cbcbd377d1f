"""Schema evolution on a standalone Spark cluster, mvtable installed from its wheel: executors (separate JVMs and
Python workers) read older-schema segments by field id from the pickled plan, ``read_native`` and ``format("mvtable")``
project them in the JVM, and a ``mergeSchema`` write from executor tasks lands with its schema change in one commit."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

from .test_reads_by_id import OLD, evolve, expected, new_rows, old_rows

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import os
import mvtable
wait_for_executors(2)
path = os.environ["TABLE"]
py = spark.read.format("mvtable").option("maxPartitionBytes", "1").load(path)
native = mvtable.read_native(spark, path)
mvtable.register(spark)
fmt = spark.read.format("mvtable").load(path).where("bee <> 'b7'")
fmt_plan = fmt._jdf.queryExecution().executedPlan().toString()
more = py.where("id IN (1, 21)").selectExpr("id + 100 AS id", "a", "bee", "s", "d", "c", "cast(id AS int) AS n")
more.write.format("mvtable").mode("append").option("mergeSchema", "true").save(path)
emit({
    "columns": py.columns,
    "python": [r.asDict(recursive=True) for r in py.collect()],
    "native": [r.asDict(recursive=True) for r in native.collect()],
    "native_plan_scan": "FileScan" in native._jdf.queryExecution().executedPlan().toString(),
    "format": [r.asDict(recursive=True) for r in fmt.collect()],
    "format_plan_scan": "FileScan" in fmt_plan and "(Python)" not in fmt_plan,
    "partitions": py.rdd.getNumPartitions(),
})
"""


def test_cluster_reads_evolved_tables_by_id_and_merges_schema(spark_cluster, mvtable_wheel_site, tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=OLD, properties={"rowGroupRows": "5"})
    t.append(old_rows(0, 10))
    t.append(old_rows(10, 20))
    t.delete(pc.field("id") == 3)
    evolve(t)
    t.append(new_rows(20, 25))
    run = spark_cluster.run(SCRIPT, env={"TABLE": path}, pythonpath=[mvtable_wheel_site], work_dir=tmp_path / "driver")
    result = run.result[0]
    live = expected([i for i in range(25) if i != 3])
    assert result["columns"] == ["id", "a", "bee", "s", "d", "c"] and result["partitions"] > 1
    assert sorted(result["python"], key=lambda r: r["id"]) == live
    assert sorted(result["native"], key=lambda r: r["id"]) == live and result["native_plan_scan"] is True
    # format("mvtable") on Spark's file scan: one scan per file schema, projected by id, on the executors
    assert sorted(result["format"], key=lambda r: r["id"]) == [r for r in live if r["id"] != 7]
    assert result["format_plan_scan"] is True
    after = Table.open(path)
    assert after.schema.names == ["id", "a", "bee", "s", "d", "c", "n"] and after.schema.field("n").type == pa.int32()
    assert "schemaChanges" in after.history()[-1].parameters
    rows = {r["id"]: r for r in after.to_arrow().to_pylist()}
    assert (rows[101]["a"], rows[101]["bee"], rows[101]["n"], rows[101]["c"]) == (1, "b1", 1, None)
    assert (rows[121]["bee"], rows[121]["n"], rows[121]["c"]) == ("B21", 21, -1.0) and rows[1]["n"] is None
