"""``read_native`` (Spark's Parquet reader + deletion bitmaps: the JVM mask, or the
expression mask's bitmaps inline in the plan or as a broadcast join), the balanced partitioning of the Python source, and ``delete()``'s column
projection."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, delete
from mvtable.connector.scan import plan_scan, split_tasks
from mvtable.connector.spark import native_jvm, native_mask, read_native
from mvtable.connector.spark.delete_where import condition_columns
from mvtable.connector.spark.native_mask import _MASKS, deletion_bitmap
from mvtable.errors import InvalidOptionError, MvTableError
from mvtable.visibility import pins
from tests.support.spark_session import spark_conf

from .conftest import orders


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*[c.to_pylist() for c in table.columns]))


@pytest.fixture(params=["jvm", "inline", "join"])
def mask_kind(request, monkeypatch) -> str:
    """Run a test with the JVM mask (``native_jvm``), then with the expression mask's
    bitmaps inline in the plan, then as a broadcast join."""
    if request.param != "jvm":
        monkeypatch.setenv(native_jvm.SWITCH, "off")
    if request.param == "join":
        monkeypatch.setattr(native_mask, "MAX_INLINE_FILES", 0)
    _MASKS.clear()
    yield request.param
    _MASKS.clear()


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture
def table(tmp_path) -> Table:
    """Three segments of 1000 rows (row groups of 300), 10% of the first two deleted."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"rowGroupRows": "300"})
    for start in (0, 1000, 2000):
        t.append(orders(start, 1000))
    assert t.delete((pc.field("id") < 2000) & (pc.field("status") == "cancelled")).deleted_rows == 200
    return t


# -- pure parts (no JVM) -------------------------------------------------------------------
def test_deletion_bitmap_sets_one_bit_per_position():
    words = deletion_bitmap(np.array([0, 63, 64, 129], dtype=np.uint64), 130)
    assert [int(w) & (2**64 - 1) for w in words] == [1 | 1 << 63, 1, 2]
    assert deletion_bitmap(np.array([], dtype=np.uint64), 1).tolist() == [0]
    with pytest.raises(MvTableError, match="row 5 of a 5-row segment"):
        deletion_bitmap(np.array([5], dtype=np.uint64), 5)


def test_split_tasks_balances_over_the_cores(table):
    tasks = plan_scan(table.snapshot()).tasks  # 3 segments x 4 row groups
    order = [(t.segment.id, g) for t in tasks for g in t.row_groups]
    for parallelism, max_bytes in [(1, 1 << 30), (2, 1 << 30), (3, 1 << 30), (5, 1 << 30), (2, 1), (64, 1 << 30)]:
        parts = split_tasks(tasks, max_bytes=max_bytes, parallelism=parallelism, open_cost=0)
        assert [(t.segment.id, g) for p in parts for t in p for g in t.row_groups] == order
        assert all(parts)
        sizes = [sum(t.bytes for t in p) for p in parts]
        if max_bytes == 1:
            assert len(parts) == len(order)  # one row group each
        else:
            assert len(parts) == min(parallelism, len(order))
            biggest_rg = max(t.segment.row_groups[g].total_byte_size for t in tasks for g in t.row_groups)
            assert max(sizes) - min(sizes) <= 2 * biggest_rg
    # Spark's open cost (4 MiB a file) keeps a small segment in one partition
    assert len(split_tasks(tasks[:1], max_bytes=128 << 20, parallelism=2)) == 1
    assert split_tasks([], max_bytes=1, parallelism=2) == []


def test_split_tasks_never_exceeds_max_bytes(table):
    tasks = plan_scan(table.snapshot()).tasks
    rg = max(t.segment.row_groups[g].total_byte_size for t in tasks for g in t.row_groups)
    for limit in (rg, 2 * rg, 3 * rg + 1):
        for p in split_tasks(tasks, max_bytes=limit, parallelism=1, open_cost=0):
            assert sum(t.bytes for t in p) <= limit
    # a segment cut in pieces keeps its deletion vector on every piece
    one = tasks[0]
    assert one.dv is not None
    pieces = split_tasks([one], max_bytes=2 * rg, parallelism=2, open_cost=0)
    assert len(pieces) >= 2 and all(t.dv == one.dv and t.segment == one.segment for p in pieces for t in p)


