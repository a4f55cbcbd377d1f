"""TableScan.to_duckdb(): DuckDB reads the segment files itself, deletes applied by a
positional join with keep flags; it must return exactly the rows of ``to_arrow``."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.stats import Predicate
from mvtable.errors import InvalidOptionError

from .conftest import orders


@pytest.fixture
def table(table_uri) -> Table:
    """Three segments of 3000 rows in row groups of 256; deletes in two of them, one of
    which empties a whole row group; the third segment has no deletes."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "256"})
    for start in (0, 3000, 6000):
        t.append(orders(start, 3000))
    t.delete((pc.field("id") < 6000) & (pc.field("status") == "cancelled"))
    t.delete((pc.field("id") >= 256) & (pc.field("id") < 512))
    t.delete(pc.field("id") == 4001)
    return t


def test_duckdb_relation_has_exactly_the_visible_rows(table: Table) -> None:
    con = duckdb.connect()
    scan = table.scan()
    got = pa.table(scan.to_duckdb(con).arrow()).sort_by("id")
    expected = table.scan().to_arrow().sort_by("id")
    assert got.num_rows == expected.num_rows == 9000 - 600 - (256 - 26) - 1
    assert got.column("id").equals(expected.column("id"))
    assert got.column("status").to_pylist() == expected.column("status").to_pylist()
    assert got.column("price").equals(expected.column("price"))
    scan.release()


def test_projection_aggregates_and_an_older_version(table: Table) -> None:
    con = duckdb.connect()
    rel = table.scan(columns=["id", "price"]).to_duckdb(con)
    assert rel.columns == ["id", "price"]
    con.register("mv", rel)
    got = con.sql("select count(*), sum(id), max(price) from mv where id > 100").fetchall()[0]
    expected = table.scan(columns=["id", "price"], filter=pc.field("id") > 100).to_arrow()
    assert got == (expected.num_rows, pc.sum(expected["id"]).as_py(), pc.max(expected["price"]).as_py())
    old = table.scan(version=table.version - 3).to_duckdb(con)  # before any delete
    assert old.aggregate("count(*)").fetchall() == [(9000,)]


def test_empty_table(table_uri) -> None:
    t = Table.create(table_uri, schema=orders(0, 1).schema)
    rel = t.scan().to_duckdb(duckdb.connect())
    assert rel.fetchall() == [] and rel.columns == ["id", "status", "price"]


def test_what_to_duckdb_cannot_do_is_a_typed_error(table: Table) -> None:
    con = duckdb.connect()
    with pytest.raises(InvalidOptionError, match="filter"):
        table.scan(filter=pc.field("id") > 1).to_duckdb(con)
    with pytest.raises(InvalidOptionError, match="predicates"):
        table.scan(predicates=[Predicate("id", ">", 1)]).to_duckdb(con)
    remote = Table("memory://duckdb-scan-test")
    remote.append(orders(0, 10))
    with pytest.raises(InvalidOptionError, match="local"):
        remote.scan().to_duckdb(con)
