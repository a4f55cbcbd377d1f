"""Put-if-absent under real process races, on local disk and on real S3 servers.

Several OS processes (spawn context) race to create the same path with different content;
exactly one must win, the rest must be told they lost, and the stored bytes must be the
winner's. The same is checked end to end through ``CommitLog.commit``.

What the S3 servers answer to a failed ``If-None-Match: *`` PUT (through s3fs):

* SeaweedFS 4.x: HTTP 412 ``PreconditionFailed`` without the ``Condition`` element, so s3fs
  raises ``OSError(errno.EINVAL, "At least one of the pre-conditions you specified did not
  hold")`` with the botocore ``ClientError`` as ``__cause__``.
* moto 5.x: the same 412 with ``<Condition>If-None-Match</Condition>``, so s3fs raises
  ``FileExistsError("At least one of the pre-conditions you specified did not hold")``.
  moto checks the condition before it stores the object with no lock in between (its
  server is threaded), so moto shows the answers but does not prove atomicity.
* s3fs sends no condition for a zero-byte ``open(..., "xb")`` (it "touches" the key), so that
  silently overwrites; ``FsspecFileIO`` uses one ``PutObject`` with ``IfNoneMatch`` instead.
"""

from __future__ import annotations

import collections
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.process_gang import ProcessGang
from support.s3_server import S3Endpoint  # the S3 fixtures themselves come from tests/conftest.py

from mvtable.errors import CommitError, CommitStateUnknownError, StoragePermissionError
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, commit_path
from mvtable.storage import FsspecFileIO, LocalFileIO, open_file_io
from mvtable.storage.s3 import looks_like_precondition as _looks_like_precondition

from .race_workers import commit_appends_worker, race_put_if_absent_worker

RACERS = 4  # separate OS processes
# Versions raced for, per store (MVTABLE_RACE_ROUNDS=200 for a soak run). SeaweedFS makes a
# contended conditional PUT wait for its object lock (retried after 1 s, 2 s, ...), and moto
# is slow and no proof of atomicity anyway.
_SOAK = int(os.environ.get("MVTABLE_RACE_ROUNDS", "0"))
ROUNDS = {"local": _SOAK or 20, "seaweedfs": _SOAK or 20, "moto": _SOAK or 10}
APPENDS = 5  # blind appends per process through CommitLog (RACERS * APPENDS versions)

S3_SERVERS = [pytest.param("seaweedfs", marks=pytest.mark.s3), pytest.param("moto", marks=pytest.mark.s3)]
ALL_STORES = [pytest.param("local"), *S3_SERVERS]


def _store(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict]:
    if kind == "local":
        return str(tmp_path / "table"), {}
    endpoint: S3Endpoint = request.getfixturevalue(f"{kind}_s3")
    return endpoint.url("table"), endpoint.storage_options()


def _private_io(endpoint: S3Endpoint, prefix: str = "table") -> FsspecFileIO:
    """An ``FsspecFileIO`` with its own s3fs instance (not shared through fsspec's cache)."""
    return FsspecFileIO(endpoint.url(prefix), {**endpoint.storage_options(), "skip_instance_cache": True})


# --------------------------------------------------------------------------------------
# process races


@pytest.fixture(scope="module")
def gang() -> Iterator[ProcessGang]:
    """RACERS separate Python processes, started once for every race in this module."""
    g = ProcessGang(RACERS)
    try:
        yield g
    finally:
        g.close()


