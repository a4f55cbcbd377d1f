"""Commits through an S3 fault-injecting proxy (``support.s3_fault_proxy``) in front of
SeaweedFS: one scripted fault at a time, on the very request it is meant for.

* The proxy itself: each fault does to a plain request what it says (answered by the
  proxy, reset, held, forwarded and then lost, forwarded late).
* Each fault on the PUT of a commit (botocore's and s3fs's own retries on, as in
  production): the commit lands exactly once, at the version it reports; the retry that
  runs into our own landed PUT (HTTP 412) is not taken for a conflict.
* When the answers never tell: ``CommitStateUnknownError`` carrying the transaction id and
  the first version it may hold, and ``CommitLog.find_commit`` resolving it once the store
  answers again, both when the PUT had landed and when it lands after the writer gave up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from support.s3_fault_proxy import FAULTS, FaultProxy, FaultRule

from mvtable.errors import CommitStateUnknownError, TooManyRetriesError
from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, RetryPolicy, commit_path
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FsspecFileIO

pytestmark = pytest.mark.s3

TIMEOUT_S = 1.5  # the client's read timeout (a loaded 2-core CI machine answers well inside it); the proxy holds requests longer
COMMIT_1 = r"_mvtable/log/0{19}1\.json$"


@pytest.fixture
def proxy(s3_fault_proxy: FaultProxy) -> Iterator[FaultProxy]:
    s3_fault_proxy.hold_s = TIMEOUT_S * 2
    s3_fault_proxy.slow_s = 0.2
    yield s3_fault_proxy


def _io(proxy: FaultProxy, *, client_retries: bool = True) -> FsspecFileIO:
    """The table ``t`` through the proxy; ``client_retries=False``: every request is sent
    once (no botocore or s3fs retries), so that a script meets exactly the requests it names."""
    options = proxy.storage_options(timeout_s=TIMEOUT_S, attempts=None if client_retries else 1)
    io = FsspecFileIO(proxy.endpoint.url("t"), options)
    if not client_retries:
        io.fs.retries = 1
    return io


def _direct(proxy: FaultProxy) -> CommitLog:
    """The log read straight from the server, past the proxy."""
    return CommitLog(
        FsspecFileIO(proxy.real.url("t"), {**proxy.real.storage_options(), "skip_instance_cache": True}), check_files=False
    )


def _seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)


def _create(log: CommitLog) -> Snapshot:
    log.commit(read=Snapshot(), operation=Operation.CREATE, build=lambda s: [MetadataAction(table_id="t", table_schema={})])
    return log.snapshot()


def _append(log: CommitLog, read: Snapshot, sid: str, **kw):
    return log.commit(read=read, operation=Operation.APPEND, build=lambda s: [AddSegment(segment=_seg(sid))], **kw)


def _txns(log: CommitLog) -> list[str]:
    return [log.read_commit(v).parameters["txn"] for v in log.listing().commits]


# --------------------------------------------------------------------------------------
# the proxy


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_does_what_it_says(fault: str, proxy: FaultProxy) -> None:
    import botocore.config
    import botocore.exceptions
    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=proxy.url,
        region_name="us-east-1",
        aws_access_key_id=proxy.real.key,
        aws_secret_access_key=proxy.real.secret,
        config=botocore.config.Config(read_timeout=TIMEOUT_S, retries={"total_max_attempts": 1}, s3={"addressing_style": "path"}),
    )
    direct = proxy.real.client()
    proxy.set_rules([FaultRule(ops={"PUT"}, key="^k$", script=[fault])])
    t0 = time.monotonic()
    try:
        client.put_object(Bucket=proxy.real.bucket, Key="k", Body=b"v", IfNoneMatch="*")
        answer = "ok"
    except botocore.exceptions.ClientError as exc:
        answer = str(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    except (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError) as exc:
        answer = "timeout" if isinstance(exc, botocore.exceptions.ReadTimeoutError) else "reset"
    took = time.monotonic() - t0

    def stored() -> bool:
        try:
            return bool(direct.get_object(Bucket=proxy.real.bucket, Key="k")["Body"].read() == b"v")
        except direct.exceptions.NoSuchKey:
            return False

    expected = {
        "error500": ("500", False),
        "slowdown": ("503", False),
        "reset": ("reset", False),
        "timeout": ("timeout", False),
        "slow": ("ok", True),
        "lost": ("reset", True),
        "lost500": ("500", True),
        "late": ("timeout", False),  # not yet: it lands after the client gave up
    }[fault]
    assert (answer, stored()) == expected
    if fault == "slow":
        assert took >= proxy.slow_s * 0.5
    if fault == "late":
        deadline = time.monotonic() + proxy.hold_s + 5
        while not stored() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stored(), "the held PUT never reached the server"
    assert proxy.counts()[fault] == 1
    # the next request on the proxy passes untouched
    client.put_object(Bucket=proxy.real.bucket, Key="k2", Body=b"w")
    assert direct.get_object(Bucket=proxy.real.bucket, Key="k2")["Body"].read() == b"w"


def test_rules_scope_faults_by_operation_and_key(proxy: FaultProxy) -> None:
    io = _io(proxy, client_retries=False)
    proxy.set_rules([FaultRule(ops={"PUT"}, key=r"_mvtable/log/", rate=1.0, kinds=("error500",))])
    io.write("data/a.parquet", b"a")  # another key: untouched
    assert io.read("data/a.parquet") == b"a"  # a GET: untouched
    with pytest.raises(OSError):  # s3fs's translation of the 500
        io.write("_mvtable/log/x.json", b"x")
    seen = {(e.op, e.key.split("/", 1)[1], e.fault) for e in proxy.events}
    assert ("PUT", "data/a.parquet", None) in seen
    assert ("GET", "data/a.parquet", None) in seen
    assert ("PUT", "_mvtable/log/x.json", "error500") in seen
    with pytest.raises(ValueError, match="unknown faults"):
        FaultRule(kinds=("explode",), rate=1.0)


# --------------------------------------------------------------------------------------
# one fault on the PUT of a commit


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_on_the_commit_put_lands_it_exactly_once(fault: str, proxy: FaultProxy) -> None:
    log = CommitLog(_io(proxy), check_files=False)
    read = _create(log)
    proxy.set_rules([FaultRule(ops={"PUT"}, key=COMMIT_1, script=[fault])])
    result = _append(log, read, "a")
    assert proxy.counts()[fault] == 1
    if fault == "late":  # wait for the held PUT to reach the server
        held = next(e for e in proxy.events if e.fault == "late")
        deadline = time.monotonic() + proxy.hold_s + 5
        while held.status is None and time.monotonic() < deadline:
            time.sleep(0.05)
    direct = _direct(proxy)
    assert direct.listing().commits == [0, 1]
    assert result.commit.version == 1
    assert direct.read_commit(1).parameters["txn"] == result.commit.parameters["txn"]
    assert direct.snapshot().visible_segment_ids() == ["a"]
    puts = [e for e in proxy.events if e.op == "PUT" and e.key.endswith(commit_path(1))]
    if fault in ("lost", "lost500", "late"):
        # botocore retried the PUT; whichever of the two reached the server second was
        # refused as a failed condition, and that 412 was recognised as our own write, not
        # reported as a lost race
        assert sorted(e.status or 0 for e in puts) == [200, 412]


def test_commit_of_another_writer_is_a_lost_race_not_ours(proxy: FaultProxy) -> None:
    """A 412 on a retry after a lost answer can also be someone else's commit (ours never
    landed): then it is an ordinary lost race, and ours lands at the next version."""
    log = CommitLog(_io(proxy), check_files=False)
    read = _create(log)
    other = _direct(proxy)
    # our PUT is answered 500 without reaching the server; the other writer takes version 1
    # before the retry runs (the proxy's hook is the fault itself: we commit from its thread)
    proxy.set_rules([FaultRule(ops={"PUT"}, key=COMMIT_1, script=["error500", "error500"])])
    _append(other, other.snapshot(), "theirs")
    result = _append(log, read, "ours")
    assert result.commit.version == 2
    assert _txns(_direct(proxy))[1:] == [other.read_commit(1).parameters["txn"], result.commit.parameters["txn"]]


# --------------------------------------------------------------------------------------
# when the answers never tell


def test_unknown_state_names_its_txn_and_the_next_read_resolves_it(proxy: FaultProxy) -> None:
    """The commit PUT lands but its answer is lost, and the commit cannot be read back: the
    writer gets ``CommitStateUnknownError`` with the transaction id and version, and once
    the store answers again ``find_commit`` says it landed, exactly once."""
    log = CommitLog(_io(proxy, client_retries=False), retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.01), check_files=False)
    read = _create(log)
    proxy.set_rules(
        [
            FaultRule(ops={"PUT"}, key=COMMIT_1, script=["lost"], rate=1.0, kinds=("error500",)),
            FaultRule(ops={"GET"}, key=COMMIT_1, rate=1.0, kinds=("reset",)),
        ]
    )
    with pytest.raises(CommitStateUnknownError) as info:
        _append(log, read, "a")
    assert info.value.version == 1 and info.value.txn
    proxy.clear()
    found = log.find_commit(info.value.txn, since=info.value.version)
    assert found is not None and found.version == 1
    assert _txns(_direct(proxy)).count(info.value.txn) == 1


def test_a_put_that_lands_after_the_writer_gave_up_is_not_a_conflict(proxy: FaultProxy) -> None:
    """Every PUT of the commit times out, the first one is still held by the network and
    lands later. The writer must not report a lost race (``TooManyRetriesError`` says
    nothing of ours landed): the outcome is unknown until the held PUT is settled, and the
    next read tells."""
    proxy.hold_s = TIMEOUT_S * 1.5
    proxy.late_s = 60.0  # an upper bound: released below, once the writer gave up
    log = CommitLog(_io(proxy, client_retries=False), retry=RetryPolicy(max_attempts=1), check_files=False)
    read = _create(log)
    proxy.set_rules([FaultRule(ops={"PUT"}, key=COMMIT_1, script=["late"], rate=1.0, kinds=("timeout",))])
    t0 = time.monotonic()
    with pytest.raises(CommitStateUnknownError) as info:
        _append(log, read, "a")
    assert not isinstance(info.value, TooManyRetriesError)
    assert time.monotonic() - t0 < proxy.late_s, "the held PUT landed before the writer gave up: no test"
    txn, version = info.value.txn, info.value.version
    assert txn and version == 1
    assert log.find_commit(txn, since=version) is None  # not yet
    proxy.release_late()
    deadline = time.monotonic() + 30
    direct = _direct(proxy)
    while direct.latest_version() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    found = direct.find_commit(txn, since=version)
    assert found is not None and found.version == 1
    assert direct.snapshot().visible_segment_ids() == ["a"]


def test_find_commit_is_final_once_the_log_passed_the_versions_tried(proxy: FaultProxy) -> None:
    log = CommitLog(_io(proxy), check_files=False)
    read = _create(log)
    txn = _append(log, read, "a").commit.parameters["txn"]
    assert log.find_commit(txn).version == 1
    assert log.find_commit(txn, since=2) is None
    assert log.find_commit("no-such-txn") is None
