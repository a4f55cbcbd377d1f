"""What the Spark reader assumes about Python workers: they run this interpreter and the
mvtable under test, and they are reused across tasks and queries
(``spark.python.worker.reuse``), so the executor-side DV cache that one read fills
serves the next read instead of being rebuilt per task.

A probe data source, defined here and shipped by value, reports from inside a worker
what that worker's ``process_cache()`` holds."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from support.spark_session import PYTHON_ROUTE, pickle_by_value, spark_conf

import mvtable
from mvtable.connector import Table

from .conftest import orders

pickle_by_value(__name__)

pytestmark = pytest.mark.spark


class _CacheProbe(DataSourceReader):
    def partitions(self):
        return [InputPartition(i) for i in range(4)]

    def read(self, partition):
        import mvtable as worker_mvtable
        from mvtable.visibility import process_cache

        info = {
            "pid": os.getpid(),
            "executable": sys.executable,
            "mvtable": worker_mvtable.__file__,
            "cache": process_cache().stats(),
        }
        yield (json.dumps(info),)


class CacheProbe(DataSource):
    @classmethod
    def name(cls):
        return "mvtable_test_cache_probe"

    def schema(self):
        return "info string"

    def reader(self, schema):
        return _CacheProbe()


def _probe(spark) -> list[dict]:
    return [json.loads(r.info) for r in spark.read.format("mvtable_test_cache_probe").load().collect()]


def test_python_workers_run_this_mvtable_and_keep_the_dv_cache_between_queries(spark, tmp_path: Path) -> None:
    # one row group per segment: a read loads each segment's DV once, so a cache hit can
    # only come from an earlier query served by the same worker
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    t.append(orders(0, 1000))
    t.append(orders(1000, 1000))
    assert t.delete(pc.field("status") == "cancelled").deleted_rows == 200
    spark.dataSource.register(CacheProbe)

    for info in _probe(spark):
        assert info["executable"] == sys.executable
        assert Path(info["mvtable"]) == Path(mvtable.__file__)  # workers import the code under test
        assert info["pid"] != os.getpid()

    def read() -> int:
        # the Python route: on Spark's Parquet scan (mvtable's jar attached by an earlier test)
        # no Python worker reads, and the pigeonhole below would depend on the test order
        with spark_conf(spark, PYTHON_ROUTE):
            return spark.read.format("mvtable").load(t.uri).count()

    # Which idle worker takes a task depends on how many earlier tests left in the pool,
    # so ask by pigeonhole: read and probe until some worker shows a cache hit, which
    # needs two reads in one worker (more rounds than the pool has fresh workers).
    seen: list[dict] = []
    for _ in range(6):
        assert read() == 1800
        seen = _probe(spark)
        if any(i["cache"]["hits"] > 0 for i in seen):
            break
    assert any(i["cache"]["hits"] > 0 and i["cache"]["current_bytes"] > 0 for i in seen), seen
