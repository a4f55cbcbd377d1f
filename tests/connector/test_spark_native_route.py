"""``format("mvtable")`` and ``USING mvtable`` on Spark's own Parquet scan (``native_plan``,
``jvm/DefaultSource.java``): the same rows as the Python source on every key read, a file
scan with pruned columns and pushed filters in the plan, the version a DataFrame or view was
made at kept while commits land, and every read the scan cannot serve going to Python with a
reason."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.options import read_options
from mvtable.connector.spark import native_jvm, native_plan
from mvtable.connector.spark.source import MvTableDataSource
from tests.support.spark_jvm import QUICK_JIT_OPTS, cds_java_opts, real_spark_home, shadow_spark_home, spark_env
from tests.support.spark_session import PYTHON_ROUTE, assert_route, plan_of, spark_conf

from .conftest import orders

pytestmark = pytest.mark.spark


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*[c.to_pylist() for c in table.columns]))


def fallbacks(spark) -> list[str]:
    return list(spark._jvm.io.mvtable.spark.NativeScanRule.fallbacks())


@pytest.fixture
def table(tmp_path) -> Table:
    """Three segments of 1000 rows, the cancelled rows (10%) of the first two deleted."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"rowGroupRows": "300"})
    for start in (0, 1000, 2000):
        t.append(orders(start, 1000))
    assert t.delete((pc.field("id") < 2000) & (pc.field("status") == "cancelled")).deleted_rows == 200
    return t


def test_a_load_reads_the_visible_rows_deleted_ones_hidden(spark, table, read_route):
    df = spark.read.format("mvtable").load(table.uri)
    assert_route(df, read_route)
    got = rows(df)
    assert got == arrow_rows(table.to_arrow()) and len(got) == 2800
    assert not any(r[0] < 2000 and r[1] == "cancelled" for r in got)


def test_time_travel_by_version_and_timestamp(spark, table, read_route):
    by_version = spark.read.format("mvtable").option("versionAsOf", 2).load(table.uri)
    assert_route(by_version, read_route)
    assert rows(by_version) == arrow_rows(table.to_arrow(version=2)) and by_version.count() == 2000
    v2 = next(h for h in table.history() if h.version == 2)
    by_time = spark.read.format("mvtable").option("timestampAsOf", v2.timestamp.isoformat()).load(table.uri)
    assert_route(by_time, read_route)
    assert rows(by_time) == rows(by_version)


def test_columns_option_and_column_pruning(spark, table, read_route):
    df = spark.read.format("mvtable").option("columns", "id,price").load(table.uri)
    assert df.columns == ["id", "price"]
    assert rows(df) == arrow_rows(table.to_arrow().select(["id", "price"]))
    pruned = spark.read.format("mvtable").load(table.uri).select("id")
    assert_route(pruned, read_route)
    if read_route == "native":
        assert "ReadSchema: struct<id:bigint,_mv_deleted:tinyint>" in plan_of(pruned)
    assert sorted(r.id for r in pruned.collect()) == sorted(table.to_arrow().column("id").to_pylist())


def test_filters_are_pushed_into_the_parquet_scan(spark, table, read_route):
    q = spark.read.format("mvtable").load(table.uri).where("price > 3000 AND status = 'ok'").select("id")
    assert_route(q, read_route)
    if read_route == "native":
        plan = plan_of(q)
        assert "PushedFilters: [EqualTo(_mv_deleted,0)" in plan and "GreaterThan(price,3000.0)" in plan
    expected = [i for i, s, p in arrow_rows(table.to_arrow()) if p > 3000 and s == "ok"]
    assert sorted(r.id for r in q.collect()) == expected


def test_a_version_without_deletes_is_a_plain_parquet_scan(spark, table):
    df = spark.read.format("mvtable").option("versionAsOf", 3).load(table.uri)
    plan = plan_of(df)
    assert "FileScan parquet" in plan and "_mv_deleted" not in plan
    assert df.count() == 3000


