"""``mvtable.transaction()`` on local disk: all or nothing across tables, conflicts, recovery, consistent reads, rollback."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable import faults
from mvtable.connector import Table
from mvtable.connector.recovery.transaction_decisions import decide, decision_path, read_decision
from mvtable.connector.recovery.transactions import Stores, settle
from mvtable.errors import (
    ConcurrentReplaceError,
    InvalidLineageTransitionError,
    InvalidOptionError,
    PushInProgressError,
    TransactionAbortedError,
    TransactionConflictError,
    TransactionNotFoundError,
    TransactionRollbackError,
)
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.transactions import Outcome


class Stop(Exception):
    """Raised at a protocol step to stop the driver there, as a crash of the block would."""


def ids(t: Table, version: int | None = None) -> list[int]:
    return sorted(t.to_arrow(version=version).column("id").to_pylist())


def rows(*values: int) -> pa.Table:
    return pa.table({"id": pa.array(values, pa.int64())})


@pytest.fixture
def tables(tmp_path) -> tuple[Table, Table, Table]:
    out = []
    for i, name in enumerate(("fact", "dim1", "dim2")):
        t = Table(str(tmp_path / name))
        t.append(rows(10 * i + 1, 10 * i + 2))
        out.append(t)
    return out[0], out[1], out[2]


def test_three_tables_change_together(tables):
    fact, dim1, dim2 = tables
    with mvtable.transaction() as tx:
        assert tx.append(fact, rows(3, 4)) == 2
        tx.overwrite(dim1, rows(100), consistent_push=True)
        assert tx.delete(dim2, pc.field("id") == 21) == 1
        assert ids(fact) == [1, 2] and ids(dim1) == [11, 12] and ids(dim2) == [21, 22]  # nothing visible inside
    result = tx.result
    assert result is not None and result.transaction_id == tx.id and tx.id.startswith("txn-")
    assert ids(fact) == [1, 2, 3, 4] and ids(dim1) == [100] and ids(dim2) == [22]
    for t in tables:
        assert result.version_of(t.uri) == t.version
        prepare, finalize = t.history()[-2:]
        assert (prepare.operation, finalize.operation) == (Operation.TXN_PREPARE, Operation.TXN_COMMIT)
        assert prepare.parameters["transaction"] == finalize.parameters["transaction"] == tx.id
        (entry,) = [e for e in t.lineage() if e.id == tx.id]
        assert entry.state == LineageState.COMPLETED
    assert read_decision(fact.io, tx.id).outcome == Outcome.COMMITTED  # the coordinator: the first table touched
    assert not dim1.io.exists(decision_path(tx.id))
    assert mvtable.consistent_versions([fact, dim1, dim2]) == {t.uri: t.version for t in tables}


def test_an_exception_in_the_block_leaves_no_trace_but_files(tables):
    fact, dim1, _ = tables
    before = [t.version for t in tables]
    with pytest.raises(RuntimeError, match="boom"), mvtable.transaction() as tx:
        tx.append(fact, rows(3))
        tx.overwrite(dim1, rows(100))
        raise RuntimeError("boom")
    assert [t.version for t in tables] == before and ids(fact) == [1, 2] and ids(dim1) == [11, 12]
    assert not fact.io.exists(decision_path(tx.id))
    with pytest.raises(InvalidOptionError, match="has ended"):
        tx.append(fact, rows(5))


def test_a_conflict_in_one_table_aborts_every_table(tables):
    fact, dim1, _ = tables
    tx = mvtable.transaction()
    tx.append(fact, rows(3))
    tx.overwrite(dim1, rows(100))
    dim1.overwrite(rows(50))  # a concurrent overwrite replaces what the transaction read
    with pytest.raises(TransactionConflictError) as err:
        tx.commit()
    assert err.value.table == dim1.io.uri and dim1.io.uri in err.value.message
    assert isinstance(err.value.__cause__, ConcurrentReplaceError)
    assert ids(fact) == [1, 2] and ids(dim1) == [50]
    assert read_decision(fact.io, tx.id).outcome == Outcome.ABORTED
    assert [e.state for e in fact.lineage() if e.id == tx.id] == [LineageState.REVERTED]
    assert mvtable.consistent_versions([fact, dim1]) == {fact.uri: fact.version, dim1.uri: dim1.version}


def test_a_transaction_another_writer_aborted_first_commits_nothing(tables):
    fact, dim1, _ = tables
    tx = mvtable.transaction()
    tx.append(fact, rows(3))
    tx.append(dim1, rows(13))
    abort_it = lambda: decide(fact.io, tx.id, Outcome.ABORTED, reason="test")
    with faults.run_at("transaction.after_prepare.2", abort_it), pytest.raises(TransactionAbortedError, match="another writer"):
        tx.commit()
    assert ids(fact) == [1, 2] and ids(dim1) == [11, 12]


def _stop():
    raise Stop()


def test_a_decided_transaction_is_finished_by_the_next_writer_and_by_a_consistent_read(tables):
    fact, dim1, dim2 = tables
    tx = mvtable.transaction()
    tx.append(fact, rows(3))
    tx.overwrite(dim1, rows(100))
    tx.append(dim2, rows(23))
    with faults.run_at("transaction.after_decision", _stop), pytest.raises(Stop):
        tx.commit()
    # decided COMMITTED, nothing finalized: plain readers see none of it
    assert ids(fact) == [1, 2] and ids(dim1) == [11, 12] and ids(dim2) == [21, 22]
    dim1.append(rows(13))  # the next writer of one participant finalizes its part first
    assert ids(dim1) == [13, 100]
    versions = mvtable.consistent_versions([fact, dim1, dim2])  # ... and a consistent read the rest
    assert ids(fact, versions[fact.uri]) == [1, 2, 3] and ids(dim2, versions[dim2.uri]) == [21, 22, 23]
    assert all(e.state == LineageState.COMPLETED for t in tables for e in t.lineage() if e.id == tx.id)


def test_a_consistent_read_never_shows_a_half_finalized_transaction(tables):
    fact, dim1, _ = tables
    tx = mvtable.transaction()
    tx.append(fact, rows(3))
    tx.append(dim1, rows(13))
    calls: list[int] = []

    def fail_first_finalize() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise Stop()

    with faults.run_at("commit.TXN_COMMIT.before_put", fail_first_finalize):
        result = tx.commit()  # committed: the failed finalize is left to the next reader or writer
    assert sorted(v is None for _, v in result.versions) == [False, True] and len(result.changed) == 1
    assert (ids(fact) == [1, 2, 3]) != (ids(dim1) == [11, 12, 13])  # the window a plain reader can see
    versions = mvtable.consistent_versions([dim1.uri, fact.uri])
    assert ids(fact, versions[fact.uri]) == [1, 2, 3] and ids(dim1, versions[dim1.uri]) == [11, 12, 13]


def test_deletes_committed_meanwhile_to_the_same_segment_are_kept(tables):
    fact, _, _ = tables
    fact.append(rows(5, 6, 7))
    tx = mvtable.transaction()
    tx.delete(fact, pc.field("id") == 5)
    with faults.run_at("transaction.after_prepare.1", lambda: fact.delete(pc.field("id") == 6)):
        tx.commit()
    assert ids(fact) == [1, 2, 7]
    fact.delete(pc.field("id") == 7)  # the clone takes later deletes as any segment does
    assert ids(fact) == [1, 2]


def test_rollback_reverts_every_table_as_one(tables, capsys):
    fact, dim1, _ = tables
    with mvtable.transaction() as tx:
        tx.append(fact, rows(3))
        tx.overwrite(dim1, rows(100))
    with pytest.raises(InvalidLineageTransitionError, match="roll the transaction back as one"):
        dim1.rollback(entry=tx.id)  # one table's part alone: refused
    result = mvtable.rollback_transaction(tx.id, tables=[dim1])  # the other participant is found from it
    assert result.outcome == "ROLLED_BACK"
    assert ids(fact) == [1, 2] and ids(dim1) == [11, 12]
    assert [h.operation for h in (fact.history()[-1], dim1.history()[-1])] == [Operation.TXN_ROLLBACK] * 2
    again = mvtable.rollback_transaction(tx.id, tables=[fact])  # asked twice: nothing more to do
    assert again.versions == result.versions
    with pytest.raises(TransactionNotFoundError):
        mvtable.rollback_transaction("txn-20260101T000000-00000000", tables=[fact])


def test_rollback_refuses_a_part_replaced_since_and_rolls_back_nothing(tables):
    fact, dim1, _ = tables
    with mvtable.transaction() as tx:
        tx.append(fact, rows(3))
        tx.overwrite(dim1, rows(100))
    dim1.overwrite(rows(7), consistent_push=True)
    with pytest.raises(TransactionRollbackError, match="replaced by lineage entry"):
        mvtable.rollback_transaction(tx.id, tables=[fact, dim1])
    assert ids(fact) == [1, 2, 3] and ids(dim1) == [7]
    assert read_decision(fact.io, tx.id, rollback=True) is None


def test_a_rollback_that_died_after_its_decision_is_finished_by_the_next_call(tables):
    fact, dim1, _ = tables
    with mvtable.transaction() as tx:
        tx.append(fact, rows(3))
        tx.append(dim1, rows(13))
    with faults.run_at("transaction.rollback.after_revert.1", _stop), pytest.raises(Stop):
        mvtable.rollback_transaction(tx.id, tables=[fact])
    assert ids(fact) == [1, 2] and ids(dim1) == [11, 12, 13]  # half rolled back: a plain reader's window
    versions = mvtable.consistent_versions([fact, dim1])  # the rollback decision says every part goes
    assert ids(dim1, versions[dim1.uri]) == [11, 12]
    assert mvtable.rollback_transaction(tx.id, tables=[fact]).outcome == "ROLLED_BACK"


def test_a_new_table_is_created_by_the_transaction(tmp_path, tables):
    fact = tables[0]
    with mvtable.transaction() as tx:
        tx.append(str(tmp_path / "new"), rows(1, 2))  # the coordinator: the decision lives in the new table
        tx.append(fact, rows(3))
    new = Table(str(tmp_path / "new"))
    assert ids(new) == [1, 2] and ids(fact) == [1, 2, 3]
    assert read_decision(new.io, tx.id).outcome == Outcome.COMMITTED


def test_bad_input_is_refused(tables):
    with mvtable.transaction() as tx:
        with pytest.raises(InvalidOptionError, match="Table object or a URI"):
            tx.append(42, rows(1))  # type: ignore[arg-type]
        with pytest.raises(InvalidOptionError, match="pyarrow"):
            tx.append(tables[0], [1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="list of tables"):
        mvtable.consistent_versions(tables[0])  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="no transaction id"):
        mvtable.rollback_transaction("push-1", tables=[tables[0]])


def test_a_live_transaction_holds_its_segments_against_other_pushes(tables):
    fact, dim1, _ = tables
    tx = mvtable.transaction()
    tx.overwrite(dim1, rows(100))
    tx.append(fact, rows(3))
    seen = {}

    def push_meanwhile():
        with pytest.raises(PushInProgressError, match="multi-table transaction prepared over the same segments") as err:
            dim1.overwrite(rows(7), consistent_push=True)
        seen["owner"] = err.value.owner
        (entry,) = [e for e in dim1.lineage() if e.id == tx.id]
        seen["status"] = entry.status

    with faults.run_at("transaction.after_prepare.1", push_meanwhile):
        tx.commit()
    assert str(os.getpid()) in seen["owner"] and "its decision finishes it" in seen["status"]
    assert ids(dim1) == [100] and ids(fact) == [1, 2, 3]


def test_commit_and_abort_inside_the_block(tables):
    fact, dim1, _ = tables
    with mvtable.transaction() as tx:
        tx.append(fact, rows(3))
        result = tx.commit()  # committed by hand: leaving the block does nothing more
    assert tx.result is result and ids(fact) == [1, 2, 3]
    with pytest.raises(KeyError), mvtable.transaction() as tx2:
        tx2.append(dim1, rows(13))
        tx2.abort()
        raise KeyError("after the abort")  # the block's own error, not "has ended"
    assert ids(dim1) == [11, 12]


def test_a_prepared_transaction_whose_lease_ran_out_is_aborted_by_the_next_finder(tables):
    # the owner (this process) still runs, but stopped renewing long ago: the lease decides
    fact, dim1, _ = tables
    tx = mvtable.transaction()
    tx.overwrite(fact, rows(100))
    tx.append(dim1, rows(13))
    later = int(time.time() * 1000) + 24 * 3600 * 1000
    found = {}

    def finder() -> None:
        (entry,) = [e for e in fact.commit_log.snapshot().lineage.values() if e.id == tx.id]
        found["state"] = settle(fact.commit_log, entry, stores=Stores(), now_ms=later)

    with faults.run_at("transaction.after_prepare.2", finder), pytest.raises(TransactionAbortedError, match="lease expired"):
        tx.commit()
    assert found["state"] == LineageState.REVERTED
    assert read_decision(fact.io, tx.id).outcome == Outcome.ABORTED
    assert ids(fact) == [1, 2] and ids(dim1) == [11, 12]
    assert mvtable.consistent_versions([fact, dim1]) == {fact.uri: fact.version, dim1.uri: dim1.version}


def test_a_consistent_read_settles_from_checkpoints_it_leaves_as_they_were(tmp_path):
    # every version a checkpoint: the read takes each table's newest state from the process's cached parse
    schema = pa.schema([("id", pa.int64())])
    fact, dim = (Table.create(str(tmp_path / n), schema=schema, properties={"checkpointInterval": "1"}) for n in ("f", "d"))
    fact.append(rows(1))
    dim.append(rows(11))
    tx = mvtable.transaction()
    tx.append(fact, rows(2))
    tx.append(dim, rows(12))
    with faults.run_at("transaction.after_decision", _stop), pytest.raises(Stop):
        tx.commit()  # decided COMMITTED, both tables prepared, neither finalized
    prepared = {t.uri: t.version for t in (fact, dim)}
    assert all(prepared[t.uri] in t.commit_log.listing().checkpoints for t in (fact, dim))
    versions = mvtable.consistent_versions([Table(fact.uri), Table(dim.uri)])
    assert versions == {uri: v + 1 for uri, v in prepared.items()}  # each table finalized once, then read
    assert ids(fact, versions[fact.uri]) == [1, 2] and ids(dim, versions[dim.uri]) == [11, 12]
    for t in (fact, dim):  # what it settled from is still the prepared state, cached and read afresh
        assert t.commit_log.read_checkpoint(prepared[t.uri], shared=True).lineage[tx.id].state == LineageState.IN_PROGRESS
        assert Table(t.uri).snapshot(version=prepared[t.uri]).lineage[tx.id].state == LineageState.IN_PROGRESS
        assert Table(t.uri).snapshot().lineage[tx.id].state == LineageState.COMPLETED
