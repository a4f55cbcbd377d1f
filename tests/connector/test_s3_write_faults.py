"""``Table.append`` through an S3 fault-injecting proxy (``support.s3_fault_proxy``): when
the commit ends in ``CommitStateUnknownError``, the write keeps its data files (the commit
may name them, now or once a held PUT lands), the caller gets that error and not one from
the clean-up, and the next read tells whether the rows are in."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from support.s3_fault_proxy import FAULTS, FaultProxy, FaultRule

from mvtable.connector import Table
from mvtable.errors import CommitStateUnknownError

pytestmark = pytest.mark.s3

TIMEOUT_S = 1.5  # the client's read timeout: well above a loaded machine's answer time
COMMIT_1 = r"_mvtable/log/0{19}1\.json$"


def _tables(proxy: FaultProxy) -> tuple[Table, Table]:
    """(the table through the proxy, every request sent once; the table read directly)."""
    Table.create(proxy.real.url("t"), schema=pa.schema([("id", pa.int64())]), storage_options=proxy.real.storage_options())
    faulty = Table.open(proxy.endpoint.url("t"), storage_options=proxy.storage_options(timeout_s=TIMEOUT_S, attempts=1))
    faulty.io.fs.retries = 1  # type: ignore[attr-defined]  # s3fs's own retries: a class attribute
    return faulty, Table.open(proxy.real.url("t"), storage_options=proxy.real.storage_options())


def _rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64())})


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_on_a_data_file_put_is_retried(fault: str, s3_fault_proxy: FaultProxy) -> None:
    """Data files have unique names, so a PUT of one is simply sent again (by botocore),
    whatever happened to the first: the append lands once, with every row."""
    proxy = s3_fault_proxy
    proxy.hold_s = TIMEOUT_S * 2
    proxy.slow_s = 0.2
    Table.create(proxy.real.url("t"), schema=pa.schema([("id", pa.int64())]), storage_options=proxy.real.storage_options())
    faulty = Table.open(proxy.endpoint.url("t"), storage_options=proxy.storage_options(timeout_s=TIMEOUT_S))
    proxy.set_rules([FaultRule(ops={"PUT"}, key=r"^t/data/", script=[fault])])
    result = faulty.append(_rows(3))
    assert proxy.counts()[fault] == 1
    direct = Table.open(proxy.real.url("t"), storage_options=proxy.real.storage_options())
    assert result.version == direct.version == 1
    assert sorted(direct.to_arrow().column("id").to_pylist()) == [0, 1, 2]


def test_commit_landed_but_unreadable_keeps_the_write(s3_fault_proxy: FaultProxy) -> None:
    """The commit PUT lands and every answer about it is lost: the caller gets
    ``CommitStateUnknownError`` (not the error of the abort that could not read the log
    either), and the rows are there once the store answers."""
    proxy = s3_fault_proxy
    faulty, direct = _tables(proxy)
    proxy.set_rules(
        [
            FaultRule(ops={"PUT"}, key=COMMIT_1, rate=1.0, kinds=("lost",)),
            # the writer's catch-up before the commit sees "no version 1"; then nothing answers
            FaultRule(ops={"GET"}, key=COMMIT_1, script=[None], rate=1.0, kinds=("reset",)),
        ]
    )
    with pytest.raises(CommitStateUnknownError) as info:
        faulty.append(_rows(3))
    proxy.clear()
    found = direct.commit_log.find_commit(info.value.txn or "", since=info.value.version or 0)
    assert found is not None and found.version == 1
    assert sorted(direct.to_arrow().column("id").to_pylist()) == [0, 1, 2]


def test_commit_that_lands_after_the_writer_gave_up_finds_its_files(s3_fault_proxy: FaultProxy) -> None:
    """The commit PUT is held by the network past every retry and lands after the write
    failed with ``CommitStateUnknownError``: the write must not have removed the data files
    that commit names (that would be a durable commit naming lost bytes)."""
    proxy = s3_fault_proxy
    proxy.hold_s = TIMEOUT_S * 1.5
    proxy.late_s = 60.0  # an upper bound: released below, once the writer gave up
    faulty, direct = _tables(proxy)
    proxy.set_rules(
        [
            FaultRule(ops={"PUT"}, key=COMMIT_1, script=["late"], rate=1.0, kinds=("timeout",)),
            FaultRule(ops={"GET"}, key=COMMIT_1, script=[None], rate=1.0, kinds=("reset",)),
        ]
    )
    with pytest.raises(CommitStateUnknownError) as info:
        faulty.append(_rows(3))
    held = next(e for e in proxy.events if e.fault == "late")
    assert held.status is None, "the held PUT landed before the writer gave up: no test"
    proxy.release_late()
    deadline = time.monotonic() + 30
    while held.status is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held.status == 200
    proxy.clear()
    found = direct.commit_log.find_commit(info.value.txn or "", since=info.value.version or 0)
    assert found is not None and found.version == 1
    assert sorted(direct.to_arrow().column("id").to_pylist()) == [0, 1, 2]


def test_upsert_whose_commit_ends_unknown_keeps_its_files(s3_fault_proxy: FaultProxy) -> None:
    """The same for an upsert, which writes segments and deletion vectors: none of them
    may be removed while the commit that names them may have landed."""
    proxy = s3_fault_proxy
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    base = Table.create(proxy.real.url("t"), schema=schema, primary_key=["k"], storage_options=proxy.real.storage_options())
    base.append(pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}, schema=schema))
    faulty = Table.open(proxy.endpoint.url("t"), storage_options=proxy.storage_options(timeout_s=TIMEOUT_S, attempts=1))
    faulty.io.fs.retries = 1  # type: ignore[attr-defined]
    commit_2 = r"_mvtable/log/0{19}2\.json$"
    proxy.set_rules(
        [
            FaultRule(ops={"PUT"}, key=commit_2, rate=1.0, kinds=("lost",)),
            FaultRule(ops={"GET"}, key=commit_2, rate=1.0, kinds=("reset",)),
        ]
    )
    with pytest.raises(CommitStateUnknownError) as info:
        faulty.upsert(pa.table({"k": pa.array([2, 3], pa.int64()), "v": ["B", "c"]}, schema=schema))
    proxy.clear()
    direct = Table.open(proxy.real.url("t"), storage_options=proxy.real.storage_options())
    found = direct.commit_log.find_commit(info.value.txn or "", since=info.value.version or 0)
    assert found is not None and found.version == 2
    rows = direct.to_arrow().sort_by("k")
    assert rows.column("k").to_pylist() == [1, 2, 3]
    assert rows.column("v").to_pylist() == ["a", "B", "c"]
