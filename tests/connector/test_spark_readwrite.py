"""The Spark data source on a local[2] session: write modes, time travel, projection,
types, partitioning, option errors and filter pushdown; each read on both routes (``read_route``)."""

from __future__ import annotations

import datetime as dt
import os
import re

import pyarrow as pa
import pytest

from mvtable.connector import Table
from tests.support.spark_session import assert_route

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("read_route")]

WRITE_ONLY = pytest.mark.parametrize("read_route", ["native"], indirect=True)  # reads nothing: one route is enough
PYTHON_SOURCE_ONLY = pytest.mark.parametrize("read_route", ["python"], indirect=True)  # the Python source's own pushdown


def write(df, path, mode="append", **options):
    w = df.write.format("mvtable").mode(mode)
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


def read(spark, path, **options):
    r = spark.read.format("mvtable")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(path)


def test_append_overwrite_push_and_time_travel(spark, tmp_path, read_route):
    path = str(tmp_path / "t")
    write(spark.range(0, 100).selectExpr("id", "id * 2 AS v"), path)
    write(spark.range(100, 150).selectExpr("id", "id * 2 AS v"), path)
    assert_route(read(spark, path, versionAsOf=0), read_route)
    assert read(spark, path).count() == 150
    write(spark.range(0, 10).selectExpr("id", "id * 3 AS v"), path, "overwrite", consistentPush="true")
    assert sorted(r.v for r in read(spark, path).collect()) == [i * 3 for i in range(10)]
    # the first write created the table: version 0 holds its rows
    assert read(spark, path, versionAsOf=0).count() == 100
    assert read(spark, path, versionAsOf=1).count() == 150
    t = Table.open(path)
    [entry] = t.lineage()
    assert entry.state == "COMPLETED" and len(entry.segments_from) >= 2
    assert [h.operation for h in t.history()] == ["CREATE", "APPEND", "PUSH_START", "CONSISTENT_PUSH"]
    ts = t.history()[0].timestamp.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert read(spark, path, timestampAsOf=ts).count() == 100
    write(spark.range(0, 5).selectExpr("id", "id AS v"), path, "overwrite")
    assert read(spark, path).count() == 5
    assert [h.operation for h in t.history()][-1] == "OVERWRITE"


def test_columns_option_projects(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(5).selectExpr("id", "id * 1.5 AS price", "cast(id AS string) AS s"), path)
    df = read(spark, path, columns="s,id")
    assert df.columns == ["s", "id"]
    assert sorted(df.collect()) == sorted((str(i), i) for i in range(5))


def test_user_schema_projects(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(5).selectExpr("id", "double(id) * 1.5 AS price"), path)
    df = spark.read.format("mvtable").schema("price double").load(path)
    assert sorted(r.price for r in df.collect()) == [i * 1.5 for i in range(5)]


