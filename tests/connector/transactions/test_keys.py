"""Transactions on tables with a primary key: keys stay unique, upserts replace, prepared keys are held."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mvtable
from mvtable import faults
from mvtable.connector import Table
from mvtable.errors import (
    ConcurrentKeyError,
    DuplicateKeyError,
    InvalidOptionError,
    NoPrimaryKeyError,
    TransactionConflictError,
    TransactionRollbackError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"id": pa.array([p[0] for p in pairs], pa.int64()), "v": [p[1] for p in pairs]})


def content(t: Table, version: int | None = None) -> list[tuple[int, str]]:
    data = t.to_arrow(version=version)
    return sorted(zip(data.column("id").to_pylist(), data.column("v").to_pylist()))


@pytest.fixture
def keyed(tmp_path) -> tuple[Table, Table]:
    a = Table.create(str(tmp_path / "a"), schema=SCHEMA, primary_key=["id"])
    b = Table.create(str(tmp_path / "b"), schema=SCHEMA, primary_key=["id"])
    a.append(rows((1, "a1"), (2, "a2")))
    b.append(rows((1, "b1")))
    return a, b


def test_upsert_and_append_across_keyed_tables(keyed):
    a, b = keyed
    with mvtable.transaction() as tx:
        assert tx.upsert(a, rows((2, "new"), (3, "a3"))) == 1  # one row replaced, one inserted
        tx.append(b, rows((2, "b2")))
        assert content(a) == [(1, "a1"), (2, "a2")]
    assert content(a) == [(1, "a1"), (2, "new"), (3, "a3")] and content(b) == [(1, "b1"), (2, "b2")]
    mvtable.rollback_transaction(tx.id, tables=[a])
    assert content(a) == [(1, "a1"), (2, "a2")] and content(b) == [(1, "b1")]


def test_keys_are_refused_as_a_keyed_write_refuses_them(keyed, tmp_path):
    a, b = keyed
    plain = Table(str(tmp_path / "plain"))
    plain.append(rows((1, "p")))
    with mvtable.transaction() as tx:
        with pytest.raises(DuplicateKeyError):
            tx.append(a, rows((1, "again")))  # in the table already
        tx.append(b, rows((5, "b5")))
        with pytest.raises(DuplicateKeyError):
            tx.append(b, rows((5, "twice")))  # written by this transaction already
        with pytest.raises(InvalidOptionError, match="either upserts"):
            tx.upsert(b, rows((6, "b6")))
        with pytest.raises(NoPrimaryKeyError):
            tx.upsert(plain, rows((1, "x")))
    assert content(b) == [(1, "b1"), (5, "b5")] and content(a) == [(1, "a1"), (2, "a2")]


def test_a_key_inserted_concurrently_before_the_prepare(keyed):
    a, b = keyed
    tx = mvtable.transaction()
    tx.append(b, rows((7, "tx")))
    tx.upsert(a, rows((8, "tx")))
    b.append(rows((7, "other")))  # lands first: the transaction's append of key 7 is a duplicate
    with pytest.raises(DuplicateKeyError):
        tx.commit()
    assert content(a) == [(1, "a1"), (2, "a2")] and content(b) == [(1, "b1"), (7, "other")]
    tx2 = mvtable.transaction()
    tx2.upsert(a, rows((9, "tx")))
    tx2.append(b, rows((10, "tx")))
    a.append(rows((9, "other")))  # an upsert replaces what lands before it commits
    tx2.commit()
    assert content(a) == [(1, "a1"), (2, "a2"), (9, "tx")]


def test_keys_of_a_prepared_transaction_are_held_until_it_finishes(keyed):
    a, b = keyed
    tx = mvtable.transaction()
    tx.append(a, rows((20, "tx")))
    tx.append(b, rows((21, "tx")))
    seen = {}

    def meanwhile() -> None:
        with pytest.raises(ConcurrentKeyError, match=f"transaction {tx.id}"):
            a.append(rows((20, "other")))
        with pytest.raises(ConcurrentKeyError, match="prepared and not finished"):
            a.upsert(rows((20, "other")))
        with pytest.raises(TransactionConflictError) as err, mvtable.transaction() as other:
            other.upsert(a, rows((20, "other")))
        seen["cause"] = err.value.__cause__
        a.append(rows((30, "free")))  # other keys pass
        assert a.delete(keys=[1]).deleted_rows == 1  # and a delete by key never waits

    with faults.run_at("transaction.after_prepare.2", meanwhile):
        tx.commit()
    assert isinstance(seen["cause"], ConcurrentKeyError)
    assert content(a) == [(2, "a2"), (20, "tx"), (30, "free")]
    a.upsert(rows((20, "after")))  # finished: the key is an ordinary key again
    assert content(a) == [(2, "a2"), (20, "after"), (30, "free")]


def test_rollback_refuses_to_bring_back_a_key_committed_since(keyed):
    a, b = keyed
    with mvtable.transaction() as tx:
        tx.upsert(a, rows((2, "tx")))
        tx.append(b, rows((3, "b3")))
    a.delete(keys=[2])
    a.append(rows((2, "later")))  # rolling back would bring the old row 2 back beside this one
    with pytest.raises(TransactionRollbackError, match="committed after it"):
        mvtable.rollback_transaction(tx.id, tables=[b])
    assert content(a) == [(1, "a1"), (2, "later")] and content(b) == [(1, "b1"), (3, "b3")]