def test_lineage_entry_reads_the_staged_push(spark, tmp_path, read_route):
    path = str(tmp_path / "s")
    spark.range(5).write.format("mvtable").mode("append").save(path)
    staged = spark.range(100, 103).write.format("mvtable").mode("overwrite")
    staged.option("consistentPush", "true").option("publish", "false").save(path)
    entry = Table.open(path).lineage()[0]
    df = spark.read.format("mvtable").option("lineageEntry", entry.id).load(path)
    assert_route(df, read_route)
    assert sorted(r.id for r in df.collect()) == [100, 101, 102]
    assert sorted(r.id for r in spark.read.format("mvtable").load(path).collect()) == list(range(5))


def test_a_dataframe_and_a_view_stay_on_their_version_while_appends_land(spark, table, read_route):
    df = spark.read.format("mvtable").load(table.uri)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW native_route_v USING mvtable OPTIONS (path '{table.uri}')")
    try:
        view = spark.sql("SELECT id FROM native_route_v WHERE id >= 2990")
        assert_route(view, read_route)
        before = rows(view)
        table.append(orders(3000, 10))
        table.delete(pc.field("id") == 2995)
        assert df.count() == 2800 and rows(view) == before
        assert spark.sql("SELECT count(*) FROM native_route_v").first()[0] == 2800
        assert spark.read.format("mvtable").load(table.uri).count() == 2809
    finally:
        spark.sql("DROP VIEW IF EXISTS native_route_v")


def test_a_view_with_a_version_option_and_an_aggregate(spark, table, read_route):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW native_route_v2 USING mvtable OPTIONS (path '{table.uri}', versionAsOf '2')")
    try:
        q = spark.sql("SELECT status, count(*) AS n FROM native_route_v2 WHERE id > 100 GROUP BY status")
        assert_route(q, read_route)
        expected: dict[str, int] = {}
        for i, s, _ in arrow_rows(table.to_arrow(version=2)):
            if i > 100:
                expected[s] = expected.get(s, 0) + 1
        assert {r.status: r.n for r in q.collect()} == expected
    finally:
        spark.sql("DROP VIEW IF EXISTS native_route_v2")


def test_the_files_size_reaches_spark_so_a_small_table_is_broadcast(spark, table):
    small = spark.read.format("mvtable").load(table.uri).where("id < 10")
    joined = spark.range(0, 3000).join(small, "id")
    assert "BroadcastHashJoin" in plan_of(joined)
    assert joined.count() == 9  # id 0 is cancelled and deleted


def test_row_addresses_and_a_delete_by_join(spark, table, read_route):
    """``withRowAddress`` natively: ``_mv_segment`` from each file's segment, ``_mv_row`` from
    Spark's row index; filters on them are not pushed into Parquet (no file has them)."""
    df = spark.read.format("mvtable").option("withRowAddress", "true").load(table.uri)
    assert_route(df, read_route)
    expected = table.to_arrow(with_row_address=True).select(["id", "_mv_segment", "_mv_row"])
    assert rows(df.select("id", "_mv_segment", "_mv_row")) == arrow_rows(expected)
    assert rows(df.where("_mv_row < 5").select("id", "_mv_row")) == sorted((i, r) for i, _, r in arrow_rows(expected) if r < 5)
    one = expected.column("_mv_segment")[0].as_py()
    assert df.where(f"_mv_segment = '{one}'").count() == sum(s == one for _, s, _ in arrow_rows(expected))
    bad = df.where("id % 100 = 7").select("_mv_segment", "_mv_row")
    bad.write.format("mvtable").option("operation", "delete").mode("append").save(table.uri)
    assert spark.read.format("mvtable").load(table.uri).count() == 2800 - 30