def test_every_parquet_type_round_trips(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(20).selectExpr(
        "id",
        "cast(id AS tinyint) AS b",
        "cast(id AS smallint) AS sh",
        "cast(id AS int) AS i",
        "cast(id AS float) AS f",
        "id * 1.5 AS d",
        "cast(id AS decimal(12, 3)) AS dec",
        "cast(id AS string) AS s",
        "cast(cast(id AS string) AS binary) AS bin",
        "id % 2 = 0 AS flag",
        "date_add(date'2026-01-01', cast(id AS int)) AS dt",
        "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, cast(id AS int)) AS ts",
        "cast(timestamp'2026-01-01 00:00:00' AS timestamp_ntz) AS ntz",
        "array(id, id + 1) AS arr",
        "map('k', id) AS m",
        "named_struct('a', id, 'b', array(cast(id AS string))) AS st",
        "if(id = 3, null, id) AS maybe",
    )
    write(df, path)
    back = read(spark, path)
    assert back.schema == df.schema
    assert sorted(back.collect()) == sorted(df.collect())


def test_partitions_follow_max_partition_bytes(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(0, 20000, numPartitions=1).selectExpr("id"), path, **{"property.rowGroupRows": "1000"})
    assert read(spark, path).rdd.getNumPartitions() == 1
    small = read(spark, path, maxPartitionBytes=1)
    assert small.rdd.getNumPartitions() == 20  # one row group each
    assert small.count() == 20000


@pytest.fixture(scope="module")
def three_rows(tmp_path_factory) -> str:
    """A table of ids 0..2 at version 0, written once through the Python API: the option
    tests below are about reading, and a Spark write each cost ~1-2 s."""
    path = str(tmp_path_factory.mktemp("three-rows") / "t")
    Table.create(path, schema=pa.schema([pa.field("id", pa.int64(), nullable=False)])).append(
        pa.table({"id": pa.array([0, 1, 2], pa.int64())})
    )
    return path


@pytest.mark.parametrize(
    "options,message",
    [
        ({"versionAsOf": 1, "timestampAsOf": "2026-01-01"}, "cannot be used together"),
        ({"versionAsOf": 42}, "VersionNotFoundError"),
        ({"versionAsOf": -1}, "versionAsOf"),
        ({"versionAsOf": "latest"}, "versionAsOf"),
        ({"timestampAsOf": "2000-01-01 00:00:00"}, "VersionNotFoundError"),
        ({"noSuchOption": "x"}, "unknown option"),
        ({"columns": "id,nope"}, "unknown columns"),
    ],
)
def test_bad_read_options_are_typed_errors(spark, three_rows, options, message):
    with pytest.raises(Exception, match=message):
        read(spark, three_rows, **options).collect()


def test_missing_table_is_typed(spark, tmp_path):
    with pytest.raises(Exception, match="TableNotFoundError"):
        read(spark, str(tmp_path / "none")).collect()


@WRITE_ONLY
def test_schema_mismatch_fails_before_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(3).selectExpr("id", "id AS v"), path)
    files = set(os.listdir(os.path.join(path, "data")))
    with pytest.raises(Exception, match=r"SchemaMismatchError.*missing columns \['v'\].*unexpected columns \['w'\]"):
        write(spark.range(3).selectExpr("id", "id AS w"), path)
    with pytest.raises(Exception, match=r"type mismatch in v \(table: int64, data: string\)"):
        write(spark.range(3).selectExpr("id", "cast(id AS string) AS v"), path)
    assert Table.open(path).version == 0  # nothing was committed
    assert set(os.listdir(os.path.join(path, "data"))) == files


def test_failed_consistent_push_is_reverted(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(0, 100, numPartitions=2).selectExpr("id"), path)
    files = set(os.listdir(os.path.join(path, "data")))
    failing = spark.range(0, 1000, numPartitions=4).selectExpr("if(id = 900, raise_error('boom'), id) AS id")
    with pytest.raises(Exception, match="boom"):
        write(failing, path, "overwrite", consistentPush="true")
    t = Table.open(path)
    [entry] = t.lineage()
    assert entry.state == "REVERTED"
    assert sorted(r.id for r in read(spark, path).collect()) == list(range(100))
    # abort() removed the segments of the tasks that reported back; a task Spark cancelled
    # mid-write may leave a partial file that no commit names: an orphan for vacuum
    data = os.path.join(path, "data")
    orphans = set(os.listdir(data)) - files
    named = {seg.file.path.split("/")[-1] for seg in t.snapshot().segments.values()}
    assert not orphans & named
    for name in orphans:
        os.utime(os.path.join(data, name), (0, 0))  # older than orphanGracePeriod
    assert t.vacuum().orphans == len(orphans)
    assert set(os.listdir(data)) == files


def test_staged_push_and_bad_combinations(spark, tmp_path):
    path = str(tmp_path / "t")
    write(spark.range(5), path)
    write(spark.range(100, 103), path, "overwrite", consistentPush="true", publish="false")
    assert read(spark, path).count() == 5
    entry = Table.open(path).lineage()[0]
    assert entry.state == "IN_PROGRESS"
    # write-audit-publish: the auditor reads the staged snapshot, then publishes it from SQL
    assert sorted(r.id for r in read(spark, path, lineageEntry=entry.id).collect()) == [100, 101, 102]
    from mvtable.connector import register

    register(spark, filter_pushdown=False)
    [row] = spark.sql(f"SELECT * FROM mvtable_publish(table => '{path}', entry => '{entry.id}')").collect()
    assert row.changed
    assert sorted(r.id for r in read(spark, path).collect()) == [100, 101, 102]
    with pytest.raises(Exception, match="consistentPush replaces"):
        write(spark.range(3), path, "append", consistentPush="true")


