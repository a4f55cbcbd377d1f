"""TableScan.to_reader(): a streaming RecordBatchReader that DuckDB and Polars query."""

from __future__ import annotations

import hashlib
import os

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.arrow_reader import split_tasks
from mvtable.errors import InvalidOptionError

from .conftest import orders


@pytest.fixture
def deleted_table(table_uri) -> Table:
    """Three segments of 4000 rows in row groups of 500; every 10th row deleted."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "500"})
    for start in (0, 4000, 8000):
        t.append(orders(start, 4000))
    t.delete(pc.field("status") == "cancelled")
    return t


def test_duckdb_queries_the_reader_with_deletes_applied(deleted_table: Table) -> None:
    reader = deleted_table.scan().to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    got = duckdb.sql("select count(*), sum(id), count(*) filter (where status = 'cancelled') from reader").fetchall()[0]
    expected = deleted_table.scan().to_arrow()
    assert got == (10_800, pc.sum(expected["id"]).as_py(), 0)


def test_polars_reads_the_reader(deleted_table: Table) -> None:
    frame = pl.from_arrow(deleted_table.scan(columns=["id", "price"], filter=pc.field("id") < 5000).to_reader())
    assert isinstance(frame, pl.DataFrame)
    expected = deleted_table.scan(columns=["id", "price"], filter=pc.field("id") < 5000).to_arrow()
    assert frame.columns == ["id", "price"]
    assert frame.sort("id").to_arrow().equals(expected.sort_by("id"))


def test_polars_and_duckdb_read_a_reader_of_no_rows(table_uri) -> None:
    t = Table.create(table_uri, schema=orders(0, 1).schema)
    frame = pl.from_arrow(t.scan().to_reader())  # polars refuses a stream without a batch
    assert frame.shape == (0, 3) and frame.columns == ["id", "status", "price"]
    t.append(orders(0, 10))
    t.delete(pc.field("id") >= 0)
    reader = t.scan().to_reader()
    assert reader.schema.names == ["id", "status", "price"]
    assert duckdb.sql("select count(*) from reader").fetchall() == [(0,)]


def test_reader_streams_in_bounded_pieces_and_releases_its_pin(deleted_table: Table) -> None:
    scan = deleted_table.scan()
    reader = scan.to_reader(chunk_rows=1000)
    pins = os.path.join(deleted_table.uri, "_mvtable", "pins")
    assert os.listdir(pins)  # the scan's pin holds the version while it streams
    sizes = [batch.num_rows for batch in reader]
    assert max(sizes) <= 1000 and sum(sizes) == 10_800
    assert not os.listdir(pins)


def test_older_version_through_the_reader(deleted_table: Table) -> None:
    con = duckdb.connect()
    con.register("old", deleted_table.scan(version=deleted_table.version - 1).to_reader())
    assert con.sql("select count(*) from old").fetchall()[0] == (12_000,)


def test_split_tasks_keeps_whole_row_groups_under_the_bound(deleted_table: Table) -> None:
    tasks = deleted_table.scan().plan.tasks
    pieces = list(split_tasks(tasks, chunk_rows=1200))
    assert [p.row_groups for p in pieces[:4]] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(p.dv == t.dv for t in tasks for p in pieces if p.segment is t.segment)
    assert sum(p.rows for p in pieces) == sum(t.rows for t in tasks)
    assert [p.row_groups for p in split_tasks(tasks[:1], chunk_rows=10)] == [(i,) for i in range(8)]  # a group stays whole


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_chunk_rows_is_typed(deleted_table: Table, bad) -> None:
    with pytest.raises(InvalidOptionError, match="chunk_rows"):
        deleted_table.scan().to_reader(chunk_rows=bad)


DICT_STRING = pa.dictionary(pa.int32(), pa.string())


def test_dictionary_strings_keep_low_cardinality_columns_as_dictionaries(deleted_table: Table) -> None:
    plain = deleted_table.scan().to_reader()
    reader = deleted_table.scan().to_reader(dictionary_strings=True)
    assert plain.schema.field("status").type == pa.string()
    assert reader.schema.field("status").type == DICT_STRING
    assert reader.schema.field("id").type == pa.int64()
    got = reader.read_all()
    assert got.schema == reader.schema
    assert got.cast(plain.schema).equals(plain.read_all())


def test_dictionary_strings_give_duckdb_the_same_answers(deleted_table: Table) -> None:
    query = "select status, count(*), sum(id), min(price) from {} where status <> 'x' group by 1 order by 1"
    con = duckdb.connect()
    con.register("plain", deleted_table.scan().to_reader())
    con.register("dict", deleted_table.scan(filter=pc.field("status") == "ok").to_reader(dictionary_strings=True))
    assert con.sql(query.format("dict")).fetchall() == con.sql(query.format("plain")).fetchall()


def _free_text(start: int, n: int) -> pa.Table:
    """Rows whose status is a long unique string: stored plain (its dictionary overflows)."""
    t = orders(start, n)
    return t.set_column(1, "status", pa.array([hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, start + n)]))


@pytest.mark.parametrize("first", ["dictionary", "plain"])
def test_dictionary_strings_over_segments_stored_both_ways(table_uri, first: str) -> None:
    """The schema comes from the first segment; pieces of a segment that stores the column
    the other way are converted, so every batch has the reader's schema and the rows are
    those of ``to_arrow``."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "2000"})
    parts = [orders(0, 4000), _free_text(4000, 4000)]
    for part in parts if first == "dictionary" else parts[::-1]:
        t.append(part)
    t.delete((pc.field("price") > 4500.0) & (pc.field("price") < 7500.0))  # rows of both segments
    reader = t.scan().to_reader(dictionary_strings=True, chunk_rows=2000)
    assert reader.schema.field("status").type == (DICT_STRING if first == "dictionary" else pa.string())
    batches = list(reader)
    assert all(b.schema == reader.schema for b in batches)
    expected = t.scan().to_arrow()
    got = pa.Table.from_batches(batches, schema=reader.schema)
    assert got.cast(expected.schema).equals(expected)


