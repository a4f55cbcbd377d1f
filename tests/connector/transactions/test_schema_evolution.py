"""A transaction over tables whose schemas evolved: the prepared files are written under each
table's current schema (field ids), a rename landing while the transaction is prepared reads
its files by id, and a rollback of the transaction keeps the schema change made before it."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table


@pytest.fixture
def evolved(tmp_path) -> tuple[Table, Table]:
    fact = Table.create(str(tmp_path / "fact"), schema=pa.schema([("id", pa.int64()), ("amount", pa.int32())]))
    fact.append(pa.table({"id": [1, 2], "amount": pa.array([10, 20], pa.int32())}))
    with fact.update_schema() as u:
        u.rename_column("amount", "total")
        u.update_column("total", pa.int64())
        u.add_column("region", pa.string())
    dim = Table.create(str(tmp_path / "dim"), schema=pa.schema([("id", pa.int64())]))
    dim.append(pa.table({"id": [7]}))
    return fact, dim


def test_a_transaction_writes_under_the_evolved_schema_and_rolls_back_without_undoing_it(evolved):
    fact, dim = evolved
    schema_version = fact.version
    with mvtable.transaction() as tx:
        tx.append(fact, pa.table({"id": [3], "total": pa.array([30], pa.int64()), "region": ["eu"]}))
        tx.append(dim, pa.table({"id": [8]}))
    got = fact.to_arrow().sort_by("id")
    assert got.column_names == ["id", "total", "region"]
    assert got.column("total").to_pylist() == [10, 20, 30]  # old rows read by field id, widened
    assert got.column("region").to_pylist() == [None, None, "eu"]
    versions = mvtable.consistent_versions([fact, dim])
    assert [fact.to_arrow(version=versions[fact.uri]).num_rows, dim.to_arrow(version=versions[dim.uri]).num_rows] == [3, 2]

    mvtable.rollback_transaction(tx.id, tables=[fact, dim])
    assert sorted(fact.to_arrow().column("id").to_pylist()) == [1, 2]
    assert sorted(dim.to_arrow().column("id").to_pylist()) == [7]
    assert fact.to_arrow().column_names == ["id", "total", "region"]  # the schema change stays
    assert fact.snapshot(schema_version).table_schema == fact.snapshot().table_schema


def test_a_schema_change_beside_a_prepared_transaction_never_tears_it(evolved):
    """A rename lands between the transaction's prepare and its finalize: the prepared files
    are read by field id under the new name (their statistics, keyed by the old one, unused)."""
    fact, dim = evolved
    with mvtable.transaction() as tx:
        tx.append(fact, pa.table({"id": [4], "total": pa.array([40], pa.int64()), "region": ["us"]}))
        tx.append(dim, pa.table({"id": [9]}))
        with Table.open(fact.uri).update_schema() as u:  # another writer renames meanwhile
            u.rename_column("region", "area")
    got = Table.open(fact.uri).to_arrow().sort_by("id")
    assert got.column_names == ["id", "total", "area"]
    assert got.column("area").to_pylist() == [None, None, "us"]
    assert sorted(Table.open(dim.uri).to_arrow().column("id").to_pylist()) == [7, 9]
    assert Table.open(fact.uri).to_arrow(filter=pc.field("area") == "us").column("id").to_pylist() == [4]