# -- Spark ---------------------------------------------------------------------------------
@pytest.mark.spark
def test_native_read_matches_the_data_source_and_hides_deleted_rows(spark, table, mask_kind):
    native = read_native(spark, table.uri)
    plan = plan_of(native)
    # jvm and inline: no join, no broadcast stage; the third segment (no deletes) is a plain scan
    assert ("BroadcastHashJoin" in plan) == (mask_kind == "join")
    assert "Union" in plan
    if mask_kind == "jvm":
        assert not _MASKS
        assert plan.count("FileScan parquet") == 1 and plan.count("FileScan mvtable-parquet") == 1
    else:
        [mask] = _MASKS.values()
        assert mask.inline == (mask_kind == "inline")
        assert plan.count("FileScan parquet") == 2
    assert native.columns == ["id", "status", "price"]
    got = rows(native)
    assert got == rows(spark.read.format("mvtable").load(table.uri))
    assert got == arrow_rows(table.to_arrow())
    assert len(got) == 2800
    assert not [r for r in got if r[0] < 2000 and r[1] == "cancelled"]
    assert len([r for r in got if r[1] == "cancelled"]) == 100  # the third segment keeps its own
    # filters and aggregates on top push into Spark's reader and still see the mask
    assert native.where("status = 'cancelled'").count() == 100
    assert native.where("id < 1000").count() == 900


@pytest.mark.spark
def test_the_querys_filter_runs_before_the_inline_mask(spark, table, monkeypatch):
    """The expression mask is a generator, not a filter: Spark pushes the query's filter
    below it, so the bitmaps are tested only on the rows the query keeps (a view's filter
    would be evaluated first, on every row read)."""
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    _MASKS.clear()
    df = read_native(spark, table.uri).where("id < 1000")
    plan = df._jdf.queryExecution().optimizedPlan().toString().splitlines()
    generate = next(i for i, line in enumerate(plan) if "Generate" in line and "element_at" in line)
    assert any("Filter" in line and "(id" in line and "< 1000" in line for line in plan[generate + 1 :])
    assert not any("Filter" in line and "element_at" in line for line in plan)
    assert df.count() == 900


@pytest.mark.spark
def test_native_read_time_travel_and_pin(spark, table):
    history = table.history()
    assert read_native(spark, table.uri, version=history[-2].version).count() == 3000  # before the delete
    assert read_native(spark, table.uri, version=history[1].version).count() == 1000
    ts = history[1].timestamp.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert read_native(spark, table.uri, timestamp=ts).count() == 1000
    assert {history[-2].version, history[1].version} <= {p.version for p in pins.live_pins(table.io)}
    with pytest.raises(MvTableError, match="VersionNotFound|version"):
        read_native(spark, table.uri, version=99)
    with pytest.raises(InvalidOptionError, match="at most one"):
        read_native(spark, table.uri, version=1, timestamp=ts)


@pytest.mark.spark
def test_native_read_projects_columns(spark, table):
    df = read_native(spark, table.uri, columns=["PRICE", "id"])
    assert df.columns == ["price", "id"]
    assert rows(df) == sorted((r[2], r[0]) for r in arrow_rows(table.to_arrow()))
    with pytest.raises(InvalidOptionError, match="unknown columns"):
        read_native(spark, table.uri, columns=["nope"])
    with pytest.raises(InvalidOptionError, match="names no column"):
        read_native(spark, table.uri, columns=[])


@pytest.mark.spark
def test_native_read_of_an_empty_table(spark, tmp_path):
    t = Table.create(str(tmp_path / "e"), schema=orders(0, 1).schema)
    df = read_native(spark, t.uri)
    assert df.columns == ["id", "status", "price"] and df.count() == 0
    assert read_native(spark, t.uri, columns=["status"]).collect() == []


@pytest.mark.spark
def test_columns_named_like_the_masks_own_are_kept(spark, tmp_path, mask_kind):
    schema = pa.schema([("id", pa.int64()), ("_MV_KEEP", pa.string()), ("_mv_Deleted", pa.int8())])
    t = Table.create(str(tmp_path / "k"), schema=schema)
    t.append(pa.table({"id": list(range(10)), "_MV_KEEP": [f"v{i}" for i in range(10)], "_mv_Deleted": [1] * 10}, schema))
    t.delete(pc.field("id") < 3)
    df = read_native(spark, t.uri)
    assert df.columns == ["id", "_MV_KEEP", "_mv_Deleted"]
    assert rows(df) == [(i, f"v{i}", 1) for i in range(3, 10)]


@pytest.mark.spark
def test_native_read_with_files_of_equal_size(spark, tmp_path, mask_kind):
    """Identical appends make byte-identical files: the join key must add the file name,
    or the deletes of one file would hide the same positions of the other."""
    t = Table.create(str(tmp_path / "twins"), schema=orders(0, 1).schema)
    t.append(orders(0, 500))
    t.append(orders(0, 500))
    sizes = {os.path.getsize(os.path.join(t.uri, s.file.path)) for s in t.snapshot().visible_segments()}
    assert len(sizes) == 1
    first = t.snapshot().visible_segments()[0]
    t.delete_rows({first.id: [0, 1, 2, 499]})
    got = rows(read_native(spark, t.uri))
    assert len(got) == 996
    assert got == arrow_rows(t.to_arrow())
    assert [r[0] for r in got].count(0) == 1 and [r[0] for r in got].count(3) == 2