@PYTHON_SOURCE_ONLY
class TestPushdown:
    """The Python source's own filter pushdown: every DataFrame here reads through it."""

    @pytest.fixture
    def pushdown(self, spark):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        yield
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")

    @pytest.fixture
    def table(self, spark, tmp_path):
        path = str(tmp_path / "t")
        df = spark.range(0, 10000, numPartitions=1).selectExpr(
            "id",
            "if(id % 7 = 0, null, cast(id % 100 AS string)) AS s",
            "if(id = 5, double('NaN'), id / 10.0) AS f",
            "date_add(date'2026-01-01', cast(id / 100 AS int)) AS d",
            "cast(id % 50 AS decimal(15, 2)) AS x",
        )
        write(df, path, **{"property.rowGroupRows": "500"})
        return path

    QUERIES = [
        "id >= 9000",
        "id = 42",
        "id IN (1, 2, 9999)",
        "s = '42'",
        "s IS NULL",
        "s IS NOT NULL AND id < 50",
        "NOT (id = 3) AND id < 10",
        "f > 990",
        "f > 0.4 AND id < 10",  # NaN row (id = 5) is greater than everything in Spark
        "d >= date'2026-04-01' AND d < date'2026-05-01'",
        "s LIKE '4%' AND id < 100",
        "s LIKE '%2'",
        "s LIKE '%4%' AND id > 9000",
        "s <=> '42'",
        "s <=> NULL AND id < 100",
        "s >= '9' AND s LIKE '99%'",
        "x < 24",  # an integer literal against a decimal column
        "x IN (3, 4) AND id < 500",
        "x >= 24.5 AND x <=> 49",
    ]

    @pytest.mark.parametrize("where", QUERIES)
    def test_pushdown_gives_the_same_rows(self, spark, table, pushdown, where):
        with_push = sorted(map(repr, read(spark, table).where(where).collect()))  # repr: NaN != NaN
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        without = sorted(map(repr, read(spark, table).where(where).collect()))
        assert with_push == without
        assert len(without) > 0

    def test_row_groups_are_pruned(self, spark, table, pushdown):
        df = read(spark, table, maxPartitionBytes=1).where("id >= 9000")
        assert df.rdd.getNumPartitions() == 2  # 2 of 20 row groups can match
        assert df.count() == 1000

    def test_defaults_do_not_push(self, spark, table):
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
        assert read(spark, table, maxPartitionBytes=1).where("id >= 9000").rdd.getNumPartitions() == 20


@PYTHON_SOURCE_ONLY
@pytest.mark.parametrize("where", ["id = 42", "s LIKE '4%'", "s LIKE '%2' AND s <=> '42'", "id IN (1, 2) AND NOT (id = 2)"])
def test_filters_applied_exactly_are_claimed(spark, tmp_path, where):
    """Claimed filters are not evaluated again by Spark: no Filter node above the Python
    source's scan."""
    path = str(tmp_path / "t")
    write(spark.range(0, 100).selectExpr("id", "cast(id AS string) AS s"), path)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read(spark, path).where(where)
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert not re.search(r"\bFilter\b", plan), plan
        expected = spark.range(0, 100).selectExpr("id", "cast(id AS string) AS s").where(where)
        assert sorted(df.collect()) == sorted(expected.collect())
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


@WRITE_ONLY
def test_a_variant_column_is_refused_before_anything_is_written(spark, tmp_path):
    """Spark's variant would be stored as its physical struct of binaries and read back as that."""
    path = str(tmp_path / "t")
    with pytest.raises(Exception, match="holds Spark's variant type"):
        spark.sql("""SELECT 1 AS id, parse_json('{"a": 1}') AS v""").write.format("mvtable").mode("append").save(path)
    assert not os.path.exists(os.path.join(path, "_mvtable", "log")) or not os.listdir(os.path.join(path, "_mvtable", "log"))


