"""Compaction through Spark: ``mvtable.compact(spark, path)`` (one task per bin, the driver
commits) and the ``mvtable_compact`` SQL procedure; both idempotent, neither changing any
version's rows."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table

from .conftest import orders

pytestmark = pytest.mark.spark


def contents(t: Table) -> dict[int, list[int]]:
    return {h.version: sorted(t.to_arrow(version=h.version)["id"].to_pylist()) for h in t.history()}


def small_appends(uri: str) -> Table:
    t = Table.create(uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "50", "compactMinInputFiles": "2"})
    for i in range(8):
        t.append(orders(i * 25, 25))
    t.delete(pc.field("id").isin(list(range(0, 200, 7))))
    return t


def test_distributed_compaction_one_task_per_bin(spark, table_uri):
    t = small_appends(table_uri)
    before = contents(t)
    report = mvtable.compact(spark, table_uri, target_file_size=2000, max_bytes_per_commit="1MiB")
    assert report.bins >= 2 and report.committed_bins == report.bins and len(report.commits) == 1
    assert report.input_segments == 8 and report.output_segments == report.bins
    after = contents(t)
    assert {v: after[v] for v in before} == before and after[t.version] == before[t.version - 1]
    rows = spark.read.format("mvtable").load(table_uri).select("id").collect()
    assert sorted(r.id for r in rows) == before[t.version - 1]
    assert mvtable.compact(spark, table_uri, target_file_size=2000).commits == []


def test_compact_procedure(spark, table_uri):
    mvtable.register(spark)
    t = small_appends(table_uri)
    version = t.version
    (dry,) = spark.sql(f"SELECT * FROM mvtable_compact(table => '{table_uri}', dry_run => true)").collect()
    assert dry.dry_run and not dry.changed and dry.bins == 1 and dry.input_segments == 8 and t.version == version
    (row,) = spark.sql(f"SELECT * FROM mvtable_compact(table => '{table_uri}', target_size => '1MiB')").collect()
    assert row.changed and row.commits == [version + 1] and row.output_segments == 1 and row.complete
    assert "rewrote 8 segment(s)" in row.message
    (again,) = spark.sql(f"SELECT * FROM mvtable_compact(table => '{table_uri}')").collect()
    assert not again.changed and again.bins == 0
