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


# the reads every route must answer alike on the evolved table: added, renamed, dropped + re-added,
# widened and nested columns, deleted rows, pruned columns and filters on renamed and re-added ones
READS = [
    lambda df: df,
    lambda df: df.select("bee", "c"),
    lambda df: df.where("bee = 'b5' OR bee = 'B22'").select("id", "bee"),
    lambda df: df.where("c IS NULL").select("id"),
    lambda df: df.where("c = -1.0").select("id", "a", "d"),
    lambda df: df.where("a > 1000").select("id", "a"),
    lambda df: df.where("s.why = 'y7' OR s.z = 23").select("id", "s"),
    lambda df: df.groupBy().count(),
]


def routes_answer(spark, uri: str, reads) -> tuple[list, list, list]:
    """Each read's rows through the native scan and through the Python source, and the native plans."""
    out: dict[str, list] = {"native": [], "python": []}
    plans = []
    for route in ("native", "python"):
        with spark_conf(spark, PYTHON_ROUTE if route == "python" else {}):
            df = spark.read.format("mvtable").load(uri)
            for read in reads:
                q = read(df)
                out[route].append(sorted(str(r.asDict(recursive=True)) for r in q.collect()))
                if route == "native":
                    plans.append(plan_of(q))
    return out["native"], out["python"], plans


def native_scan(plan: str) -> bool:
    return "FileScan" in plan and "(Python)" not in plan


def test_format_load_reads_by_id_on_both_routes(spark, evolved):
    native, python, plans = routes_answer(spark, evolved.uri, READS)
    assert native == python
    assert native[0] == sorted(str(r) for r in expected(LIVE))
    assert native[3] == sorted(str({"id": i}) for i in range(20) if i != 3)  # old rows: null, never the old values
    assert native[2] == sorted(str(r) for r in [{"id": 5, "bee": "b5"}, {"id": 22, "bee": "B22"}])
    # Spark's file scans, one per file schema: the old files by their own names, the filter on the
    # renamed column pushed into their scan under its old name, only the columns asked for read
    assert all(native_scan(p) for p in plans), plans
    assert "PushedFilters: [EqualTo(_mv_deleted,0), Or(EqualTo(b,b5),EqualTo(b,B22))]" in plans[2], plans[2]
    assert "ReadSchema: struct<b:string,_mv_deleted:tinyint>" in plans[1], plans[1]
    assert "ReadSchema: struct<bee:string,c:double>" in plans[1], plans[1]


def test_format_load_of_a_legacy_table_after_renames_reads_natively(spark, tmp_path):
    import shutil

    from .test_legacy_table import EVOLVED, FIXTURE, _evolve_legacy

    root = tmp_path / "legacy"
    shutil.copytree(FIXTURE, root)
    t = Table.open(str(root))
    _evolve_legacy(t)  # files without field ids: resolved by position, a list of structs renamed inside
    reads = [lambda df: df, lambda df: df.where("label = 'n2'").select("id", "tags"), lambda df: df.select("qty")]
    native, python, plans = routes_answer(spark, t.uri, reads)
    assert native == python and native[0] == sorted(str(r) for r in EVOLVED)
    assert native[2] == [str({"qty": None})] * 5
    assert all(native_scan(p) for p in plans), plans


def test_row_addresses_of_an_evolved_table_on_both_routes(spark, evolved):
    out = {}
    for route in ("native", "python"):
        with spark_conf(spark, PYTHON_ROUTE if route == "python" else {}):
            df = spark.read.format("mvtable").option("withRowAddress", "true").load(evolved.uri)
            q = df.where("bee IN ('b1', 'b12', 'B21')").select("id", "bee", "_mv_segment", "_mv_row")
            out[route] = sorted(tuple(r) for r in q.collect())
            if route == "native":
                assert native_scan(plan_of(q)), plan_of(q)
    assert out["native"] == out["python"] and [r[:2] for r in out["native"]] == [(1, "b1"), (12, "b12"), (21, "B21")]


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


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_widened_columns_read_alike_on_both_routes(spark, tmp_path, zone):
    import datetime as dt
    from decimal import Decimal

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("i8", pa.int8()),
            ("f", pa.float32()),
            ("dec", pa.decimal128(5, 2)),
            ("day", pa.date32()),
            ("day_ntz", pa.date32()),
        ]
    )
    t = Table.create(str(tmp_path / "w"), schema=schema)
    t.append(
        pa.table(
            {"id": pa.array([1, 2], pa.int64()), "i8": pa.array([-3, 7], pa.int8()), "f": pa.array([1.5, -2.25], pa.float32()),
             "dec": [Decimal("123.45"), Decimal("-0.01")], "day": [dt.date(2024, 2, 29), dt.date(1970, 1, 1)],
             "day_ntz": [dt.date(2024, 2, 29), dt.date(1970, 1, 1)]},
            schema=schema,
        )
    )  # fmt: skip
    t.delete(pc.field("id") == 2)
    with t.update_schema() as u:
        u.update_column("i8", pa.int16())
        u.update_column("f", pa.float64())
        u.update_column("dec", pa.decimal128(7, 2))
        u.update_column("day", pa.timestamp("us", tz="UTC"))
        u.update_column("day_ntz", pa.timestamp("us"))
    with spark_conf(spark, {"spark.sql.session.timeZone": zone}):
        native, python, plans = routes_answer(spark, t.uri, [lambda df: df, lambda df: df.where("i8 < 0").select("id")])
        by_read_native = sorted(str(r.asDict(recursive=True)) for r in read_native(spark, t.uri).collect())
    assert native == python and native[1] == [str({"id": 1})] and by_read_native == python[0]
    assert all(native_scan(p) for p in plans), plans
    arrow = t.to_arrow().to_pylist()
    assert arrow[0]["day"] == dt.datetime(2024, 2, 29, tzinfo=dt.timezone.utc) and arrow[0]["f"] == 1.5