def test_reads_it_cannot_serve_go_to_python_with_a_reason(spark, table):
    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", 1).load(table.uri)
    assert "(Python)" in plan_of(feed) and feed.count() > 0
    user_schema = spark.read.format("mvtable").schema("id long, price double").load(table.uri)
    assert "(Python)" in plan_of(user_schema)
    assert rows(user_schema) == arrow_rows(table.to_arrow().select(["id", "price"]))
    with spark_conf(spark, PYTHON_ROUTE):
        off = spark.read.format("mvtable").load(table.uri)
    assert "(Python)" in plan_of(off)
    sized = spark.read.format("mvtable").option("maxPartitionBytes", "4096").load(table.uri)
    assert "(Python)" in plan_of(sized) and sized.rdd.getNumPartitions() > 1 and sized.count() == 2800
    with pytest.raises(Exception, match="maxRowsPerTrigger: for spark.readStream only"):
        spark.read.format("mvtable").option("maxRowsPerTrigger", "5").load(table.uri).collect()
    said = fallbacks(spark)
    for reason in (
        "readChangeFeed reads versions one after another",
        "a user-given schema (spark.read.schema) or a stream with one",
        "spark.mvtable.nativeScan=false",
        "maxPartitionBytes size the Python source's partitions",
        "maxRowsPerTrigger are options of streams and change feeds",
    ):
        assert said.count(reason) == 1, said


def test_the_python_source_declines_when_the_jvm_mask_is_switched_off(table, monkeypatch):
    """``MVTABLE_JVM_MASK=off`` in the planner's environment: the plan says Python, and why."""

    def plan(options):
        source = MvTableDataSource({"path": table.uri, native_plan.PLAN_OPTION: "1", **options})
        assert source.jvm.plan and native_plan.PLAN_OPTION not in source.options
        return json.loads(source.schema().fields[0].metadata[native_plan.PLAN_KEY])

    on = plan({})
    assert on["native"] and on["version"] == 4 and len(on["files"]) == 3
    assert sum(f["dv"] is not None for f in on["files"]) == 2 and on["root"].startswith("file://")
    assert native_plan.decline_reason(read_options({"path": "s3://b/t"}), uri="s3://b/t").startswith("the table is on s3://")
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    off = plan({})
    assert off == {"protocol": native_plan.PROTOCOL, "native": False, "reason": "MVTABLE_JVM_MASK=off"}
    # without the JVM's option the schema carries no plan at all
    assert native_plan.PLAN_KEY not in (MvTableDataSource({"path": table.uri}).schema().fields[0].metadata or {})


def test_register_in_a_new_session_reads_natively(spark, table):
    """``mvtable.register`` registers the Python source before the jar is attached, and the
    rule installs itself in the session that first reads."""
    import mvtable

    other = spark.newSession()
    mvtable.register(other)
    df = other.read.format("mvtable").load(table.uri)
    assert "FileScan" in plan_of(df) and df.count() == 2800


