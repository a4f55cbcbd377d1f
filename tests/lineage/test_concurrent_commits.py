"""The commit protocol under real concurrency (separate OS processes on one local table) and
under a store that cannot tell whether a write landed (``CommitStateUnknownError``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mvtable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    ConcurrentLineageError,
    ConcurrentReplaceError,
)
from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog, RetryPolicy
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import LocalFileIO

# One worker program for every scenario: it imports only mvtable.lineage, prepares (reads its
# snapshot), signals "ready", waits for "go" and then races the others.
WORKER = r"""
import json, os, sys, time
from mvtable.lineage.actions import AddSegment, LineageEnd, LineageStart, RemoveSegment, SegmentFile
from mvtable.errors import ConcurrentReplaceError
from mvtable.storage import LocalFileIO
from mvtable.lineage.log import CommitLog
from mvtable.lineage.enums import Operation

args = json.loads(sys.argv[1])
log = CommitLog(LocalFileIO(args["root"]), check_files=False)

def seg(sid):
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)

def ready_then_wait():
    open(os.path.join(args["sync"], f"ready-{args['name']}"), "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(args["sync"], "go")):
        if time.time() > deadline:
            sys.exit("no go signal")
        time.sleep(0.001)

def replace_build(read_ids, actions):
    # An overwrite's build: what it read must still be visible in the snapshot it is given.
    def build(s):
        gone = sorted(set(read_ids) - set(s.visible_segment_ids()))
        if gone:
            raise ConcurrentReplaceError(f"segments {gone} were replaced concurrently")
        return actions
    return build

out = {"name": args["name"], "versions": [], "attempts": []}
mode = args["mode"]
read = log.snapshot(args.get("read_version"))

if mode == "append":
    ready_then_wait()
    watch = args.get("until_completed")  # keep appending until that push has ended
    for i in range(args["count"] if watch is None else 400):
        sid = f"{args['name']}-{i}"
        r = log.commit(read=read, operation=Operation.APPEND, build=lambda s, sid=sid: [AddSegment(segment=seg(sid))])
        out["versions"].append(r.commit.version)
        out["attempts"].append(r.attempts)
        if args.get("fresh"):
            read = r.snapshot
        entry = r.snapshot.lineage.get(watch)
        if watch is not None and i + 1 >= args["count"] and entry is not None and entry.state == "COMPLETED":
            break
        time.sleep(args.get("pause", 0))

elif mode == "overwrite":
    read_ids = read.visible_segment_ids()
    new = args["name"]
    actions = [RemoveSegment(segment_id=x) for x in read_ids] + [AddSegment(segment=seg(new))]
    ready_then_wait()
    try:
        r = log.commit(read=read, operation=Operation.OVERWRITE, build=replace_build(read_ids, actions))
        out["versions"].append(r.commit.version)
    except Exception as exc:
        out["error"] = type(exc).__name__
        out["error_mro"] = [c.__name__ for c in type(exc).__mro__]

elif mode == "push":
    read_ids = read.visible_segment_ids()
    entry = args["name"]
    ready_then_wait()
    r = log.commit(
        read=read,
        operation=Operation.PUSH_START,
        build=replace_build(read_ids, [LineageStart(entry_id=entry, segments_from=tuple(read_ids)),
                                       AddSegment(segment=seg(f"{entry}-0"), lineage_entry=entry)]),
    )
    out["versions"].append(r.commit.version)
    # upload the rest of the push while appends keep landing: wait until some have
    deadline = time.time() + 30
    while log.latest_version() < r.commit.version + 3 and time.time() < deadline:
        time.sleep(0.002)
    r = log.commit(read=r.snapshot, operation=Operation.PUSH_STAGE,
                   build=lambda s: [AddSegment(segment=seg(f"{entry}-1"), lineage_entry=entry)])
    out["versions"].append(r.commit.version)
    r = log.commit(read=r.snapshot, operation=Operation.PUBLISH, build=lambda s: [LineageEnd(entry_id=entry)])
    out["versions"].append(r.commit.version)

print(json.dumps(out))
"""


def seg(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)


def create(root: Path, *sids: str, **properties: str) -> CommitLog:
    log = CommitLog(LocalFileIO(str(root)), check_files=False)
    log.commit(
        read=Snapshot(),
        operation=Operation.CREATE,
        build=lambda s: [MetadataAction(table_id="t", table_schema={}, properties=properties)],
    )
    if sids:
        log.commit(read=log.snapshot(), operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg(x)) for x in sids])
    return log


def race(tmp_path: Path, root: Path, workers: list[dict], timeout: float = 60) -> dict[str, dict]:
    """Start every worker, let all prepare, release them at once, collect their reports."""
    sync = tmp_path / f"sync-{time.monotonic_ns()}"
    sync.mkdir()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    procs = []
    for w in workers:
        args = json.dumps({"root": str(root), "sync": str(sync), **w})
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
            )
        )
    deadline = time.monotonic() + timeout
    while len(list(sync.glob("ready-*"))) < len(workers):
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            raise AssertionError(f"a worker died before the race: {dead[0].communicate()[1]}")
        assert time.monotonic() < deadline, "workers did not get ready"
        time.sleep(0.005)
    (sync / "go").touch()
    reports = {}
    for p in procs:
        stdout, stderr = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert p.returncode == 0, stderr
        report = json.loads(stdout.strip().splitlines()[-1])
        reports[report["name"]] = report
    return reports


def assert_log_is_sound(log: CommitLog) -> Snapshot:
    """Contiguous versions from 0, every commit a different transaction, replay succeeds."""
    latest = log.latest_version()
    assert log.listing().commits == list(range(latest + 1))
    txns = [log.read_commit(v).parameters["txn"] for v in range(latest + 1)]
    assert len(set(txns)) == len(txns)
    s = log.snapshot()
    assert s.version == latest
    ids = s.visible_segment_ids()
    assert len(ids) == len(set(ids))
    return s


# -- (a) blind appends from many processes ---------------------------------------------------
def test_blind_appends_from_four_processes_all_land(tmp_path) -> None:
    n, k = 4, 15
    root = tmp_path / "t"
    log = create(root, checkpointInterval="7")
    # two workers keep their first read (every commit goes through catch-up), two move on
    workers = [{"mode": "append", "name": f"w{i}", "count": k, "fresh": i % 2 == 0} for i in range(n)]
    reports = race(tmp_path, root, workers)
    s = assert_log_is_sound(log)
    assert s.version == n * k
    expected = {f"w{i}-{j}" for i in range(n) for j in range(k)}
    assert set(s.visible_segment_ids()) == expected and len(s.segments) == n * k
    landed = sorted(v for r in reports.values() for v in r["versions"])
    assert landed == list(range(1, n * k + 1))
    for r in reports.values():  # each writer's own commits are in its order
        assert r["versions"] == sorted(r["versions"])
    assert sum(a > 1 for r in reports.values() for a in r["attempts"]) > 0, "no race happened"
    assert log.listing().checkpoints == [v for v in range(7, n * k + 1, 7)]
    assert log.read_checkpoint(56) == log.snapshot(56)


# -- (b) two overwrites from the same read version -----------------------------------------------
def test_two_overwrites_from_one_read_version_exactly_one_lands(tmp_path) -> None:
    root = tmp_path / "t"
    log = create(root, "a", "b")
    for round_ in range(3):
        read_version = log.latest_version()
        before = log.snapshot()
        reports = race(
            tmp_path,
            root,
            [
                {"mode": "overwrite", "name": f"r{round_}-x", "read_version": read_version},
                {"mode": "overwrite", "name": f"r{round_}-y", "read_version": read_version},
            ],
        )
        winners = [r for r in reports.values() if r["versions"]]
        losers = [r for r in reports.values() if "error" in r]
        assert len(winners) == 1 and len(losers) == 1, reports
        assert winners[0]["versions"] == [read_version + 1]
        assert "CommitConflictError" in losers[0]["error_mro"], losers
        assert losers[0]["error"] in (ConcurrentReplaceError.__name__, ConcurrentLineageError.__name__)
        s = assert_log_is_sound(log)
        assert s.version == read_version + 1
        assert s.visible_segment_ids() == [winners[0]["name"]]
        assert losers[0]["name"] not in s.segments  # nothing of the loser, not even hidden
        assert set(before.visible_segment_ids()) <= {sid for sid, st in s.segments.items() if st.removed_version == s.version}


# -- (c) a consistent push racing with appends ---------------------------------------------------
def test_consistent_push_racing_with_appends(tmp_path) -> None:
    root = tmp_path / "t"
    log = create(root, "b1", "b2", "b3")
    reports = race(
        tmp_path,
        root,
        [
            {"mode": "push", "name": "push"},
            {"mode": "append", "name": "w0", "count": 10, "fresh": True, "pause": 0.003, "until_completed": "push"},
            {"mode": "append", "name": "w1", "count": 10, "pause": 0.003, "until_completed": "push"},
        ],
    )
    s = assert_log_is_sound(log)
    counts = {w: len(reports[w]["versions"]) for w in ("w0", "w1")}
    assert min(counts.values()) >= 10
    appended = {f"{w}-{j}" for w, n in counts.items() for j in range(n)}
    assert s.version == 1 + 3 + sum(counts.values())
    assert s.lineage["push"].state == LineageState.COMPLETED
    assert s.lineage["push"].segments_from == ("b1", "b2", "b3")
    assert set(s.visible_segment_ids()) == appended | {"push-0", "push-1"}  # appends never conflict with a push

    started, uploaded, ended = reports["push"]["versions"]
    assert started < uploaded < ended
    during = log.snapshot(ended - 1)  # the push is IN_PROGRESS: readers still see the old data
    assert during.lineage["push"].state == LineageState.IN_PROGRESS
    landed_during = [v for r in (reports["w0"], reports["w1"]) for v in r["versions"] if started < v < ended]
    assert landed_during, "no append landed while the push was running"
    assert {"b1", "b2", "b3"} <= set(during.visible_segment_ids())
    assert not {"push-0", "push-1"} & set(during.visible_segment_ids())


# -- (d) CommitStateUnknownError -------------------------------------------------------------------
class FlakyIO:
    """Wraps a FileIO; the next ``failures`` puts of commit files raise CommitStateUnknownError.

    mode "write-then-fail": the write lands, the answer is lost.
    mode "fail": nothing is written.
    mode "late": nothing is written now, but the write lands later (before the next put).
    mode "foreign": someone else's commit lands at that version, then the error.
    """

    def __init__(self, inner: LocalFileIO, mode: str, failures: int = 1) -> None:
        self.inner, self.mode, self.failures = inner, mode, failures
        self.pending: list[tuple[str, bytes]] = []
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def put_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        for late_path, late_data in self.pending:
            self.inner.put_if_absent(late_path, late_data)
        self.pending.clear()
        if path.endswith(".checkpoint.parquet"):
            return self.inner.put_if_absent(path, data)
        self.calls += 1
        if self.failures <= 0:
            return self.inner.put_if_absent(path, data)
        self.failures -= 1
        if self.mode == "write-then-fail":
            self.inner.put_if_absent(path, data)
        elif self.mode == "late":
            self.pending.append((path, data))
        elif self.mode == "foreign":
            other = CommitLog(self.inner, check_files=False)
            other.commit(read=other.snapshot(), operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg("foreign"))])
        raise CommitStateUnknownError(f"simulated: the store did not answer for {path}")


def flaky_log(tmp_path: Path, mode: str, failures: int = 1) -> tuple[CommitLog, FlakyIO]:
    create(tmp_path, "a")
    io = FlakyIO(LocalFileIO(str(tmp_path)), mode, failures)
    return CommitLog(io, retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.01), check_files=False), io


def append_c(log: CommitLog):
    return log.commit(read=log.snapshot(), operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg("c"))])


def test_unknown_state_but_the_write_landed(tmp_path) -> None:
    log, io = flaky_log(tmp_path, "write-then-fail")
    result = append_c(log)
    assert result.commit.version == 2 and io.calls == 1
    s = assert_log_is_sound(log)
    assert s.version == 2 and s.visible_segment_ids() == ["a", "c"]
    assert log.read_commit(2).parameters["txn"] == result.commit.parameters["txn"]
    assert result.snapshot == s


@pytest.mark.parametrize("failures", [1, 3])
def test_unknown_state_and_nothing_written_retries_and_lands(tmp_path, failures: int) -> None:
    log, io = flaky_log(tmp_path, "fail", failures)
    result = append_c(log)
    assert io.calls == failures + 1
    s = assert_log_is_sound(log)
    assert result.commit.version == s.version == 2
    assert s.visible_segment_ids() == ["a", "c"]


def test_unknown_state_and_the_write_lands_late(tmp_path) -> None:
    """The retry finds our own earlier write in its place: success, not a duplicate or conflict."""
    log, io = flaky_log(tmp_path, "late")
    result = append_c(log)
    s = assert_log_is_sound(log)
    assert s.version == 2 and s.visible_segment_ids() == ["a", "c"]
    assert result.commit == log.read_commit(2)
    assert result.snapshot == s


def test_unknown_state_and_someone_else_won_the_version(tmp_path) -> None:
    log, io = flaky_log(tmp_path, "foreign")
    result = append_c(log)
    s = assert_log_is_sound(log)
    assert result.commit.version == 3 and s.version == 3
    assert s.visible_segment_ids() == ["a", "foreign", "c"]


def test_unknown_state_when_the_store_cannot_even_be_read(tmp_path) -> None:
    """The put failed ambiguously and reading back fails too: the caller must be told the
    outcome is unknown (not get a bare OSError that looks like a plain failure)."""
    log, io = flaky_log(tmp_path, "fail")
    read = log.snapshot()

    def broken_read(path: str) -> bytes:
        raise OSError("connection reset")

    io.read = broken_read  # an instance attribute wins over __getattr__
    with pytest.raises(CommitStateUnknownError):
        log.commit(read=read, operation=Operation.APPEND, build=lambda s: [AddSegment(segment=seg("d"))])
    assert CommitLog(LocalFileIO(str(tmp_path))).snapshot().version == 1


def test_conflict_errors_are_commit_conflicts() -> None:
    assert issubclass(ConcurrentReplaceError, CommitConflictError)
    assert issubclass(ConcurrentLineageError, CommitConflictError)
    assert not issubclass(CommitStateUnknownError, CommitConflictError)
