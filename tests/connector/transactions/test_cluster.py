"""A Spark transaction on a real standalone cluster (master + 2 workers), mvtable installed from its wheel.

The DataFrames' tasks write their segments in executor processes; the driver commits them
with a plain Arrow write, all in one transaction."""

from __future__ import annotations

import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import os
import pyarrow as pa
import mvtable
wait_for_executors(2)
facts, dims = os.environ["FACTS"], os.environ["DIMS"]
mvtable.Table(dims).append(pa.table({"id": pa.array([1, 2], pa.int64())}))
df = spark.range(0, 1000, numPartitions=4).selectExpr("id", "id % 5 AS k")
with mvtable.transaction(spark=spark) as tx:
    tx.write(df, facts, mode="append")
    tx.write(spark.range(100, 103, numPartitions=2), dims, mode="overwrite")
pids = spark.range(0, 4, numPartitions=4).rdd.mapPartitions(lambda it: [os.getpid()]).collect()
emit({
    "tx": tx.id,
    "driver_pid": os.getpid(),
    "task_pids": sorted(set(pids)),
    "result": [list(v) for v in tx.result.versions],
    "consistent": mvtable.consistent_versions([facts, dims]),
})
"""


def test_a_spark_transaction_on_a_standalone_cluster(spark_cluster, mvtable_wheel_site, tmp_path):
    facts, dims = str(tmp_path / "facts"), str(tmp_path / "dims")
    run = spark_cluster.run(
        SCRIPT, env={"FACTS": facts, "DIMS": dims}, pythonpath=[mvtable_wheel_site], work_dir=tmp_path / "driver"
    )
    result = run.result[0]
    assert result["driver_pid"] not in result["task_pids"]  # tasks ran in executor processes
    f, d = Table.open(facts), Table.open(dims)
    assert f.to_arrow().num_rows == 1000 and len(f.snapshot().visible_segment_ids()) == 4  # one segment per task
    assert sorted(d.to_arrow().column("id").to_pylist()) == [100, 101, 102]
    assert result["consistent"] == {facts: f.version, dims: d.version}
    for t in (f, d):
        assert [h.operation for h in t.history()][-2:] == ["TXN_PREPARE", "TXN_COMMIT"]
        assert [e.id for e in t.lineage()] == [result["tx"]]
