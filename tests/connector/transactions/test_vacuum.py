"""Vacuum and transactions: vacuum finishes decided transactions, and collects decisions and entries once nobody needs them."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mvtable
from mvtable import faults
from mvtable.connector import Table
from mvtable.connector.recovery.transaction_decisions import DECISION_DIR, decision_path
from mvtable.lineage.enums import LineageState

PROPS = {
    "replacedSegmentsRetentionPeriod": "0s",
    "lineageEntryCleanupRetentionPeriod": "0s",
    "orphanGracePeriod": "0s",
    "versionRetentionPeriod": "0s",
}


class Stop(Exception):
    """Raised at a protocol step to stop the driver there, as a crash of the block would."""


def _stop():
    raise Stop()


def make(tmp_path, *names: str) -> list[Table]:
    out = []
    for name in names:
        t = Table.create(str(tmp_path / name), schema=pa.schema([("id", pa.int64())]), properties=PROPS)
        t.append(pa.table({"id": pa.array([1], pa.int64())}))
        out.append(t)
    return out


def test_vacuum_finishes_a_decided_transaction(tmp_path):
    a, b = make(tmp_path, "a", "b")
    tx = mvtable.transaction()
    tx.append(a, pa.table({"id": [2]}))
    tx.append(b, pa.table({"id": [3]}))
    with faults.run_at("transaction.after_decision", _stop), pytest.raises(Stop):
        tx.commit()
    assert sorted(b.to_arrow().column("id").to_pylist()) == [1]
    b.vacuum(force=True)
    assert sorted(b.to_arrow().column("id").to_pylist()) == [1, 3]


def test_decisions_go_once_no_participant_holds_an_entry_and_state_stays_bounded(tmp_path):
    a, b = make(tmp_path, "a", "b")
    ids = []
    for i in range(6):
        with mvtable.transaction() as tx:
            tx.append(a, pa.table({"id": [10 + i]}))
            tx.overwrite(b, pa.table({"id": [100 + i]}))
        ids.append(tx.id)
    assert len(a.io.list_names(DECISION_DIR)) == 6
    a.vacuum(force=True)  # a's entries are purged, but b still holds its entries: the decisions stay
    assert not [e for e in a.lineage() if e.id in ids]
    assert len(a.io.list_names(DECISION_DIR)) == 6
    assert [e.state for e in b.lineage()][-1] == LineageState.COMPLETED
    # a's entries are gone, b's not: a consistent read tells purged from not-yet-seen by the decision's age
    assert mvtable.consistent_versions([a, b]) == {a.uri: a.version, b.uri: b.version}
    b.vacuum(force=True)
    assert not b.lineage()
    report = a.vacuum(force=True)
    assert a.io.list_names(DECISION_DIR) == []
    assert decision_path(ids[0]) in report.files
    assert sorted(a.to_arrow().column("id").to_pylist()) == [1, 10, 11, 12, 13, 14, 15]
    assert b.to_arrow().column("id").to_pylist() == [105]
    with mvtable.transaction() as tx:  # and the tables still take transactions
        tx.append(a, pa.table({"id": [16]}))
        tx.append(b, pa.table({"id": [106]}))
    assert mvtable.consistent_versions([a, b]) == {a.uri: a.version, b.uri: b.version}
