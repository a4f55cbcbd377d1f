"""Spark after add, rename, drop + re-add and widen: both routes of ``format("mvtable")``, ``read_native`` (JVM
and expression masks), ``create_view``, time travel, and ``mergeSchema`` / ``overwriteSchema`` writes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.spark import native_jvm, read_native
from mvtable.connector.spark.views import create_view, drop_view
from mvtable.errors import MvTableError
from tests.support.spark_session import PYTHON_ROUTE, spark_conf

from .test_reads_by_id import OLD, evolve, expected, new_rows, old_rows

pytestmark = pytest.mark.spark


@pytest.fixture
def evolved(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=OLD, properties={"rowGroupRows": "5"})
    t.append(old_rows(0, 10))
    t.append(old_rows(10, 20))
    t.delete(pc.field("id") == 3)  # a deletion vector: the masked scans too
    evolve(t)
    t.append(new_rows(20, 25))
    return t


def as_dicts(df) -> list[dict]:
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: r["id"])


LIVE = [i for i in range(25) if i != 3]


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("route", ["native", "python"])
def test_format_load_reads_by_id_on_both_routes(spark, evolved, route):
    conf = PYTHON_ROUTE if route == "python" else {}
    with spark_conf(spark, conf):
        df = spark.read.format("mvtable").load(evolved.uri)
        assert df.columns == ["id", "a", "bee", "s", "d", "c"]
        assert as_dicts(df) == expected(LIVE)
        # a filter on the re-added column: old rows are null, never the old values
        assert sorted(r.id for r in df.where("c IS NULL").select("id").collect()) == [i for i in range(20) if i != 3]
    # the native route declines tables with older-schema files (Spark matches by name) and says why
    if route == "native":
        assert "(Python)" in plan_of(df)


@pytest.mark.parametrize("mask", ["jvm", "expression"])
def test_read_native_and_views_resolve_by_id(spark, evolved, mask, monkeypatch):
    if mask == "expression":
        monkeypatch.setenv(native_jvm.SWITCH, "off")
    df = read_native(spark, evolved.uri)
    assert df.columns == ["id", "a", "bee", "s", "d", "c"]
    assert as_dicts(df) == expected(LIVE)
    assert "FileScan" in plan_of(df)
    assert [r.id for r in read_native(spark, evolved.uri, filters=[("c", "==", -1.0)]).collect()] == [20, 21, 22, 23, 24]
    view = create_view(spark, "schema_evolved", evolved.uri)
    try:
        got = spark.sql("SELECT id, bee, s.why AS why, c FROM schema_evolved WHERE id IN (1, 21)").collect()
        assert sorted(tuple(r) for r in got) == [(1, "b1", "y1", None), (21, "B21", "w21", -1.0)]
    finally:
        drop_view(spark, view.name)


def test_time_travel_reads_the_old_schema(spark, evolved):
    first_change = next(h.version for h in evolved.history() if h.operation.value == "UPDATE_SCHEMA")
    df = spark.read.format("mvtable").option("versionAsOf", first_change - 1).load(evolved.uri)
    assert df.columns == OLD.names
    assert sorted(r.c for r in df.collect())[:2] == [0.0, 1.5]
    old = read_native(spark, evolved.uri, version=first_change - 1)
    assert old.columns == OLD.names and old.count() == 19
    view = create_view(spark, "schema_old_version", evolved.uri, version=first_change - 1)
    try:
        assert spark.table("schema_old_version").columns == OLD.names
        assert spark.sql("SELECT b, c FROM schema_old_version WHERE id = 1").collect()[0].asDict() == {"b": "b1", "c": 1.5}
    finally:
        drop_view(spark, view.name)
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW schema_sql_old USING mvtable OPTIONS (path '{evolved.uri}', versionAsOf '{first_change - 1}')"
    )
    assert spark.table("schema_sql_old").columns == OLD.names


def test_merge_schema_and_overwrite_schema_options(spark, tmp_path):
    path = str(tmp_path / "w")
    Table.create(path, schema=pa.schema([("id", pa.int64()), ("qty", pa.int32())]))
    spark.createDataFrame([(1, 10)], "id long, qty int").write.format("mvtable").mode("append").save(path)
    more = spark.createDataFrame([(2, 20, "x")], "id long, qty long, note string")
    with pytest.raises(Exception) as err:
        more.write.format("mvtable").mode("append").save(path)
    assert "mergeSchema" in str(err.value)
    more.write.format("mvtable").mode("append").option("mergeSchema", "true").save(path)
    t = Table.open(path)
    assert t.schema.names == ["id", "qty", "note"] and t.schema.field("qty").type == pa.int64()
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "qty": 10, "note": None},
        {"id": 2, "qty": 20, "note": "x"},
    ]
    # a merging writer may leave out a nullable column: executors write it as nulls
    spark.createDataFrame([(3, 30)], "id long, qty long").write.format("mvtable").mode("append").option(
        "mergeSchema", "true"
    ).save(path)
    assert {r["id"]: r["note"] for r in t.to_arrow().to_pylist()} == {1: None, 2: "x", 3: None}
    other = spark.createDataFrame([("k", 1.5)], "key string, value double")
    other.write.format("mvtable").mode("overwrite").option("consistentPush", "true").option("overwriteSchema", "true").save(path)
    assert t.schema.names == ["key", "value"] and t.to_arrow().to_pylist() == [{"key": "k", "value": 1.5}]
    t.rollback(entry=t.lineage()[-1].id)
    assert t.schema.names == ["id", "qty", "note"] and t.to_arrow().num_rows == 3
    with pytest.raises(MvTableError):
        t.overwrite(pa.table({"id": [1]}), overwrite_schema=True, consistent_push=True, publish=False)


def test_change_feed_and_sql_delete_after_evolution(spark, evolved):
    import mvtable

    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", 0).load(evolved.uri)
    inserts = {r.id: r for r in feed.where("_change_type = 'insert'").collect()}
    assert (inserts[1].bee, inserts[1].c, inserts[21].bee, inserts[21].c) == ("b1", None, "B21", -1.0)
    assert mvtable.delete(spark, evolved.uri, "bee = 'b5' OR c = -1.0") == 6
    assert sorted(evolved.to_arrow().column("id").to_pylist()) == [i for i in range(20) if i not in (3, 5)]
