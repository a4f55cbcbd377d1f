"""The Python Table API: create/open, append, overwrite, consistent push, scan, history."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.errors import (
    InvalidOptionError,
    SchemaMismatchError,
    SettingsError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from mvtable.lineage import LineageState

from .conftest import orders


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_open_missing_table_is_typed(tmp_path):
    with pytest.raises(TableNotFoundError, match="no mvtable table"):
        Table.open(str(tmp_path / "nothing"))


def test_create_twice(table_uri):
    Table.create(table_uri, schema=orders(0, 1).schema)
    with pytest.raises(TableAlreadyExistsError):
        Table.create(table_uri, schema=orders(0, 1).schema)
    assert Table.create(table_uri, schema=orders(0, 1).schema, exist_ok=True).version == 0


def test_append_and_read_back(small_table):
    assert small_table.version == 2
    out = small_table.scan().to_arrow()
    assert ids(out) == list(range(2000))
    assert out.schema.names == ["id", "status", "price"]


def test_row_groups_follow_property(small_table):
    seg = small_table.snapshot().visible_segments()[0].file
    assert len(seg.row_groups) == 10
    assert [rg.first_row for rg in seg.row_groups] == list(range(0, 1000, 100))
    assert seg.row_groups[3].stats["id"].min == 300 and seg.row_groups[3].stats["id"].max == 399


def test_projection_and_filter(small_table):
    out = small_table.scan(columns=["price"], filter=pc.field("id") >= 1995).to_arrow()
    assert out.schema.names == ["price"]
    assert sorted(out.column("price").to_pylist()) == [i * 1.5 for i in range(1995, 2000)]


def test_unknown_column_is_typed(small_table):
    with pytest.raises(InvalidOptionError, match="unknown columns"):
        small_table.scan(columns=["nope"])


def test_time_travel_by_version_and_timestamp(small_table):
    assert small_table.scan(version=1).count() == 1000
    assert small_table.scan(version=0).count() == 0
    ts = small_table.history()[1].timestamp
    assert small_table.scan(timestamp=ts).count() == 1000
    assert small_table.scan(timestamp=ts.strftime("%Y-%m-%d %H:%M:%S.%f")).count() == 1000
    with pytest.raises(VersionNotFoundError):
        small_table.scan(version=99)
    with pytest.raises(VersionNotFoundError):
        small_table.scan(timestamp=dt.datetime(2000, 1, 1))
    with pytest.raises(InvalidOptionError):
        small_table.scan(version=1, timestamp=ts)
    with pytest.raises(InvalidOptionError):
        small_table.scan(timestamp="yesterday-ish")


def test_overwrite_replaces_atomically_without_entry(small_table):
    small_table.overwrite(orders(5000, 10))
    assert ids(small_table.to_arrow()) == list(range(5000, 5010))
    assert small_table.lineage() == []
    assert small_table.scan(version=2).count() == 2000


def test_consistent_push_records_completed_entry(small_table):
    before = set(small_table.snapshot().visible_segment_ids())
    small_table.overwrite(orders(7000, 5), consistent_push=True)
    [entry] = small_table.lineage()
    assert entry.state == LineageState.COMPLETED
    assert set(entry.segments_from) == before
    assert len(entry.segments_to) == 1
    assert ids(small_table.to_arrow()) == list(range(7000, 7005))
    ops = [h.operation for h in small_table.history()]
    assert ops[-2:] == ["PUSH_START", "CONSISTENT_PUSH"]


def test_staged_push_stays_invisible(small_table):
    small_table.overwrite(orders(7000, 5), consistent_push=True, publish=False)
    [entry] = small_table.lineage()
    assert entry.state == LineageState.IN_PROGRESS
    assert small_table.scan().count() == 2000


def test_failed_push_is_reverted_and_files_removed(small_table, monkeypatch):
    from mvtable.connector import writes

    real_finish = writes.finish_write

    def boom(plan, segments, **_):
        raise RuntimeError("executor lost")

    monkeypatch.setattr(writes, "finish_write", boom)
    data_dir = os.path.join(small_table.uri, "data")
    files_before = set(os.listdir(data_dir))
    with pytest.raises(RuntimeError, match="executor lost"):
        small_table.overwrite(orders(7000, 5), consistent_push=True)
    monkeypatch.setattr(writes, "finish_write", real_finish)
    [entry] = small_table.lineage()
    assert entry.state == LineageState.REVERTED
    assert set(os.listdir(data_dir)) == files_before
    assert ids(small_table.to_arrow()) == list(range(2000))


def test_schema_mismatch_names_columns(small_table):
    bad = pa.table({"id": pa.array([1], pa.int64()), "status": pa.array([1], pa.int32()), "extra": [1]})
    with pytest.raises(SchemaMismatchError) as err:
        small_table.append(bad)
    text = str(err.value)
    assert "price" in text and "extra" in text and "status (table: string, data: int32)" in text
    assert small_table.version == 2


def test_data_without_columns_is_told_which_columns_are_missing(small_table):
    before = small_table.version
    with pytest.raises(SchemaMismatchError, match=r"missing columns \['id'"):
        small_table.append(pa.table({}))
    assert Table.open(small_table.uri).version == before


def test_columns_in_another_order_are_aligned(small_table):
    shuffled = orders(3000, 3).select(["price", "id", "status"])
    small_table.append(shuffled)
    out = small_table.scan(filter=pc.field("id") >= 3000).to_arrow()
    assert out.schema.names == ["id", "status", "price"]
    assert out.column("price").to_pylist() == [4500.0, 4501.5, 4503.0]


def test_first_write_creates_the_table(table_uri):
    t = Table(table_uri)
    t.append(orders(0, 3))
    assert Table.open(table_uri).scan().count() == 3
    assert [h.operation for h in t.history()] == ["CREATE"]


@pytest.mark.parametrize("name", ["_mv_row", "_MV_SEGMENT"])
def test_column_names_mvtable_adds_to_rows_are_refused_at_create(table_uri, name):
    schema = pa.schema([("id", pa.int64()), (name, pa.int64())])
    with pytest.raises(SchemaMismatchError, match=f"'{name}' \\(used by"):
        Table.create(table_uri, schema=schema)
    with pytest.raises(SchemaMismatchError, match="reserved"):  # the first write creates the table the same way
        Table(table_uri).append(pa.table({"id": [1], name: [2]}))
    with pytest.raises(TableNotFoundError):
        Table.open(table_uri)


def test_reserved_column_names_are_the_ones_the_readers_add():
    from mvtable.connector.schema import RESERVED_COLUMNS
    from mvtable.connector.segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT

    assert {ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT} == set(RESERVED_COLUMNS)


def test_a_table_that_stores_a_change_feed_is_created_but_its_own_change_feed_is_refused(table_uri):
    feed = pa.table({"id": [1], "_change_type": ["insert"], "_commit_version": [3]})
    t = Table.create(table_uri, schema=feed.schema)
    t.append(feed)
    assert t.to_arrow().column("_change_type").to_pylist() == ["insert"]
    with pytest.raises(SchemaMismatchError, match="change feed adds itself"):
        t.changes(0)


def test_bad_properties_are_typed(table_uri):
    with pytest.raises(InvalidOptionError, match="rowGroupRows"):
        Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "many"})
    with pytest.raises(InvalidOptionError, match="unknown table properties"):
        Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupSize": "1"})


def test_history_is_oldest_first_with_metrics(small_table):
    h = small_table.history()
    assert [x.version for x in h] == [0, 1, 2]
    assert h[1].metrics["added_rows"] == 1000
    assert h[0].timestamp <= h[1].timestamp <= h[2].timestamp


def test_memory_filesystem_table():
    uri = f"memory://mvtable-test/{os.getpid()}-{id(object())}"
    t = Table.create(uri, schema=orders(0, 1).schema)
    t.append(orders(0, 10))
    t.overwrite(orders(10, 5), consistent_push=True)
    assert ids(Table.open(uri).to_arrow()) == list(range(10, 15))


def test_all_parquet_types_round_trip(table_uri):
    import decimal

    data = pa.table(
        {
            "b": pa.array([True, None]),
            "i8": pa.array([1, None], pa.int8()),
            "i16": pa.array([1, None], pa.int16()),
            "i32": pa.array([1, None], pa.int32()),
            "f32": pa.array([1.5, None], pa.float32()),
            "dec": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(10, 2)),
            "s": pa.array(["x", None]),
            "bin": pa.array([b"\x00\x01", None]),
            "d": pa.array([dt.date(2026, 1, 2), None]),
            "ts": pa.array([dt.datetime(2026, 1, 2, 3, 4, 5), None], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([dt.datetime(2026, 1, 2, 3, 4, 5), None], pa.timestamp("us")),
            "arr": pa.array([[1, 2], None], pa.list_(pa.int64())),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "st": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])),
        }
    )
    t = Table.create(table_uri, schema=data.schema)
    t.append(data)
    out = t.to_arrow()
    assert out.to_pylist() == data.to_pylist()


def test_unsigned_types_are_refused_with_advice(table_uri):
    from mvtable.errors import UnsupportedTypeError

    with pytest.raises(UnsupportedTypeError, match="uint32"):
        Table.create(table_uri, schema=pa.schema([("x", pa.uint32())]))


def test_public_methods_take_typed_keyword_options_not_kwargs():
    """No ``**options`` on the façade: a misspelt option is a TypeError at the call, not
    silently forwarded (or dropped) several layers down."""
    import inspect

    for name, method in inspect.getmembers(Table, inspect.isfunction):
        if name.startswith("_"):
            continue
        kinds = {p.kind for p in inspect.signature(method).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, f"Table.{name} takes **kwargs"
    for name in ("collect_garbage", "vacuum", "to_arrow", "scan"):
        params = list(inspect.signature(getattr(Table, name)).parameters.values())[1:]
        assert params and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), name


def test_misspelt_maintenance_option_is_a_type_error(small_table):
    with pytest.raises(TypeError, match="time_budget"):
        small_table.collect_garbage(time_budget=1.0)
    with pytest.raises(TypeError, match="dryrun"):
        small_table.vacuum(dryrun=True)
    report = small_table.collect_garbage(dry_run=True, time_budget_s=60.0, batch_bytes=1024)
    assert report.dry_run


# -- every bad argument is a typed error naming it ----------------------------------------
@pytest.mark.parametrize("schema", [None, {"id": "int64"}])
def test_create_needs_an_arrow_schema(table_uri, schema):
    with pytest.raises(InvalidOptionError, match="schema must be a pyarrow.Schema"):
        Table.create(table_uri, schema=schema)
    assert not os.path.exists(table_uri)


def test_a_location_that_cannot_hold_a_table_is_named(tmp_path, monkeypatch):
    from mvtable.errors import StorageLocationError

    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a table")
    for call in (Table.open, lambda uri: Table.create(uri, schema=orders(0, 1).schema)):
        with pytest.raises(StorageLocationError, match="notes.txt is a file, not a table directory"):
            call(str(a_file))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageLocationError, match="the table path is empty"):
        Table.create("", schema=orders(0, 1).schema)
    assert not os.path.exists(tmp_path / "_mvtable")  # not silently created in the current folder
    if os.path.isdir("/proc/self"):
        with pytest.raises(StorageLocationError, match="cannot create the table folder /proc/xx"):
            Table.create("/proc/xx", schema=orders(0, 1).schema)


def test_properties_from_python_values(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": 100, "autoCompact": False})
    assert t.snapshot().properties == {"rowGroupRows": "100", "autoCompact": "false"}
    with pytest.raises(SettingsError, match="properties must be a mapping"):
        Table.create(table_uri + "2", schema=orders(0, 1).schema, properties=[("a", "b")])  # type: ignore[arg-type]


def test_write_flags_must_be_bools(small_table):
    version = small_table.version
    with pytest.raises(InvalidOptionError, match="consistent_push must be True or False"):
        small_table.overwrite(orders(0, 10), consistent_push="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="exist_ok must be True or False"):
        Table.create(small_table.uri, schema=orders(0, 1).schema, exist_ok="yes")  # type: ignore[arg-type]
    assert small_table.version == version and not small_table.lineage()


@pytest.mark.parametrize("timestamp", [float("nan"), float("inf")])
def test_a_timestamp_that_is_not_finite_is_typed(small_table, timestamp):
    with pytest.raises(InvalidOptionError, match="timestampAsOf: .* is not a timestamp"):
        small_table.to_arrow(timestamp=timestamp)


def test_numpy_integers_are_versions_but_bools_and_floats_are_not(small_table):
    import numpy as np

    assert small_table.to_arrow(version=np.int64(1)).num_rows == 1000
    assert small_table.snapshot(np.int32(2)).version == 2
    for bad in (True, 1.0, np.float64(1)):
        with pytest.raises(InvalidOptionError, match="version must be a version number"):
            small_table.to_arrow(version=bad)
    assert small_table.restore(version=np.int64(1)).version == 3


def test_columns_must_be_a_list_not_a_string(small_table):
    with pytest.raises(InvalidOptionError, match="columns must be a list of names"):
        small_table.scan(columns="id")
    with pytest.raises(InvalidOptionError, match="columns must be a list of names"):
        small_table.changes(0, columns="id")
    assert small_table.to_arrow(columns=("id",)).column_names == ["id"]
