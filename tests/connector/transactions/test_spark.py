"""``mvtable.create_views``: SQL views of several tables at versions that show a transaction whole."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mvtable
from mvtable import faults
from mvtable.connector import Table
from mvtable.errors import InvalidOptionError


class Stop(Exception):
    """Raised at a protocol step to stop the driver there, as a crash of the block would."""


def _stop():
    raise Stop()


def test_views_never_join_half_a_transaction(spark, tmp_path):
    orders, customers = Table(str(tmp_path / "orders")), Table(str(tmp_path / "customers"))
    orders.append(pa.table({"id": [1], "customer": [10]}))
    customers.append(pa.table({"customer": [10], "name": ["ann"]}))
    tx = mvtable.transaction()
    tx.append(orders, pa.table({"id": [2], "customer": [20]}))
    tx.append(customers.uri, pa.table({"customer": [20], "name": ["bob"]}))
    with faults.run_at("transaction.after_finalize.1", _stop), pytest.raises(Stop):
        tx.commit()  # orders shows the new order, customers not yet its customer
    views = mvtable.create_views(spark, {"tx_orders": orders, "tx_customers": customers.uri})
    try:
        assert {name: v.version for name, v in views.items()} == {"tx_orders": orders.version, "tx_customers": customers.version}
        joined = spark.sql(
            "SELECT o.id, c.name FROM tx_orders o LEFT JOIN tx_customers c ON o.customer = c.customer ORDER BY o.id"
        ).collect()
        assert [(r.id, r.name) for r in joined] == [(1, "ann"), (2, "bob")]
    finally:
        for name in views:
            mvtable.drop_view(spark, name)
    with pytest.raises(InvalidOptionError, match="mapping of view names"):
        mvtable.create_views(spark, {})


def test_sql_rolls_a_transaction_back_in_every_table(spark, tmp_path):
    mvtable.register(spark)
    a, b = Table(str(tmp_path / "a")), Table(str(tmp_path / "b"))
    for t in (a, b):
        t.append(pa.table({"id": [1]}))
    with mvtable.transaction() as tx:
        tx.append(a, pa.table({"id": [2]}))
        tx.overwrite(b, pa.table({"id": [3]}))
    query = f"SELECT * FROM mvtable_rollback(table => '{b.uri}', transaction => '{tx.id}')"
    rows = spark.sql(query).collect()
    assert sorted((r.operation, r.changed) for r in rows) == [("TXN_ROLLBACK", True)] * 2
    assert {r.version for r in rows} == {a.version, b.version}
    assert a.to_arrow().column("id").to_pylist() == [1] and b.to_arrow().column("id").to_pylist() == [1]
    assert [r.changed for r in spark.sql(query).collect()] == [False, False]  # run again: nothing more
    with pytest.raises(Exception, match="exactly one of entry"):
        spark.sql(f"SELECT * FROM mvtable_rollback(table => '{b.uri}', version => 1, transaction => '{tx.id}')").collect()


def test_dataframes_written_on_the_cluster_commit_with_the_other_writes(spark, tmp_path):
    facts, dims, log = (str(tmp_path / n) for n in ("facts", "dims", "log"))
    Table(dims).append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    df = spark.range(0, 300, numPartitions=3).selectExpr("id", "id % 7 AS bucket")
    with mvtable.transaction(spark=spark) as tx:
        assert tx.write(df, facts, mode="append") == 300
        tx.write(spark.createDataFrame([(9, "z")], "id long, name string"), dims, mode="overwrite")
        tx.append(log, pa.table({"event": ["refresh"]}))
        assert Table(dims).to_arrow().column("name").to_pylist() == ["a", "b"]  # nothing visible inside
    t = Table(facts)
    assert t.to_arrow().num_rows == 300 and len(t.snapshot().visible_segment_ids()) == 3  # one segment per task
    assert Table(dims).to_arrow().column("name").to_pylist() == ["z"]
    assert tx.result is not None and {uri for uri, _ in tx.result.versions} == {Table(p).io.uri for p in (facts, dims, log)}
    with pytest.raises(RuntimeError, match="boom"), mvtable.transaction(spark=spark) as tx2:
        tx2.write(df, facts, mode="overwrite")
        raise RuntimeError("boom")
    assert Table(facts).to_arrow().num_rows == 300
    with pytest.raises(InvalidOptionError, match="unknown write mode"):
        mvtable.transaction(spark=spark).write(df, facts, mode="merge")


def test_spark_writes_to_a_keyed_table_keep_its_keys_unique(spark, tmp_path):
    from mvtable.errors import DuplicateKeyError

    keyed = Table.create(str(tmp_path / "k"), schema=pa.schema([("id", pa.int64())]), primary_key=["id"])
    keyed.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    with mvtable.transaction(spark=spark) as tx:
        with pytest.raises(DuplicateKeyError):
            tx.write(spark.range(2, 5, numPartitions=2), keyed.uri)  # key 2 is in the table
        assert tx.write(spark.range(5, 8, numPartitions=2), keyed.uri) == 3
    assert sorted(keyed.to_arrow().column("id").to_pylist()) == [1, 2, 5, 6, 7]