@pytest.mark.parametrize("make", ["append", "overwrite"])
def test_a_table_without_rows_reads_as_empty(spark, tmp_path, make):
    """partitions() returns none; PySpark then reads one placeholder InputPartition(None)."""
    path = str(tmp_path / "t")
    if make == "overwrite":
        write(spark.range(3), path)
    write(spark.range(0), path, make)
    assert Table.open(path).version == (1 if make == "overwrite" else 0)
    assert read(spark, path).count() == 0
    assert read(spark, path).collect() == []


@pytest.fixture(scope="module")
def typed_table(tmp_path_factory) -> str:
    """Non-null bigint, date, binary and array<bigint> columns, one row each."""
    path = str(tmp_path_factory.mktemp("typed") / "t")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("d", pa.date32()),
            pa.field("b", pa.binary()),
            pa.field("arr", pa.list_(pa.field("item", pa.int64(), nullable=False))),
        ]
    )
    rows = {"id": [3000000001], "d": [dt.date(2026, 1, 2)], "b": [b"x"], "arr": [[1, 2]]}
    Table.create(path, schema=schema).append(pa.table(rows, schema=schema))
    return path


@pytest.mark.parametrize(
    "requested,column,have,asked",
    [
        ("id int", "id", "bigint", "int"),  # no widening or narrowing: the table's type only
        ("id string", "id", "bigint", "string"),
        ("id bigint, d timestamp", "d", "date", "timestamp"),
        ("b string", "b", "binary", "string"),
        ("arr array<int>", "arr", "array<bigint>", "array<int>"),
    ],
)
def test_a_user_schema_of_other_types_is_refused_before_reading(spark, typed_table, requested, column, have, asked):
    df = spark.read.format("mvtable").schema(requested).load(typed_table)
    with pytest.raises(
        Exception,
        match=rf"SchemaMismatchError: \[MVTABLE_SCHEMA_MISMATCH\] column '{column}' is {re.escape(have)} in the table.*asks for {re.escape(asked)}",
    ):
        df.collect()


def test_a_user_schema_may_differ_in_nullability_only(spark, typed_table):
    # the table's id and array elements are non-null; the schema given makes them nullable
    df = spark.read.format("mvtable").schema("arr array<bigint>, id bigint").load(typed_table)
    assert [r.asDict() for r in df.collect()] == [{"arr": [1, 2], "id": 3000000001}]


def test_timestamps_past_year_9999_are_refused(spark, three_rows):
    with pytest.raises(
        Exception, match=r"InvalidOptionError: \[MVTABLE_INVALID_OPTION\] timestampAsOf: .* outside years 1 to 9999"
    ):
        read(spark, three_rows, timestampAsOf="99999999999999999999").collect()


def test_several_paths_are_refused(spark, three_rows):
    with pytest.raises(
        Exception, match="InvalidOptionError: \\[MVTABLE_INVALID_OPTION\\] mvtable reads one table per read; give the path once"
    ):
        spark.read.format("mvtable").load([three_rows, three_rows]).collect()


@WRITE_ONLY
def test_delete_options_on_an_append_are_refused(spark, tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(
        Exception,
        match="InvalidOptionError: \\[MVTABLE_INVALID_OPTION\\] tag apply to operation=delete only, not operation=write",
    ):
        write(spark.range(3), path, tag="nightly")
    assert not os.path.exists(path)  # refused before the table was created


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE {name} USING mvtable LOCATION '{path}'",
        "CREATE TABLE {name} USING mvtable OPTIONS (path '{path}')",
        "CREATE TABLE {name} USING mvtable LOCATION '{new}' AS SELECT 1 AS id",
    ],
)
def test_catalog_tables_point_to_temporary_views(spark, three_rows, tmp_path, sql):
    name = f"catalog_{abs(hash(sql))}"
    try:
        with pytest.raises(Exception, match=r"InvalidOptionError: .*catalog tables are not supported.*CREATE TEMPORARY VIEW"):
            spark.sql(sql.format(name=name, path=three_rows, new=tmp_path / "new")).collect()
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
