"""Deletes through Spark: the distributed delete() helper and operation=delete writes, the rows
read (and their addresses found) on both read routes."""

from __future__ import annotations

import pytest

from mvtable.connector import Table, delete
from tests.support.spark_session import assert_route

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("read_route")]
WRITE_ONLY = pytest.mark.parametrize("read_route", ["native"], indirect=True)  # reads nothing through Spark: one route


@pytest.fixture
def path(spark, tmp_path):
    p = str(tmp_path / "t")
    (
        spark.range(0, 3000, numPartitions=3)
        .selectExpr("id", "if(id % 10 = 0, 'cancelled', 'ok') AS status", "id % 50 AS user_id")
        .write.format("mvtable")
        .mode("append")
        .option("property.rowGroupRows", "250")
        .save(p)
    )
    return p


def test_distributed_delete(spark, path):
    assert delete(spark, path, "status = 'cancelled' AND id < 1500") == 150
    assert delete(spark, path, "status = 'cancelled' AND id < 1500") == 0
    live = spark.read.format("mvtable").load(path)
    assert live.count() == 2850
    assert live.where("status = 'cancelled' AND id < 1500").count() == 0
    assert spark.read.format("mvtable").option("versionAsOf", 0).load(path).count() == 3000


def test_delete_rows_that_join_another_table(spark, path, read_route):
    rows = spark.read.format("mvtable").option("withRowAddress", "true").load(path)
    assert_route(rows, read_route)
    assert {"_mv_segment", "_mv_row"} <= set(rows.columns)
    blocklist = spark.createDataFrame([(3,), (7,)], "user_id long")
    bad = rows.join(blocklist, "user_id").select("_mv_segment", "_mv_row")
    bad.write.format("mvtable").option("operation", "delete").mode("append").save(path)
    live = spark.read.format("mvtable").load(path)
    assert live.where("user_id IN (3, 7)").count() == 0
    assert live.count() == 3000 - 120
    assert Table.open(path).history()[-1].operation == "DELETE"


@WRITE_ONLY
def test_bad_addresses_commit_nothing(spark, path):
    version = Table.open(path).version
    bad = spark.createDataFrame([("nosuch", 1)], "_mv_segment string, _mv_row long")
    with pytest.raises(Exception, match="InvalidRowAddressError"):
        bad.write.format("mvtable").option("operation", "delete").mode("append").save(path)
    seg = Table.open(path).snapshot().visible_segment_ids()[0]
    past_end = spark.createDataFrame([(seg, 10**9)], "_mv_segment string, _mv_row long")
    with pytest.raises(Exception, match="does not exist"):
        past_end.write.format("mvtable").option("operation", "delete").mode("append").save(path)
    wrong = spark.createDataFrame([(seg,)], "_mv_segment string")
    with pytest.raises(Exception, match="exactly the columns"):
        wrong.write.format("mvtable").option("operation", "delete").mode("append").save(path)
    assert Table.open(path).version == version


def test_deletes_apply_in_spark_reads_at_each_version(spark, path):
    delete(spark, path, "id < 100")
    v1 = Table.open(path).version
    delete(spark, path, "id >= 2900")
    read = lambda v: spark.read.format("mvtable").option("versionAsOf", v).load(path).count()
    assert (read(0), read(v1), read(v1 + 1)) == (3000, 2900, 2800)