def spark_sql(tmp_path: Path, sql: str, *, discover: bool = True, conf: dict[str, str] | None = None):
    """pyspark's own ``bin/spark-sql -f`` with ``--jars "$(mvtable spark-jar)"``; with
    ``discover`` the repository's ``pyspark_mvtable`` is on the workers' ``PYTHONPATH`` (as a
    wheel install puts it), so Spark's auto-discovery registers the Python source."""
    folder = tmp_path / "discover"
    folder.mkdir(exist_ok=True)
    if discover:
        (folder / "pyspark_mvtable.py").symlink_to(Path(__file__).resolve().parents[2] / "pyspark_mvtable.py")
    script = tmp_path / "q.sql"
    script.write_text(sql)
    env = spark_env(shadow_spark_home(), pythonpath=[folder])
    settings = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.sql.warehouse.dir": str(tmp_path / "wh"),
        # the test JVMs' quick start (C1 only, the class-data archive: see spark_jvm)
        "spark.driver.extraJavaOptions": " ".join(
            f"-Dderby.system.home={tmp_path / 'derby'} {QUICK_JIT_OPTS} {cds_java_opts()}".split()
        ),
        **(conf or {}),
    }
    command = [str(real_spark_home() / "bin" / "spark-sql"), "--master", "local[1]", "--jars", str(native_jvm.spark_jar())]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return subprocess.run(
        [*command, "-f", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("extensions", [None, "io.mvtable.spark.MvtableExtensions"])
def test_spark_sql_with_only_the_jar_reads_a_using_view_natively(table, tmp_path, extensions):
    """No Python driver, and the rule installs itself (or comes from the optional extension
    setting)."""
    done = spark_sql(
        tmp_path,
        f"CREATE TEMPORARY VIEW v USING mvtable OPTIONS (path '{table.uri}');\n"
        "SELECT count(*) FROM v;\n"
        "SELECT sum(id) FROM v WHERE status = 'cancelled';\n"
        "EXPLAIN SELECT id FROM v WHERE id > 2;\n",
        conf={"spark.sql.extensions": extensions} if extensions else None,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    cancelled = [i for i, s, _ in arrow_rows(table.to_arrow()) if s == "cancelled"]
    assert out[0].strip() == "2800" and out[1].strip() == str(sum(cancelled))
    explain = "\n".join(out[2:])
    assert "FileScan mvtable-parquet" in explain and "GreaterThan(id,2)" in explain and "(Python)" not in explain


def test_spark_sql_without_the_python_source_says_what_to_install(table, tmp_path):
    done = spark_sql(tmp_path, f"CREATE TEMPORARY VIEW v USING mvtable OPTIONS (path '{table.uri}');\n", discover=False)
    assert done.returncode != 0
    assert "no Python 'mvtable' data source" in done.stderr and "pip install 'mvtable[spark]'" in done.stderr, done.stderr[-3000:]


def test_a_queried_view_renews_its_pin_only_once_half_its_idle_life_is_used(spark, table):
    """A native view's pin lasts ``pinIdleTtl`` until a query reads it. Queries while half of
    that is left run under it with no Python call; the first query after that renews it to
    ``pinTtl`` before it reads, and Spark's end of the query cuts it back."""
    from mvtable.storage import open_file_io
    from mvtable.visibility import pins

    idle_s = 8
    io = open_file_io(table.uri)
    before = {p.id for p in pins.live_pins(io)}
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW native_route_pin USING mvtable OPTIONS (path '{table.uri}', pinIdleTtl '{idle_s}s')"
    )
    try:
        [pin] = [p for p in pins.live_pins(io) if p.id not in before]
        assert pin.version == 4 and pin.expires_ms <= time.time() * 1000 + idle_s * 1000  # pinIdleTtl: no query yet
        rule = spark._jvm.io.mvtable.spark.NativeScanRule
        lifetime = spark._jvm.io.mvtable.spark.PinLifetime
        renewals, cuts, ended = rule.pinRenewals(), lifetime.pinCuts(), lifetime.executionsEnded()
        for _ in range(2):
            assert spark.sql("SELECT count(*) FROM native_route_pin").first()[0] == 2800
        deadline = time.time() + 30
        while lifetime.executionsEnded() < ended + 2 and time.time() < deadline:
            time.sleep(0.05)
        assert lifetime.settle(30_000)
        assert (rule.pinRenewals(), lifetime.pinCuts()) == (renewals, cuts)  # no Python call
        [same] = [p for p in pins.live_pins(io) if p.id not in before]
        assert same.id == pin.id and same.expires_ms == pin.expires_ms

        time.sleep(max(0.0, (pin.expires_ms - idle_s * 500) / 1000 - time.time()) + 0.2)  # half of it used
        ended = lifetime.executionsEnded()
        assert spark.sql("SELECT count(*) FROM native_route_pin").first()[0] == 2800
        assert rule.pinRenewals() == renewals + 1  # renewed before the query read
        while lifetime.executionsEnded() == ended and time.time() < deadline:
            time.sleep(0.05)
        assert lifetime.settle(30_000) and lifetime.pinCuts() == cuts + 1
        [now] = [p for p in pins.live_pins(io) if p.id not in before]
        assert now.id == pin.id and pin.expires_ms < now.expires_ms <= time.time() * 1000 + idle_s * 1000
    finally:
        spark.sql("DROP VIEW IF EXISTS native_route_pin")
