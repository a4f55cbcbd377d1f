"""Primary keys through Spark: .option("primaryKey") on the first write, keyed appends
checked in the tasks, distributed operation=upsert, and validated pushes."""

from __future__ import annotations

import pytest

from mvtable.connector import Table, register
from tests.support.spark_session import assert_route

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("read_route")]
WRITE_ONLY = pytest.mark.parametrize("read_route", ["native"], indirect=True)  # reads nothing through Spark: one route


@pytest.fixture
def path(spark, tmp_path):
    p = str(tmp_path / "t")
    (
        spark.range(0, 3000, numPartitions=3)
        .selectExpr("id", "concat('v1-', id) AS name")
        .write.format("mvtable")
        .mode("append")
        .option("primaryKey", "id")
        .option("property.rowGroupRows", "250")
        .save(p)
    )
    return p


def test_distributed_upsert(spark, path, read_route):
    t = Table.open(path)
    assert t.primary_key == ("id",)
    version = t.version
    changes = spark.range(2900, 3100, numPartitions=4).selectExpr("id", "concat('v2-', id) AS name")
    changes.write.format("mvtable").mode("append").option("operation", "upsert").save(path)
    live = spark.read.format("mvtable").load(path)
    assert_route(live, read_route)
    assert live.count() == 3100
    assert live.select("id").distinct().count() == 3100
    assert live.where("name LIKE 'v2-%'").count() == 200 and live.where("id = 2950").first().name == "v2-2950"
    last = Table.open(path).history()[-1]
    assert (last.operation, last.metrics["updated_rows"], last.metrics["inserted_rows"]) == ("UPSERT", 100, 100)
    assert spark.read.format("mvtable").option("versionAsOf", version).load(path).where("id = 2950").first().name == "v1-2950"


def test_keyed_appends_and_pushes_refuse_duplicates(spark, path):
    version = Table.open(path).version
    dup = spark.range(2990, 3010, numPartitions=2).selectExpr("id", "'x' AS name")
    with pytest.raises(Exception, match="DuplicateKeyError"):
        dup.write.format("mvtable").mode("append").save(path)
    across_tasks = spark.createDataFrame([(5000, "a"), (5000, "b")], "id long, name string").repartition(2)
    with pytest.raises(Exception, match="DuplicateKeyError"):
        across_tasks.write.format("mvtable").mode("append").save(path)
    with pytest.raises(Exception, match="DuplicateKeyError"):
        across_tasks.write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(path)
    with pytest.raises(Exception, match="NullKeyError"):
        spark.createDataFrame([(None, "n")], "id long, name string").write.format("mvtable").mode("append").save(path)
    t = Table.open(path)
    assert t.to_arrow().num_rows == 3000 and len(t.lineage()) == 1 and t.lineage()[0].state == "REVERTED"
    assert [h.operation for h in t.history()[version + 1 :]] == ["PUSH_START", "PUSH_ABORT"]
    fresh = spark.range(3000, 3010).selectExpr("id", "'new' AS name")
    fresh.write.format("mvtable").mode("append").save(path)
    assert spark.read.format("mvtable").load(path).count() == 3010


@WRITE_ONLY
def test_key_columns_match_in_any_case_in_the_tasks(spark, tmp_path):
    p = str(tmp_path / "cased")
    first = spark.createDataFrame([(1, "a"), (2, "b")], "`Order Id` long, v string")
    first.write.format("mvtable").mode("append").option("primaryKey", "order id").save(p)
    assert Table.open(p).primary_key == ("Order Id",)
    more = spark.createDataFrame([(3, "c")], "`order id` long, V string")
    more.write.format("mvtable").mode("append").save(p)
    with pytest.raises(Exception, match="DuplicateKeyError"):
        more.write.format("mvtable").mode("append").save(p)
    changes = spark.createDataFrame([(2, "B"), (4, "d")], "`ORDER ID` long, v string")
    changes.write.format("mvtable").mode("append").option("operation", "upsert").save(p)
    rows = {r["Order Id"]: r["v"] for r in Table.open(p).to_arrow().to_pylist()}
    assert rows == {1: "a", 2: "B", 3: "c", 4: "d"}
    spark.createDataFrame([(9, "z")], "`order id` long, v string").write.format("mvtable").mode("overwrite").save(p)
    assert Table.open(p).to_arrow().column("Order Id").to_pylist() == [9]


@WRITE_ONLY
def test_upsert_needs_a_key(spark, tmp_path):
    p = str(tmp_path / "plain")
    spark.range(3).write.format("mvtable").mode("append").save(p)
    with pytest.raises(Exception, match="NoPrimaryKeyError"):
        spark.range(3).write.format("mvtable").mode("append").option("operation", "upsert").save(p)


def test_a_staged_push_publishes_only_without_keys_committed_meanwhile(spark, path):
    push = spark.range(2000, 4000, numPartitions=2).selectExpr("id", "'push' AS name")
    push.write.format("mvtable").mode("overwrite").option("consistentPush", "true").option("publish", "false").save(path)
    entry = Table.open(path).lineage()[-1].id
    # 3500 is not visible while the push waits, so this append lands
    late = spark.createDataFrame([(3500, "late"), (9000, "late")], "id long, name string")
    late.write.format("mvtable").mode("append").save(path)
    version = Table.open(path).version
    register(spark, filter_pushdown=False)  # the SQL procedures
    publish = f"SELECT * FROM mvtable_publish(table => '{path}', entry => '{entry}')"
    with pytest.raises(Exception, match="DuplicateKeyError"):
        spark.sql(publish).collect()
    t = Table.open(path)
    assert t.version == version and t.lineage()[-1].state == "IN_PROGRESS"
    t.delete(keys=[3500])
    [row] = spark.sql(publish).collect()
    assert row.changed
    live = spark.read.format("mvtable").load(path)
    assert live.count() == 2001 and live.select("id").distinct().count() == 2001
    assert live.where("id = 3500").first().name == "push"
