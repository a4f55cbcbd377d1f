"""A Spark DataFrame of an mvtable table is bound to the version it was created at: the
data source resolves and pins it once (in ``schema()``), and a commit landing before the
DataFrame is executed (append, delete, push, rollback) never changes what it returns."""

from __future__ import annotations

import pickle

import pytest

from mvtable.connector.pinning import pin_scan
from mvtable.visibility import process_cache
from tests.support.spark_session import assert_route

from .conftest import COMMITS, churned_table, orders

pytestmark = pytest.mark.spark


def test_a_dataframe_reads_the_version_it_was_created_at(spark, tmp_path, read_route):
    for name, commit in COMMITS.items():
        t = churned_table(str(tmp_path / name))
        version = t.version
        expected = sorted(t.to_arrow().column("id").to_pylist())
        df = spark.read.format("mvtable").load(t.uri)
        assert_route(df, read_route)
        plain = df.select("id")
        filtered = df.where("price >= 0").select("id")
        assert [p.version for p in pin_scan(t.io).live] == [version], name  # pinned once, at creation
        commit(t)
        assert sorted(t.to_arrow().column("id").to_pylist()) != expected, name
        t.vacuum()
        process_cache().clear()
        assert sorted(r.id for r in plain.collect()) == expected, name
        with_pushdown = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false")
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        try:
            assert sorted(r.id for r in filtered.collect()) == expected, name
        finally:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", with_pushdown)
        # each execution renews the DataFrame's pin; nothing releases it: it expires
        assert [p.version for p in pin_scan(t.io).live] == [version], name


def test_the_data_source_carries_its_pin_from_schema_to_reader_and_partitions(small_table):
    """What Spark does with the instance, without a JVM: ``schema()``, pickle, ``reader()``,
    ``partitions()`` (see ``pyspark/sql/worker/create_data_source.py``)."""
    from mvtable.connector.spark.source import MvTableDataSource

    source = MvTableDataSource({"path": small_table.uri})
    schema = source.schema()
    version = small_table.version
    assert source.pin is not None and source.pin.version == version
    small_table.append(orders(9000, 3))  # lands after the DataFrame was created
    planned = pickle.loads(pickle.dumps(source)).reader(schema)
    parts = planned.partitions()
    assert parts and all(p.pin == source.pin for p in parts)
    assert sum(t.rows for p in parts for t in p.tasks) == 2000  # version `version`, not the newest
    assert [p.version for p in pin_scan(small_table.io).live] == [version]


def test_streams_and_change_feeds_hold_no_snapshot_pin(small_table):
    from mvtable.connector.spark.source import MvTableDataSource

    feed = MvTableDataSource({"path": small_table.uri, "readChangeFeed": "true", "startingVersion": "1"})
    feed.schema()
    assert feed.pin is None and pin_scan(small_table.io).live == []
    stream = MvTableDataSource({"path": small_table.uri})
    stream.streamReader(stream.schema())  # schema() cannot tell it is for a stream
    assert pin_scan(small_table.io).live == []
