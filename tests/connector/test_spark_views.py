"""``create_view``: SQL over a pinned snapshot on Spark's native Parquet reader; and
``read_native(filters=…)`` pruning segments (files and deletion bitmaps) by statistics."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from mvtable.connector.spark import native_jvm
from mvtable.connector.spark import views as view_registry
from mvtable.connector.spark.native_mask import _MASKS
from mvtable.errors import InvalidOptionError
from mvtable.visibility import pins
from tests.support.spark_session import PYTHON_ROUTE, assert_route, spark_conf

pytestmark = pytest.mark.spark


def days(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([dt.date(2026, 1, 1) + dt.timedelta(days=i // 100) for i in ids], pa.date32()),
            "status": pa.array(["cancelled" if i % 10 == 0 else "ok" for i in ids]),
        }
    )


@pytest.fixture
def table(tmp_path) -> Table:
    """Three segments (days 0-9, 10-19, 20-29), 10% of the first two deleted."""
    t = Table.create(str(tmp_path / "t"), schema=days(0, 1).schema, properties={"rowGroupRows": "250"})
    for start in (0, 1000, 2000):
        t.append(days(start, 1000))
    assert t.delete((pc.field("id") < 2000) & (pc.field("status") == "cancelled")).deleted_rows == 200
    return t


def live_ids(t: Table, version: int | None = None) -> list[int]:
    return sorted(t.scan(version=version, columns=["id"]).to_arrow().column("id").to_pylist())


def test_sql_through_a_view_sees_the_snapshot_with_deletes(spark, table):
    view = mvtable.create_view(spark, "mv_days", table.uri)
    try:
        assert view.version == table.version
        got = sorted(r.id for r in spark.sql("SELECT id FROM mv_days").collect())
        assert got == live_ids(table) and len(got) == 2800
        [row] = spark.sql("SELECT count(*) AS n, max(day) AS d FROM mv_days WHERE status = 'cancelled'").collect()
        assert (row.n, row.d) == (100, dt.date(2026, 1, 30))  # only the third segment's survive
        # Spark's own Parquet scan: the plan prunes columns (no Python data source in it)
        plan = spark.sql("SELECT id FROM mv_days WHERE day >= date'2026-01-25'")._jdf.queryExecution().executedPlan().toString()
        assert "FileScan parquet" in plan and "PythonDataSource" not in plan
    finally:
        mvtable.drop_view(spark, "mv_days")


def test_a_view_is_pinned_until_dropped_and_refresh_moves_it(spark, table):
    view = mvtable.create_view(spark, "mv_pinned", table.uri)
    first = view.version
    live = [p for p in pins.live_pins(table.io) if p.id == view.pin_id]
    assert live and live[0].version == first
    table.append(days(5000, 10))
    table.delete(pc.field("id") == 2001)
    assert spark.sql("SELECT count(*) AS n FROM mv_pinned").collect()[0].n == 2800  # still the old version
    moved = mvtable.refresh_view(spark, "mv_pinned")
    assert moved.version == table.version > first
    assert spark.sql("SELECT count(*) AS n FROM mv_pinned").collect()[0].n == 2809
    assert view.pin_id is None and moved.pin_id in {p.id for p in pins.live_pins(table.io)}
    mvtable.drop_view(spark, "mv_pinned")
    assert moved.pin_id is None
    assert not spark.catalog.tableExists("mv_pinned")


def test_a_view_of_an_old_version_stays_there(spark, table):
    old = table.version - 1  # before the delete
    mvtable.create_view(spark, "mv_old", table.uri, version=old)
    table.append(days(7000, 5))
    view = mvtable.refresh_view(spark, "mv_old")
    assert view.version == old
    assert spark.sql("SELECT count(*) AS n FROM mv_old").collect()[0].n == 3000
    mvtable.drop_view(spark, "mv_old")


def live_pin_ids(t: Table) -> set[str]:
    return {p.id for p in pins.live_pins(t.io)}


def test_view_names_are_case_insensitive_like_spark(spark, table):
    view = mvtable.create_view(spark, "casev", table.uri)
    table.append(days(5000, 10))
    moved = mvtable.refresh_view(spark, "CASEV")  # Spark's name for the same temp view
    assert moved.version == table.version and view.pin_id is None
    assert spark.sql("SELECT count(*) AS n FROM casev").collect()[0].n == 2810
    mvtable.drop_view(spark, "CaseV")
    assert not spark.catalog.tableExists("casev")
    assert moved.pin_id is None and not live_pin_ids(table)
    assert all(v.name.lower() != "casev" for v in view_registry.views())


def test_a_view_dropped_in_sql_loses_its_pin_at_the_next_renewal(spark, table):
    kept = mvtable.create_view(spark, "mv_kept", table.uri)
    gone = mvtable.create_view(spark, "mv_gone", table.uri)
    pin_id = gone.pin_id
    assert pin_id in live_pin_ids(table) and table.io.exists(pins.pin_path(pin_id))
    spark.sql("DROP VIEW mv_gone")
    view_registry.renew_views()  # one round of the daemon's renewal, run here
    assert gone.pin_id is None and pin_id not in live_pin_ids(table)
    assert not table.io.exists(pins.pin_path(pin_id))  # the pin file itself is gone
    assert [v.name for v in view_registry.views() if v.name.startswith("mv_")] == ["mv_kept"]
    assert kept.pin_id in live_pin_ids(table)  # a view still there keeps its pin
    mvtable.drop_view(spark, "mv_kept")


def test_a_using_view_stays_on_its_version_as_the_readme_says(spark, table, read_route):
    """The README's SQL section: Spark 4.3 keeps the data source and its planned partitions
    in a ``USING mvtable`` view's plan, so the view neither sees later commits nor pins anew
    per query (its one pin's expiry moves: renewed by a query, cut to ``pinIdleTtl`` after it,
    see test_spark_pin_lifetime). If this starts failing, Spark plans such views afresh:
    update the README."""
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW mv_using USING mvtable OPTIONS (path '{table.uri}')")
    try:
        assert_route(spark.table("mv_using"), read_route)
        assert spark.sql("SELECT count(*) AS n FROM mv_using").collect()[0].n == 2800
        [before] = pins.live_pins(table.io)
        spark.sql("INSERT INTO mv_using VALUES (9000, date'2026-03-01', 'ok')")
        assert Table.open(table.uri).to_arrow().num_rows == 2801  # the insert landed
        assert spark.sql("SELECT count(*) AS n FROM mv_using").collect()[0].n == 2800  # the view did not move
        assert [(p.id, p.version) for p in pins.live_pins(table.io)] == [(before.id, before.version)]
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW mv_using USING mvtable OPTIONS (path '{table.uri}')")
        assert spark.sql("SELECT count(*) AS n FROM mv_using").collect()[0].n == 2801  # recreating it does
    finally:
        spark.catalog.dropTempView("mv_using")


def test_bad_view_input_is_typed(spark, table):
    with pytest.raises(InvalidOptionError, match="view name"):
        mvtable.create_view(spark, "bad name;", table.uri)
    with pytest.raises(InvalidOptionError, match="no mvtable view"):
        mvtable.refresh_view(spark, "never_made")
    with pytest.raises(InvalidOptionError, match="not both"):
        mvtable.create_view(spark, "v", table.uri, version=1, timestamp="2026-01-01")
    # a bare string or one bare filter tuple is named as the mistake, not iterated into letters
    with pytest.raises(InvalidOptionError, match="list of names"):
        mvtable.create_view(spark, "v", table.uri, columns="id")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="list of"):
        mvtable.create_view(spark, "v", table.uri, filters="id > 3")  # type: ignore[arg-type]
    assert not spark.catalog.tableExists("v")


def test_filters_prune_files_and_bitmaps(spark, table, monkeypatch):
    # the JVM mask: only the surviving segments are scanned, so only their vectors are read
    df = mvtable.read_native(spark, table.uri, filters=[("day", ">=", dt.date(2026, 1, 15))])
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert len(df.inputFiles()) == 2 and plan.count("FileScan mvtable-parquet") == 1
    assert sorted(r.id for r in df.select("id").collect()) == [i for i in live_ids(table) if i >= 1400]
    # the expression mask builds bitmaps on the driver: only for the surviving segments
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    _MASKS.clear()
    df = mvtable.read_native(spark, table.uri, filters=[("day", ">=", dt.date(2026, 1, 21))])
    assert len(df.inputFiles()) == 1  # only the third segment can match
    got = sorted(r.id for r in df.select("id").collect())
    assert got == [i for i in live_ids(table) if i >= 2000]
    assert not _MASKS  # the third segment has no deletes: no bitmap built at all
    df = mvtable.read_native(spark, table.uri, filters=[("day", ">=", dt.date(2026, 1, 15))])
    assert sorted(r.id for r in df.select("id").collect()) == [i for i in live_ids(table) if i >= 1400]
    assert [len(key[1]) for key in _MASKS] == [1]  # the second segment's bitmap only, not the first's
    # a filter reaching into a segment with deletes still masks them
    df = mvtable.read_native(spark, table.uri, filters=[("day", "<", dt.date(2026, 1, 2)), ("status", "in", ["ok", "cancelled"])])
    assert sorted(r.id for r in df.collect()) == [i for i in range(100) if i % 10]
    with pytest.raises(InvalidOptionError, match="not in the table"):
        mvtable.read_native(spark, table.uri, filters=[("nope", "==", 1)])
    with pytest.raises(InvalidOptionError, match="unknown filter operator"):
        mvtable.read_native(spark, table.uri, filters=[("id", "~", 1)])


def test_the_expression_masks_bitmaps_are_reused_for_the_same_version(spark, table, monkeypatch):
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    _MASKS.clear()
    a = mvtable.read_native(spark, table.uri)
    b = mvtable.read_native(spark, table.uri)
    assert len(_MASKS) == 1 and a.count() == b.count() == 2800
    table.delete(pc.field("id") == 2500)
    assert mvtable.read_native(spark, table.uri).count() == 2799 and len(_MASKS) == 2


def test_register_leaves_filter_pushdown_off_unless_asked(spark):
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.unset(key)
    try:
        mvtable.register(spark)
        assert spark.conf.get(key) == "false"
        mvtable.register(spark, filter_pushdown=True)
        assert spark.conf.get(key) == "true"
    finally:
        spark.conf.unset(key)


def test_why_pushdown_is_off_by_default(spark, table):
    """Spark 4.3 keeps a Python source's pushdown result on the DataFrame's relation and
    skips the Python call when a later query has no pushable filter, so that query reuses
    the filtered plan. If this starts failing, Spark fixed it: pushdown could be on again."""
    key = "spark.sql.python.filterPushdown.enabled"
    spark.conf.set(key, "true")
    try:
        with spark_conf(spark, PYTHON_ROUTE):
            df = spark.read.format("mvtable").load(table.uri)
        assert df.where("id >= 2900").count() == 100
        stale = df.count()
        # Spark's Parquet scan (mvtable's jar in the session) pushes filters itself: no reuse
        native = spark.read.format("mvtable").load(table.uri)
        assert native.where("id >= 2900").count() == 100 and native.count() == 2800
    finally:
        spark.conf.unset(key)
    assert stale == 100  # not 2800: the filtered plan was reused
    with spark_conf(spark, PYTHON_ROUTE):
        df = spark.read.format("mvtable").load(table.uri)  # pushdown off (the default): plans afresh
    assert df.where("id >= 2900").count() == 100 and df.count() == 2800