@pytest.mark.spark
def test_native_read_of_split_files_keeps_row_positions(spark, table, mask_kind):
    """Spark splits a file between tasks by row group; each split still reports positions
    in the whole file, so the mask hides the same rows however the files are cut."""
    with spark_conf(spark, {"spark.sql.files.maxPartitionBytes": "2000", "spark.sql.files.openCostInBytes": "0"}):
        df = read_native(spark, table.uri)
        assert df.rdd.getNumPartitions() > 3
        assert rows(df) == arrow_rows(table.to_arrow())


@pytest.mark.spark
def test_min_partitions_raises_the_sessions_file_partitioning(spark, table):
    key = "spark.sql.files.minPartitionNum"
    with spark_conf(spark, {key: "1", "spark.sql.files.openCostInBytes": "0"}):
        few = read_native(spark, table.uri).rdd.getNumPartitions()
        df = read_native(spark, table.uri, min_partitions=8)
        assert spark.conf.get(key) == "8"
        assert df.rdd.getNumPartitions() > few
        assert rows(df) == arrow_rows(table.to_arrow())
        read_native(spark, table.uri, min_partitions=2)
        assert spark.conf.get(key) == "8"  # never lowered
        for bad in (0, -1, 2.5, True, "4"):
            with pytest.raises(InvalidOptionError, match="min_partitions must be a positive integer"):
                read_native(spark, table.uri, min_partitions=bad)


@pytest.mark.spark
def test_native_read_of_a_staged_push(spark, table):
    table.overwrite(orders(5000, 10), consistent_push=True, publish=False)
    entry = table.lineage()[-1]
    assert read_native(spark, table.uri).count() == 2800
    assert sorted(r.id for r in read_native(spark, table.uri, lineage_entry=entry.id).collect()) == list(range(5000, 5010))


@pytest.mark.spark
def test_native_read_after_spark_delete(spark, table):
    assert delete(spark, table.uri, "price > 4000") == 333  # ids 2667..2999
    assert rows(read_native(spark, table.uri)) == rows(spark.read.format("mvtable").load(table.uri))


@pytest.mark.spark
def test_delete_reads_only_the_condition_columns(spark, table):
    schema = spark.read.format("mvtable").load(table.uri).schema
    assert condition_columns(spark, schema, "STATUS = 'ok' AND id < 3") == ["id", "status"]
    assert condition_columns(spark, schema, "true") == []
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN|cannot be resolved"):
        delete(spark, table.uri, "nope = 1")
    version = table.version
    assert delete(spark, table.uri, "true AND id >= 2990") == 10
    assert delete(spark, table.uri, "false") == 0
    assert Table.open(table.uri).version == version + 1


def test_native_read_of_delta_encoded_columns(spark, tmp_path):
    """A large segment's plain integer-like columns are DELTA_BINARY_PACKED
    (``segment_encoding.delta_columns``): Spark's vectorized reader decodes them, decimals
    stored as INT64 and dates included, as the data source and Arrow do."""
    from decimal import Decimal

    n = 12_000  # a large segment (SMALL_SEGMENT_ROWS), first row group of 5000 rows as the sample
    ids = np.random.default_rng(3).permutation(n)
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "price": pa.array([Decimal(int(i) * 7) / 100 for i in ids], pa.decimal128(15, 2)),
            "day": pa.array(ids.astype("int32"), pa.int32()).cast(pa.date32()),
            "small": pa.array((ids % 50).astype("int32")),
        }
    )
    t = Table.create(str(tmp_path / "t"), schema=data.schema, properties={"rowGroupRows": "5000"})
    t.append(data)
    t.delete(pc.field("id") < 100)
    import pyarrow.parquet as pq

    seg = t.snapshot().visible_segments()[0]
    md = pq.ParquetFile(f"{t.uri}/{seg.file.path}").metadata
    delta = {
        md.row_group(0).column(j).path_in_schema for j in range(4) if "DELTA_BINARY_PACKED" in md.row_group(0).column(j).encodings
    }
    assert delta == {"id", "price", "day"}
    expected = arrow_rows(t.to_arrow())
    assert len(expected) == n - 100
    assert rows(read_native(spark, t.uri)) == expected
    assert rows(spark.read.format("mvtable").load(t.uri)) == expected
