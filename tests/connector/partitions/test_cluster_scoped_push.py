"""Scoped pushes from Spark on a standalone cluster (master + 2 workers on 127.0.0.1, mvtable
from its wheel): the plan with its ``replaceWhere`` travels pickled to executor processes,
which check their rows against it; a violation in one task fails the write with the typed
error and nothing of it is visible; a dynamic overwrite lands in one commit."""

from __future__ import annotations

import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.cluster

SCRIPT = r"""
import os
from pyspark.sql import functions as F
from mvtable.errors import from_spark
wait_for_executors(2)
path = os.environ["TABLE"]
base = spark.range(0, 3000, numPartitions=3).selectExpr("id", "date_add(DATE '2024-01-05', cast(id % 3 AS int)) AS day")
base.write.format("mvtable").mode("append").option("partitionBy", "day").save(path)
day_b = spark.range(0, 900, numPartitions=3).selectExpr("id + 10000 AS id", "DATE '2024-01-06' AS day")
day_b.write.format("mvtable").mode("overwrite").option("consistentPush", "true") \
    .option("replaceWhere", "day = '2024-01-06'").save(path)
stray = spark.range(0, 900, numPartitions=3).selectExpr("id + 20000 AS id", "IF(id = 850, DATE '2024-02-01', DATE '2024-01-05') AS day")
try:
    stray.write.format("mvtable").mode("overwrite").option("consistentPush", "true") \
        .option("replaceWhere", "day = '2024-01-05'").save(path)
    violation = None
except Exception as exc:
    violation = type(from_spark(exc)).__name__ + ": " + from_spark(exc).message
dynamic = spark.range(0, 600, numPartitions=2).selectExpr("id + 30000 AS id", "DATE '2024-01-07' AS day")
dynamic.write.format("mvtable").mode("overwrite").option("consistentPush", "true") \
    .option("partitionOverwriteMode", "dynamic").save(path)
now = spark.read.format("mvtable").load(path)
emit({
    "violation": violation,
    "per_day": {str(r.day): [r.n, r.lo] for r in now.groupBy("day").agg(F.count("id").alias("n"), F.min("id").alias("lo")).collect()},
})
"""


def test_scoped_pushes_on_a_cluster(spark_cluster, mvtable_wheel_site, tmp_path):
    path = str(tmp_path / "t")
    run = spark_cluster.run(SCRIPT, env={"TABLE": path}, pythonpath=[mvtable_wheel_site], work_dir=tmp_path / "driver")
    result = run.result[0]
    assert result["violation"].startswith("ReplaceWhereViolationError: "), result
    assert "{id=20850, day=2024-02-01}" in result["violation"]
    assert result["per_day"] == {"2024-01-05": [1000, 0], "2024-01-06": [900, 10000], "2024-01-07": [600, 30000]}
    t = Table.open(path)
    entries = t.lineage()
    assert [e.state for e in entries] == ["COMPLETED", "REVERTED", "COMPLETED"]
    assert entries[0].scope == "replace_where day = '2024-01-06'" and entries[0].partitions == ("day=2024-01-06",)
    assert entries[2].scope == "dynamic partition overwrite" and entries[2].partitions == ("day=2024-01-07",)
    ops = [h.operation for h in t.history()]
    assert ops[-1] == "CONSISTENT_PUSH" and ops[-2] != "PUSH_START"  # the dynamic push: one commit
