"""Transactions on a real S3 server, with the store's faults on the one object that decides.

The decision is a conditional PUT (``If-None-Match: *``): a PUT whose answer is lost, or
that fails before it lands, is sent again, and a 412 on the retry reads back the decision
that stands. The transaction commits once either way."""

from __future__ import annotations

import pyarrow as pa
import pytest
from support.s3_fault_proxy import FaultProxy, FaultRule

import mvtable
from mvtable.connector import Table
from mvtable.connector.recovery.transaction_decisions import read_decision
from mvtable.errors import CommitStateUnknownError
from mvtable.lineage.enums import LineageState
from mvtable.lineage.transactions import Outcome

TIMEOUT_S = 2.0


@pytest.mark.parametrize("fault", ["lost500", "lost", "error500", "reset"])
def test_a_fault_on_the_decision_put_still_commits_once(fault: str, s3_fault_proxy: FaultProxy) -> None:
    proxy = s3_fault_proxy
    proxy.hold_s = TIMEOUT_S * 2
    options = proxy.storage_options(timeout_s=TIMEOUT_S)
    a, b = (Table(proxy.endpoint.url(n), storage_options=options) for n in ("a", "b"))
    for t in (a, b):
        t.append(pa.table({"id": pa.array([1], pa.int64())}))
    proxy.set_rules([FaultRule(ops={"PUT"}, key=r"^a/_mvtable/transactions/", script=[fault])])
    with mvtable.transaction() as tx:
        tx.append(a, pa.table({"id": pa.array([2], pa.int64())}))
        tx.overwrite(b.uri, pa.table({"id": pa.array([3], pa.int64())}), storage_options=options)
    assert proxy.counts()[fault] == 1
    real = proxy.real.storage_options()
    direct = [Table(proxy.real.url(n), storage_options=real) for n in ("a", "b")]
    assert [sorted(t.to_arrow().column("id").to_pylist()) for t in direct] == [[1, 2], [3]]
    assert read_decision(direct[0].io, tx.id).outcome == Outcome.COMMITTED
    versions = mvtable.consistent_versions(direct)
    assert versions == {t.uri: t.version for t in direct}
    assert mvtable.rollback_transaction(tx.id, tables=direct[1:]).outcome == "ROLLED_BACK"
    assert [t.to_arrow().column("id").to_pylist() for t in direct] == [[1], [1]]


def test_a_prepare_whose_outcome_is_unknown_keeps_its_files_and_is_aborted(s3_fault_proxy: FaultProxy) -> None:
    """Table b's prepare lands but the store never says so: the transaction fails with
    ``CommitStateUnknownError``, decides ABORTED, and keeps b's files (the landed prepare names
    them); once the store answers, the next reader reverts b's part."""
    proxy = s3_fault_proxy
    real = proxy.real.storage_options()
    for n in ("a", "b"):
        Table(proxy.real.url(n), storage_options=real).append(pa.table({"id": pa.array([1], pa.int64())}))
    options = proxy.storage_options(timeout_s=TIMEOUT_S, attempts=1)
    a, b = (Table(proxy.endpoint.url(n), storage_options=options) for n in ("a", "b"))
    b.io.fs.retries = 1  # type: ignore[attr-defined]  # s3fs's own retries
    prepare_b = r"^b/_mvtable/log/0{19}1\.json$"
    tx = mvtable.transaction()
    tx.append(a, pa.table({"id": pa.array([2], pa.int64())}))
    tx.append(b, pa.table({"id": pa.array([3], pa.int64())}))
    proxy.set_rules(
        [
            FaultRule(ops={"PUT"}, key=prepare_b, rate=1.0, kinds=("lost",)),
            FaultRule(ops={"GET"}, key=prepare_b, script=[None], rate=1.0, kinds=("reset",)),
        ]
    )
    with pytest.raises(CommitStateUnknownError):
        tx.commit()
    proxy.clear()
    direct = [Table(proxy.real.url(n), storage_options=real) for n in ("a", "b")]
    assert read_decision(direct[0].io, tx.id).outcome == Outcome.ABORTED
    (entry,) = [e for e in direct[1].snapshot().lineage.values() if e.id == tx.id]  # b's prepare landed
    files = [direct[1].snapshot().segments[sid].file.path for sid in entry.segments_to]
    assert files and all(direct[1].io.exists(p) for p in files)
    versions = mvtable.consistent_versions(direct)
    assert [t.to_arrow(version=versions[t.uri]).column("id").to_pylist() for t in direct] == [[1], [1]]
    assert [e.state for e in direct[1].lineage() if e.id == tx.id] == [LineageState.REVERTED]
