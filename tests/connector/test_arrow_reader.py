"""TableScan.to_reader(): a streaming RecordBatchReader that DuckDB and Polars query."""

from __future__ import annotations

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