@pytest.mark.parametrize("kind", ALL_STORES)
def test_put_if_absent_process_race(kind: str, gang: ProcessGang, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    uri, options = _store(kind, request, tmp_path)
    rounds = ROUNDS[kind]
    per_process = gang.run(race_put_if_absent_worker, uri, options, rounds, "_mvtable/log")
    by_round: dict[int, list] = collections.defaultdict(list)
    for worker, results in enumerate(per_process):
        assert [r for r, *_ in results] == list(range(rounds))
        for rnd, won, data, error in results:
            assert error is None, f"process {worker} round {rnd}: {error}"
            by_round[rnd].append((worker, won, data))
    io = open_file_io(uri, options)
    for rnd in range(rounds):
        entries = by_round[rnd]
        winners = [(w, data) for w, won, data in entries if won is True]
        losers = [w for w, won, _ in entries if won is False]
        assert len(winners) == 1, f"round {rnd}: winners {[w for w, _ in winners]}"
        assert len(losers) == RACERS - 1
        assert io.read(f"_mvtable/log/{rnd:020d}.json") == winners[0][1]
    names = sorted(f.name for f in io.list("_mvtable/log"))
    assert names == [f"{r:020d}.json" for r in range(rounds)]  # no temp files left behind


@pytest.mark.parametrize("kind", ALL_STORES)
def test_commit_log_blind_appends_race(kind: str, gang: ProcessGang, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    uri, options = _store(kind, request, tmp_path)
    per_process = gang.run(commit_appends_worker, uri, options, APPENDS)
    claimed: dict[int, str] = {}
    for done in per_process:
        assert len(done) == APPENDS
        for version, seg_id, _attempts in done:
            assert version not in claimed, f"version {version} claimed by {claimed[version]} and {seg_id}"
            claimed[version] = seg_id

    total = RACERS * APPENDS
    log = CommitLog(open_file_io(uri, options), check_files=False)
    listing = log.listing()
    assert listing.commits == list(range(total))  # contiguous, one version per append
    assert sorted(claimed) == list(range(total))
    snapshot = log.snapshot()
    assert snapshot.version == total - 1
    assert snapshot.table_id == "t"
    expected = {f"w{w}-a{j}" for w in range(RACERS) for j in range(APPENDS)}
    assert set(snapshot.visible_segment_ids()) == expected
    assert len(snapshot.visible_segment_ids()) == total
    assert [h.version for h in snapshot.history] == list(range(total))
    assert all(h.operation == "APPEND" for h in snapshot.history)
    for version, seg_id in claimed.items():  # what each writer was told is what the log holds
        commit = log.read_commit(version)
        assert [a.segment.id for a in commit.actions if a.kind == "add"] == [seg_id]
        assert any(a.kind == "metadata" for a in commit.actions) == (version == 0)
    # the checkpoints written along the way agree with a replay of the commits
    assert listing.checkpoints, "expected at least one checkpoint"
    for cp in listing.checkpoints:
        assert set(log.read_checkpoint(cp).visible_segment_ids()) == set(log.snapshot(cp).visible_segment_ids())


# --------------------------------------------------------------------------------------
# what each server answers, and FsspecFileIO on top of it


@pytest.mark.parametrize("server", S3_SERVERS)
def test_server_answer_to_failed_conditional_put(server: str, request: pytest.FixtureRequest) -> None:
    import s3fs

    endpoint: S3Endpoint = request.getfixturevalue(f"{server}_s3")
    fs = s3fs.S3FileSystem(**endpoint.storage_options(), skip_instance_cache=True)
    path = f"{endpoint.bucket}/k.json"
    fs.pipe_file(path, b"first")

    for attempt in ("open-xb", "pipe-create"):
        with pytest.raises(OSError) as info:
            if attempt == "open-xb":
                with fs.open(path, "xb") as f:
                    f.write(b"second")
            else:
                fs.pipe_file(path, b"second", mode="create")
        exc = info.value
        cause = exc.__cause__
        assert cause is not None and cause.response["Error"]["Code"] == "PreconditionFailed"
        assert cause.response["ResponseMetadata"]["HTTPStatusCode"] == 412
        assert "pre-conditions you specified did not hold" in str(exc)
        if server == "seaweedfs":
            assert type(exc) is OSError and exc.errno == errno.EINVAL
            assert "Condition" not in cause.response["Error"]
        else:
            assert type(exc) is FileExistsError
            assert cause.response["Error"]["Condition"] == "If-None-Match"
        assert _looks_like_precondition(exc)
        assert fs.cat_file(path) == b"first"

    # s3fs does not make a zero-byte "xb" write conditional: it overwrites.
    with fs.open(path, "xb"):
        pass
    assert fs.cat_file(path) == b"", "s3fs now makes zero-byte xb writes conditional: revisit mvtable.storage.fsspec"


@pytest.mark.parametrize("server", S3_SERVERS)
def test_fsspec_file_io_on_s3(server: str, request: pytest.FixtureRequest) -> None:
    endpoint: S3Endpoint = request.getfixturevalue(f"{server}_s3")
    io = _private_io(endpoint)
    other = _private_io(endpoint)  # another "process": its own s3fs instance and caches

    assert io.list("_mvtable/log") == []
    assert not io.exists("_mvtable/log/a.json")
    assert io.put_if_absent("_mvtable/log/a.json", b"AAAA") is True
    assert io.put_if_absent("_mvtable/log/a.json", b"BB") is False
    assert io.put_if_absent("_mvtable/log/a.json", b"AAAA") is True  # identical bytes: ours
    assert io.put_if_absent("_mvtable/log/a.json", b"") is False
    assert io.read("_mvtable/log/a.json") == b"AAAA"
    assert io.read_range("_mvtable/log/a.json", 1, 2) == b"AA"
    assert io.read_range("_mvtable/log/a.json", 0, 0) == b""

    # zero-byte objects are conditional too (one PutObject, not s3fs's "touch")
    assert io.put_if_absent("_mvtable/log/empty", b"") is True
    assert io.put_if_absent("_mvtable/log/empty", b"x") is False
    assert io.read("_mvtable/log/empty") == b""

    # listings and existence are never answered from a stale s3fs cache
    assert sorted(f.name for f in other.list("_mvtable/log")) == ["a.json", "empty"]
    assert not other.exists("_mvtable/log/b.json")
    io.write("_mvtable/log/b.json", b"B")
    assert other.exists("_mvtable/log/b.json")
    assert sorted(f.name for f in other.list("_mvtable/log")) == ["a.json", "b.json", "empty"]
    info = {f.name: f for f in other.list("_mvtable/log")}
    assert info["a.json"].size == 4 and info["a.json"].mtime and info["a.json"].mtime > 1e9

    io.write("_mvtable/log/b.json", b"BBB")  # plain writes overwrite
    assert other.read("_mvtable/log/b.json") == b"BBB"
    with pytest.raises(FileNotFoundError):
        io.read("_mvtable/log/missing.json")

    other.delete(["_mvtable/log/b.json", "_mvtable/log/never-was.json"])
    assert not io.exists("_mvtable/log/b.json")
    assert sorted(f.name for f in io.list("_mvtable/log")) == ["a.json", "empty"]
    io.delete([])
    assert io.spec() == {"uri": endpoint.url("table"), "options": {**endpoint.storage_options(), "skip_instance_cache": True}}


def _read_in_forked_child(uri: str, options: dict, queue) -> None:
    try:
        io = open_file_io(uri, options)  # the parent's cached instance, copied by fork
        queue.put(("ok", io.read("f.json"), io.put_if_absent("g.json", b"child")))
    except BaseException as exc:  # pragma: no cover - reported to the parent
        queue.put(("error", repr(exc), None))


@pytest.mark.s3
@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_fsspec_file_io_works_in_a_forked_child(seaweedfs_s3: S3Endpoint) -> None:
    import multiprocessing as mp

    uri, options = seaweedfs_s3.url("forked"), seaweedfs_s3.storage_options()
    io = open_file_io(uri, options)
    io.write("f.json", b"parent")
    assert io.read("f.json") == b"parent"  # the parent's s3fs is now bound to its event loop
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_in_forked_child, args=(uri, options, queue))
    child.start()
    try:
        assert queue.get(timeout=60) == ("ok", b"parent", True)
    finally:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
            child.join()
    assert io.read("g.json") == b"child"


# --------------------------------------------------------------------------------------
# answers that leave open whether the PUT landed


def _client_error(status: int, code: str, message: str = "boom", **extra):
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    error = ClientError(
        {"Error": {"Code": code, "Message": message, **extra}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )
    return translate_boto_error(error)


def _timeout():
    from botocore.exceptions import ReadTimeoutError

    return ReadTimeoutError(endpoint_url="http://127.0.0.1/")


class _Faults:
    """Wraps ``io.fs.call_s3``: each ``put_object`` consumes one planned fault."""

    def __init__(self, io: FsspecFileIO, monkeypatch: pytest.MonkeyPatch, plan: list[str]) -> None:
        self.real = io.fs.call_s3
        self.plan = list(plan)
        self.puts = 0
        monkeypatch.setattr(io.fs, "call_s3", self)

    def __call__(self, method, *args, **kwargs):
        if method != "put_object" or not self.plan:
            return self.real(method, *args, **kwargs)
        self.puts += 1
        fault = self.plan.pop(0)
        if fault.startswith("land+"):  # the PUT is applied, then the answer is lost
            self.real(method, *args, **kwargs)
            fault = fault[len("land+") :]
        if fault == "timeout":
            raise _timeout()
        if fault == "500":
            raise _client_error(500, "InternalError", "We encountered an internal error")
        if fault == "412":
            raise _client_error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
        if fault == "409":
            raise _client_error(409, "ConditionalRequestConflict", "A conflicting conditional operation is in progress")
        if fault == "403":
            raise _client_error(403, "AccessDenied", "Access Denied")
        if fault == "ok":
            return self.real(method, *args, **kwargs)
        raise AssertionError(fault)


@pytest.mark.s3
@pytest.mark.parametrize(
    "plan, preexisting, expected",
    [
        (["land+timeout"], None, True),  # ours landed, answer lost: the read-back says so
        (["land+412"], None, True),  # a retry inside s3fs/botocore ran into our own first attempt
        (["timeout", "ok"], None, True),  # not applied: the conditional PUT is simply repeated
        (["500"], b"theirs", False),  # not applied, and someone else holds the key
        (["409", "409", "ok"], None, True),  # concurrent conditional writes: not applied, retried
        (["land+500"], None, True),
    ],
)
def test_put_if_absent_resolves_lost_answers(
    plan: list[str], preexisting: bytes | None, expected: bool, seaweedfs_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    io = _private_io(seaweedfs_s3)
    if preexisting is not None:
        io.write("v.json", preexisting)
    faults = _Faults(io, monkeypatch, plan)
    assert io.put_if_absent("v.json", b"ours") is expected
    assert io.read("v.json") == (b"ours" if expected else preexisting)
    assert not faults.plan


@pytest.mark.s3
def test_put_if_absent_unknown_only_when_it_cannot_tell(seaweedfs_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    io = _private_io(seaweedfs_s3)
    _Faults(io, monkeypatch, ["land+timeout"] + ["timeout"] * 10)

    def unreadable(*args, **kwargs):
        raise _timeout()

    monkeypatch.setattr(io.fs, "cat_file", unreadable)
    with pytest.raises(CommitStateUnknownError):
        io.put_if_absent("v.json", b"ours")


@pytest.mark.s3
def test_put_if_absent_refusals_are_not_unknown(seaweedfs_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    io = _private_io(seaweedfs_s3)
    _Faults(io, monkeypatch, ["403"])
    with pytest.raises(StoragePermissionError) as info:  # read-only credentials: typed, not unknown
        io.put_if_absent("v.json", b"ours")
    assert info.value.path.endswith("v.json") and info.value.operation == "create"
    assert not io.exists("v.json")
    # a missing bucket is a refusal too
    gone = FsspecFileIO(
        f"s3://no-such-bucket-{seaweedfs_s3.bucket}/t", {**seaweedfs_s3.storage_options(), "skip_instance_cache": True}
    )
    with pytest.raises(CommitError) as info:
        gone.put_if_absent("v.json", b"ours")
    assert not isinstance(info.value, CommitStateUnknownError)


@pytest.mark.s3
def test_commit_log_recovers_a_commit_whose_answer_was_lost(seaweedfs_s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    from mvtable.lineage.actions import MetadataAction
    from mvtable.lineage.snapshot import Snapshot

    io = _private_io(seaweedfs_s3)
    _Faults(io, monkeypatch, ["land+timeout"])
    log = CommitLog(io, check_files=False)
    result = log.commit(
        read=Snapshot(), operation=Operation.CREATE, build=lambda s: [MetadataAction(table_id="t", table_schema={})]
    )
    assert result.commit.version == 0 and result.attempts == 1
    assert log.listing().commits == [0]
    assert log.read_commit(0).parameters["txn"] == result.commit.parameters["txn"]
    assert io.read(commit_path(0)) == result.commit.to_json_bytes()


# --------------------------------------------------------------------------------------
# no server needed


def test_precondition_detection() -> None:
    import s3fs  # noqa: F401  (a declared test dependency)

    seaweed = _client_error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
    moto = _client_error(
        412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", Condition="If-None-Match"
    )
    assert type(seaweed) is OSError and seaweed.errno == errno.EINVAL
    assert type(moto) is FileExistsError
    assert _looks_like_precondition(seaweed) and _looks_like_precondition(moto)
    # a 409 means "not applied, key maybe absent", and other errors are not preconditions
    assert not _looks_like_precondition(_client_error(409, "ConditionalRequestConflict"))
    assert not _looks_like_precondition(_client_error(400, "InvalidArgument", "bad request"))
    assert not _looks_like_precondition(_client_error(500, "InternalError"))
    assert not _looks_like_precondition(OSError(errno.EINVAL, "invalid argument"))
    assert _looks_like_precondition(OSError(errno.EINVAL, "412 Precondition Failed"))
    from mvtable.storage.s3 import classify_error as classify

    assert classify(seaweed) == classify(moto) == "exists"
    assert classify(_client_error(409, "ConditionalRequestConflict")) == "retry"
    assert classify(_client_error(503, "SlowDown")) == "retry"
    assert classify(_client_error(403, "AccessDenied")) == "rejected"
    assert classify(_client_error(500, "InternalError")) == "unknown"
    assert classify(_timeout()) == "unknown"


def test_local_put_if_absent_is_exclusive(tmp_path: Path) -> None:
    io = open_file_io(str(tmp_path / "t"))
    assert isinstance(io, LocalFileIO)
    assert io.put_if_absent("_mvtable/log/0.json", b"a") is True
    assert io.put_if_absent("_mvtable/log/0.json", b"b") is False
    assert io.read("_mvtable/log/0.json") == b"a"
    assert [f.name for f in io.list("_mvtable/log")] == ["0.json"]


def test_local_put_if_absent_syncs_the_file_before_linking_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Durability order of a local commit: the temp file's data is synced while the name
    does not exist yet, the folder after the link. The real syscalls run; they are only
    recorded."""
    import os

    from mvtable.storage import LocalFileIO

    events: list[tuple[str, bool]] = []
    target = tmp_path / "log" / "00001.json"
    data_sync = getattr(os, "fdatasync", None) or os.fsync
    real_fsync = os.fsync

    def record_data(fd: int) -> None:
        events.append(("data", target.exists()))
        data_sync(fd)

    def record_fsync(fd: int) -> None:
        events.append(("fsync", target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fdatasync" if hasattr(os, "fdatasync") else "fsync", record_data)
    if hasattr(os, "fdatasync"):
        monkeypatch.setattr(os, "fsync", record_fsync)
    io = LocalFileIO(str(tmp_path))
    assert io.put_if_absent("log/00001.json", b"{}")
    assert events[0] == ("data", False) and events[-1][1] is True and len(events) == 2
    assert target.read_bytes() == b"{}"
    assert not io.put_if_absent("log/00001.json", b"other") and target.read_bytes() == b"{}"
