"""Primary keys through the Python API: creation, duplicate-free appends, upsert, delete by
key, bad input, the key index beside each segment, time travel and rollback."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.describe import inspect_table
from mvtable.connector.key_index import INDEX_SUFFIX, forget_filters, index_cached, read_index
from mvtable.connector.keys.commit import keyed_rows, lookup
from mvtable.errors import (
    DuplicateKeyError,
    InvalidOptionError,
    KeyColumnMissingError,
    KeyTypeMismatchError,
    NonKeyColumnError,
    NoPrimaryKeyError,
    NullKeyError,
    SchemaMismatchError,
    UnsupportedKeyTypeError,
)
from tests.connector.test_cli import run as run_cli

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("price", pa.float64())])


def rows(ids, tag: str = "v1") -> pa.Table:
    ids = list(ids)
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": [f"{tag}-{i}" for i in ids], "price": [float(i) for i in ids]}, schema=SCHEMA
    )


@pytest.fixture
def keyed(table_uri) -> Table:
    t = Table.create(table_uri, schema=SCHEMA, primary_key=["id"], properties={"rowGroupRows": "100"})
    t.append(rows(range(0, 1000)))
    t.append(rows(range(1000, 2000)))
    return t


def data_files(t: Table) -> list[str]:
    return sorted(os.listdir(os.path.join(t.uri, "data")))


def by_id(t: Table, **kw) -> dict[int, str]:
    return {r["id"]: r["name"] for r in t.to_arrow(**kw).to_pylist()}


def test_the_key_is_table_metadata(keyed: Table) -> None:
    assert keyed.primary_key == ("id",)
    assert Table.open(keyed.uri).snapshot().primary_key == ("id",)
    assert inspect_table(keyed.commit_log, keyed.snapshot())["primary_key"] == ["id"]
    shown = run_cli("inspect", keyed.uri)
    assert shown.returncode == 0 and "primary key: id" in shown.stdout, shown.stderr


def test_append_refuses_keys_that_exist_or_repeat(keyed: Table) -> None:
    before = (keyed.version, data_files(keyed))
    with pytest.raises(DuplicateKeyError, match="already in the table") as exc:
        keyed.append(rows([5000, *range(10, 30)]))
    assert len(exc.value.keys) == 10 and set(exc.value.keys) <= {(i,) for i in range(10, 30)}
    assert "(+10 more)" in str(exc.value)
    with pytest.raises(DuplicateKeyError, match="more than once") as exc:
        keyed.append(rows([7000, 7001, 7000]))
    assert exc.value.keys == [(7000,)]
    assert (keyed.version, data_files(keyed)) == before  # nothing written, nothing committed
    keyed.append(rows([7000, 7001]))
    assert keyed.scan(filter=pc.field("id") >= 7000).count() == 2


def test_upsert_replaces_and_inserts_in_one_commit(keyed: Table) -> None:
    v = keyed.version
    result = keyed.upsert(rows([5, 1500, 2500, 2501], tag="v2"))
    assert (result.inserted_rows, result.updated_rows, result.version) == (2, 2, v + 1)
    now = by_id(keyed)
    assert now[5] == "v2-5" and now[1500] == "v2-1500" and now[2500] == "v2-2500" and now[6] == "v1-6"
    assert keyed.to_arrow().num_rows == 2002  # no key twice
    last = keyed.history()[-1]
    assert last.operation == "UPSERT" and last.metrics["inserted_rows"] == 2 and last.metrics["updated_rows"] == 2
    assert last.parameters["primary_key"] == ["id"]
    assert by_id(keyed, version=v)[5] == "v1-5"  # time travel reads the old row
    keyed.restore(version=v)
    assert by_id(keyed) == by_id(keyed, version=v)


def test_delete_by_key(keyed: Table) -> None:
    assert keyed.delete(keys=[3, 4, 1999, 123456]).deleted_rows == 3
    assert keyed.to_arrow().num_rows == 1997
    assert not {3, 4, 1999} & set(by_id(keyed))
    assert keyed.delete(keys=[3]).deleted_rows == 0  # already gone: no commit
    assert keyed.history()[-1].operation == "DELETE_BY_KEY"
    with pytest.raises(InvalidOptionError, match="exactly one"):
        keyed.delete(pc.field("id") == 1, keys=[1])


def test_composite_string_keys(table_uri) -> None:
    schema = pa.schema([("region", pa.string()), ("n", pa.int32()), ("v", pa.int64())])
    t = Table.create(table_uri, schema=schema, primary_key=["region", "n"])
    t.append(pa.table({"region": ["eu", "eu", "us"], "n": pa.array([1, 2, 1], pa.int32()), "v": [1, 2, 3]}))
    t.append(pa.table({"region": ["us"], "n": pa.array([2], pa.int32()), "v": [4]}))  # (us, 2) is new
    with pytest.raises(DuplicateKeyError) as exc:
        t.append(pa.table({"region": ["eu"], "n": pa.array([2], pa.int32()), "v": [9]}))
    assert exc.value.keys == [("eu", 2)]
    r = t.upsert(pa.table({"region": ["eu", "ap"], "n": pa.array([2, 2], pa.int32()), "v": [20, 30]}))
    assert (r.inserted_rows, r.updated_rows) == (1, 1)
    assert t.delete(keys={"region": ["us"], "n": pa.array([1], pa.int32())}).deleted_rows == 1
    got = sorted((r["region"], r["n"], r["v"]) for r in t.to_arrow().to_pylist())
    assert got == [("ap", 2, 30), ("eu", 1, 1), ("eu", 2, 20), ("us", 2, 4)]


def test_bad_keys_are_typed_errors_before_anything_is_written(keyed: Table, table_uri, tmp_path) -> None:
    before = (keyed.version, data_files(keyed))
    with pytest.raises(NullKeyError, match="'id' is null"):
        keyed.append(pa.table({"id": pa.array([1, None], pa.int64()), "name": ["a", "b"], "price": [1.0, 2.0]}))
    with pytest.raises(KeyColumnMissingError, match="'id'"):
        keyed.delete(keys={"name": ["x"]})
    with pytest.raises(KeyTypeMismatchError, match="'id' is string"):
        keyed.upsert(pa.table({"id": ["1"], "name": ["a"], "price": [1.0]}))
    with pytest.raises(KeyTypeMismatchError, match="does not fit"):
        keyed.delete(keys=pa.table({"id": pa.array([2**64 - 1], pa.uint64())}))  # no int64 holds it
    assert (keyed.version, data_files(keyed)) == before
    with pytest.raises(UnsupportedKeyTypeError, match="'price' of type double"):
        Table.create(str(tmp_path / "f"), schema=SCHEMA, primary_key=["price"])
    with pytest.raises(KeyColumnMissingError, match="'nope'"):
        Table.create(str(tmp_path / "g"), schema=SCHEMA, primary_key=["nope"])
    assert not os.path.exists(tmp_path / "f") or not os.listdir(tmp_path / "f")


def test_delete_by_key_refuses_keys_it_would_misread(keyed: Table, table_uri, tmp_path) -> None:
    before = (keyed.version, keyed.scan().count())
    with pytest.raises(NonKeyColumnError, match=r"\['name'\], which are not part of the primary key \['id'\]"):
        keyed.delete(keys={"id": [2], "name": ["NOT v1-2"]})  # once: id 2 deleted, name ignored
    with pytest.raises(NonKeyColumnError, match="'price'"):
        keyed.delete(keys=rows([2]).select(["id", "price"]))
    with pytest.raises(NullKeyError, match="'id' is null"):
        keyed.delete(keys=[None])
    with pytest.raises(NullKeyError, match="'id' is null"):
        keyed.delete(keys={"id": [1, None]})
    assert keyed.delete(keys=[]).deleted_rows == 0
    assert keyed.delete(keys={"id": []}).deleted_rows == 0
    assert (keyed.version, keyed.scan().count()) == before

    c = Table.create(str(tmp_path / "c"), schema=pa.schema([("a", pa.int64()), ("b", pa.string())]), primary_key=["a", "b"])
    c.append(pa.table({"a": [1, 2], "b": ["x", "y"]}))
    with pytest.raises(InvalidOptionError, match=r"different lengths \('a': 2, 'b': 1\)"):
        c.delete(keys={"a": [1, 2], "b": ["x"]})
    with pytest.raises(InvalidOptionError, match="column 'b' must be a list or array of values, not str"):
        c.delete(keys={"a": [1], "b": "x"})
    with pytest.raises(InvalidOptionError, match="do not make an Arrow table"):
        c.delete(keys={"a": [1, "x"], "b": ["x", "y"]})
    assert c.delete(keys={"a": [2], "b": ["y"]}).deleted_rows == 1


def test_keyless_tables_refuse_upsert_and_delete_by_key_and_pay_nothing(small_table: Table) -> None:
    with pytest.raises(NoPrimaryKeyError, match="has none"):
        small_table.upsert(rows([1]).select(["id"]))
    with pytest.raises(NoPrimaryKeyError):
        small_table.delete(keys=[1])
    assert not any(f.endswith(INDEX_SUFFIX) for f in data_files(small_table))
    assert not any(
        a.kind == "inserted_keys" for v in range(small_table.version + 1) for a in small_table.commit_log.read_commit(v).actions
    )
    with pytest.raises(InvalidOptionError, match="only be set when the table is created"):
        from mvtable.connector import writes

        writes.begin_write(small_table.uri, storage_options=None, incoming=small_table.schema, mode="append", primary_key=["id"])


def test_each_segment_has_an_index_and_lookups_read_candidate_row_groups_only(keyed: Table) -> None:
    files = data_files(keyed)
    segments = [f for f in files if f.endswith(".parquet")]
    assert sorted(f.replace(".parquet", INDEX_SUFFIX) for f in segments) == sorted(f for f in files if f.endswith(INDEX_SUFFIX))
    snap = keyed.snapshot()
    schema = keyed.schema
    one = lookup(keyed.io, snap, keyed_rows(schema, ("id",), rows([1234])))
    assert one.rows == 1 and one.row_groups_read == 1  # 20 row groups of 100 rows; min/max picks one
    absent = lookup(keyed.io, snap, keyed_rows(schema, ("id",), rows([99_999, -5])))
    assert absent.rows == 0 and absent.row_groups_read == 0


def test_key_filters_are_read_once_per_process(keyed: Table) -> None:
    """A segment's filter never changes, so a process keeps the ones it read: a writer
    appending again does not read ~4 bytes per row of the table again."""
    path = keyed.snapshot().visible_segments()[0].file.path
    first = read_index(keyed.io, path)
    assert first is not None and index_cached(keyed.io, path)
    assert read_index(keyed.io, path) is first
    other = Table.create(keyed.uri + "-other", schema=SCHEMA, primary_key=["id"])
    other.append(rows([1]))
    assert not index_cached(other.io, path)  # keyed by table location too
    forget_filters()
    assert not index_cached(keyed.io, path) and read_index(keyed.io, path) is not first


def test_the_index_of_a_segment_goes_with_it(keyed: Table) -> None:
    keyed.overwrite(rows(range(5)))
    keyed.vacuum(retention="0s", force=True)
    files = data_files(keyed)
    assert len(files) == 2 and {f.split(".", 1)[1] for f in files} == {"parquet", INDEX_SUFFIX[1:]}
    assert keyed.upsert(rows([4, 5], tag="v3")).updated_rows == 1


def test_overwrite_checks_only_the_pushed_data(keyed: Table) -> None:
    with pytest.raises(DuplicateKeyError, match="more than once"):
        keyed.overwrite(rows([1, 1]), consistent_push=True)
    assert keyed.lineage()[-1].state == "REVERTED"  # the failed push was rolled back
    keyed.overwrite(rows([1, 2, 3]), consistent_push=True)  # keys the old snapshot had are fine
    assert sorted(by_id(keyed)) == [1, 2, 3]


def test_date_timestamp_and_decimal_keys(table_uri) -> None:
    import datetime as dt
    from decimal import Decimal

    schema = pa.schema(
        [("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC")), ("amount", pa.decimal128(10, 2)), ("v", pa.int64())]
    )
    t = Table.create(table_uri, schema=schema, primary_key=["day", "at", "amount"], properties={"rowGroupRows": "2"})
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def batch(days, v):
        return pa.table(
            {
                "day": [dt.date(2026, 1, d) for d in days],
                "at": [base + dt.timedelta(hours=d) for d in days],
                "amount": [Decimal(d) / 4 for d in days],
                "v": [v] * len(days),
            },
            schema=schema,
        )

    t.append(batch([1, 2, 3, 4, 5], 1))
    with pytest.raises(DuplicateKeyError):
        t.append(batch([5, 6], 2))
    assert (
        t.upsert(batch([4, 9], 3)).updated_rows,
        t.delete(keys=batch([1], 0).select(["day", "at", "amount"])).deleted_rows,
    ) == (1, 1)
    assert sorted((r["day"].day, r["v"]) for r in t.to_arrow().to_pylist()) == [(2, 1), (3, 1), (4, 3), (5, 1), (9, 3)]


def test_key_columns_match_in_any_case_like_every_column(tmp_path) -> None:
    schema = pa.schema([("Order Id", pa.int64()), ("v", pa.string())])
    t = Table.create(str(tmp_path / "t"), schema=schema, primary_key=["order ID"])
    assert t.primary_key == ("Order Id",)  # the schema's spelling: the segments' and indexes' names
    t.append(pa.table({"order id": pa.array([1, 2], pa.int64()), "V": ["a", "b"]}))
    with pytest.raises(DuplicateKeyError, match="already in the table"):
        t.append(pa.table({"ORDER ID": pa.array([2], pa.int64()), "v": ["dup"]}))
    assert t.upsert(pa.table({"ORDER ID": pa.array([2, 3], pa.int64()), "v": ["B", "c"]})).updated_rows == 1
    assert t.delete(keys={"order id": [1]}).deleted_rows == 1
    assert t.delete(keys=pa.table({"ORDER id": pa.array([9], pa.int64())})).deleted_rows == 0
    t.overwrite(pa.table({"order id": pa.array([3, 4], pa.int64()), "v": ["c", "d"]}))
    assert sorted(r["Order Id"] for r in t.to_arrow().to_pylist()) == [3, 4]
    with pytest.raises(InvalidOptionError, match="names a column twice"):
        Table.create(str(tmp_path / "u"), schema=schema, primary_key=["Order Id", "order id"])
    with pytest.raises(SchemaMismatchError, match=r"\['order id', 'ORDER ID'\] differ only in case"):
        t.delete(keys=pa.table({"order id": [3], "ORDER ID": [4]}))  # which one is the key would be a guess