def test_dictionary_strings_must_be_a_bool(deleted_table: Table) -> None:
    with pytest.raises(InvalidOptionError, match="dictionary_strings"):
        deleted_table.scan().to_reader(dictionary_strings="yes")  # type: ignore[arg-type]


def test_duckdb_queries_the_reader_over_a_struct_inside_a_struct(table_uri) -> None:
    # the reader's batches are slices of the row groups it reads; DuckDB refuses a struct
    # below a struct at a non-zero offset, so such columns are handed out at offset 0
    inner = pa.struct([("z", pa.float64())])
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("st", pa.struct([("a", pa.int32()), ("inner", inner)]))])
    n = 1500
    t = Table.create(table_uri, schema=schema, properties={"rowGroupRows": "300"})
    t.append(
        pa.table(
            {
                "id": pa.array(range(n), pa.int64()),
                "s": [str(i) for i in range(n)],
                "st": [{"a": i, "inner": None if i % 4 == 0 else {"z": i / 2}} for i in range(n)],
            },
            schema=schema,
        )
    )
    reader = t.scan().to_reader()  # noqa: F841 (DuckDB finds it by name)
    assert duckdb.sql("SELECT count(*), sum(st.a), count(st.inner) FROM reader").fetchall() == [(n, n * (n - 1) // 2, n - n // 4)]
    assert t.scan().to_reader().read_all().equals(t.scan().to_arrow())


def test_the_reader_leaves_batches_of_a_schema_without_nested_structs_as_they_are(table_uri) -> None:
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("st", pa.struct([("a", pa.int32())]))])
    t = Table.create(table_uri, schema=schema, properties={"rowGroupRows": "300"})
    t.append(
        pa.table(
            {"id": pa.array(range(1500), pa.int64()), "s": [str(i) for i in range(1500)], "st": [{"a": i} for i in range(1500)]},
            schema=schema,
        )
    )
    offsets = [batch.column("st").offset for batch in t.scan().to_reader()]
    assert any(offsets)  # slices, not copies: nothing to re-materialise for DuckDB
