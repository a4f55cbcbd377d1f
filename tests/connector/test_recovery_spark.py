"""A Spark ``consistentPush`` whose driver dies: the push belongs to the driver JVM (the
Python worker that planned it exits at once), so once the JVM is gone the next push, on
the same host, cleans it up at once — no lease to wait for."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table
from tests.support.processes import kill_tree
from tests.support.spark_jvm import shadow_spark_home, spark_conf_for_tests, spark_env

DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf
    builder = SparkSession.builder.master("local[2]").appName("mvtable-dying-driver")
    for k, v in json.loads(os.environ["MVTABLE_TEST_CONF"]).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    from mvtable.connector import register
    register(spark)
    slow = udf(lambda x: (time.sleep(300), x)[1], "long")  # the tasks outlive the test's patience
    (spark.range(0, 4, 1, 2).select(slow("id").alias("id"))
        .write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(sys.argv[1]))
    """
)


@pytest.mark.spark
def test_push_whose_spark_driver_died_is_cleaned_up_by_the_next_push(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties={"pushLeasePeriod": "1h"})
    t.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    env = spark_env(shadow_spark_home(), extra={"MVTABLE_TEST_CONF": json.dumps(spark_conf_for_tests(tmp_path / "spark"))})
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, t.uri], cwd=tmp_path, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 180
        entry = None
        while entry is None and time.monotonic() < deadline and driver.poll() is None:
            entry = next((e for e in t.snapshot().lineage.values() if e.state == "IN_PROGRESS"), None)
            time.sleep(0.2)
        assert entry is not None and entry.owner is not None and entry.owner.pid is not None, "the push never started"
        with open(f"/proc/{entry.owner.pid}/comm") as f:
            assert f.read().strip() == "java"  # the driver JVM, not the planner worker
        time.sleep(1.0)  # let the executors' tasks start renewing the lease
        os.kill(entry.owner.pid, signal.SIGKILL)  # the driver is lost
    finally:
        driver.kill()
        kill_tree(driver.pid)
        driver.communicate()
    started = time.perf_counter()
    t.overwrite(pa.table({"id": pa.array([7], pa.int64())}), consistent_push=True)
    assert time.perf_counter() - started < 30  # not the hour-long lease
    assert sorted(t.to_arrow().column("id").to_pylist()) == [7]
    reason = {e.id: e for e in t.lineage()}[entry.id].revert_reason or ""
    assert f"pid {entry.owner.pid}" in reason and "no longer runs" in reason
