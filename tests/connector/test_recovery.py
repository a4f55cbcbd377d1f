"""A crashed writer never blocks the table: real processes own pushes, die, stop or stay
alive, and the next push cleans up, refuses with a typed error, or waits for a person."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from mvtable.connector import Table, cli, recovery
from mvtable.connector.recovery.owner import probe, process_owner
from mvtable.errors import PushInProgressError, StagedPushError

START_AND_WAIT = textwrap.dedent(
    """
    import sys, pyarrow as pa
    from mvtable.connector import recovery, writes
    plan = writes.begin_write(sys.argv[1], storage_options=None, incoming=pa.schema([("id", pa.int64())]),
                              mode="overwrite", consistent_push=True)
    with recovery.keep_lease(writes.open_file_io(plan.uri, {}), plan.entry_id, lease_ms=plan.lease_ms):
        print(plan.entry_id, flush=True)
        sys.stdin.read()  # hold the push until the test closes stdin
    """
)


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def ids(t: Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def make(tmp_path, **props: str) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties=props)
    t.append(rows(1, 2, 3))
    return t


def holder(t: Table) -> tuple[subprocess.Popen, str]:
    """A live process that has started a push on ``t`` and keeps its lease."""
    p = subprocess.Popen([sys.executable, "-c", START_AND_WAIT, t.uri], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    entry = p.stdout.readline().strip()
    assert entry.startswith("push-"), entry
    return p, entry


def test_push_after_sigkill_recovers_at_once_and_says_so(tmp_path):
    t = make(tmp_path, pushLeasePeriod="1h")  # a long lease: only the dead process can explain the recovery
    p, dead = holder(t)
    p.kill()
    p.wait()
    started = time.perf_counter()
    t.overwrite(rows(7, 8), consistent_push=True)
    assert time.perf_counter() - started < 5
    assert ids(t) == [7, 8]
    views = {e.id: e for e in t.lineage()}
    assert views[dead].state == "REVERTED"
    assert f"pid {p.pid}" in (views[dead].revert_reason or "") and "no longer runs" in (views[dead].revert_reason or "")
    start = [h for h in t.history() if h.operation == "PUSH_START"][-1]
    assert start.parameters["recovered"][0]["entry"] == dead
    assert not t.io.exists(recovery.lease_path(dead))


def test_live_owner_gets_a_typed_error_naming_entry_owner_and_lease(tmp_path, capsys):
    t = make(tmp_path, pushLeasePeriod="1h")
    p, entry = holder(t)
    try:
        with pytest.raises(PushInProgressError) as err:
            t.overwrite(rows(9), consistent_push=True)
        assert err.value.entry_id == entry and err.value.owner == f"pid {p.pid} on {os.uname().nodename}"
        assert err.value.lease_expires_ms is not None and err.value.lease_expires_ms > time.time() * 1000 + 3000_000
        assert ids(t) == [1, 2, 3]
        # `mvtable lineage` shows the owner, the lease and what the next push would do
        assert cli.main(["lineage", t.uri]) == 0
        out = capsys.readouterr().out
        assert f"pid {p.pid}" in out and "lease until" in out and "alive" in out
        assert cli.main(["lineage", t.uri, "--json"]) == 0
        (view,) = json.loads(capsys.readouterr().out)
        assert view["owner"] == f"pid {p.pid} on {os.uname().nodename}" and view["status"].startswith("alive")
    finally:
        p.communicate("")
    assert p.returncode == 0


def test_stopped_owner_is_cleaned_up_once_its_lease_runs_out(tmp_path):
    """SIGSTOP freezes the owner and its renewal thread: the process exists, the lease decides."""
    t = make(tmp_path, pushLeasePeriod="1s")
    p, entry = holder(t)
    os.kill(p.pid, signal.SIGSTOP)
    try:
        lease = recovery.read_lease(t.io, entry)
        assert lease is not None
        time.sleep(max(0.0, lease / 1000 - time.time()) + 0.2)
        t.overwrite(rows(5), consistent_push=True)
        assert ids(t) == [5]
        reason = {e.id: e for e in t.lineage()}[entry].revert_reason or ""
        assert "lease expired" in reason
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def test_lease_file_renewals_extend_the_lease_without_commits(tmp_path):
    t = make(tmp_path, pushLeasePeriod="1s")
    p, entry = holder(t)
    try:
        version = t.version
        first = recovery.read_lease(t.io, entry)
        time.sleep(0.8)
        later = recovery.read_lease(t.io, entry)
        assert first is not None and later is not None and later > first
        assert t.version == version  # heartbeats never commit
        with pytest.raises(PushInProgressError):  # 0.8 s > what the start recorded, yet renewed
            t.overwrite(rows(9), consistent_push=True)
    finally:
        p.communicate("")


def test_torn_lease_file_is_ignored_not_trusted(tmp_path):
    t = make(tmp_path)
    t.io.write(recovery.lease_path("push-x"), b'{"format": 1, "entry_id": "push-y", "expires_ms": 99999999999999}')
    assert recovery.read_lease(t.io, "push-x") is None
    t.io.write(recovery.lease_path("push-x"), b"{not json")
    assert recovery.read_lease(t.io, "push-x") is None


def test_staged_push_needs_a_person(tmp_path):
    t = make(tmp_path)
    t.overwrite(rows(4), consistent_push=True, publish=False)
    (staged,) = [e for e in t.lineage() if e.state == "IN_PROGRESS"]
    assert staged.status is not None and staged.status.startswith("staged")
    with pytest.raises(StagedPushError, match="publish or rollback it first") as err:
        t.overwrite(rows(5), consistent_push=True)
    assert err.value.entry_id == staged.id
    t.vacuum(retention="0s", force=True, now_ms=int(time.time() * 1000) + 30 * 86_400_000)  # a month later
    assert {e.id: e.state for e in t.lineage()}[staged.id] == "IN_PROGRESS"  # vacuum leaves it alone too
    t.publish(staged.id)
    t.overwrite(rows(6), consistent_push=True)
    assert ids(t) == [6]


def test_vacuum_reverts_a_dead_push(tmp_path):
    t = make(tmp_path, pushLeasePeriod="1h")
    p, dead = holder(t)
    p.kill()
    p.wait()
    report = t.vacuum()
    assert report.entries_purged == 1
    view = {e.id: e for e in t.lineage()}[dead]
    assert view.state == "REVERTED" and "cleaned up by vacuum" in (view.revert_reason or "")
    assert ids(t) == [1, 2, 3]


def test_a_killed_owner_not_yet_reaped_counts_as_dead():
    """A zombie keeps its /proc entry (and start time) until its parent collects it."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = process_owner(p.pid)
        assert owner.start_ticks is not None and probe(owner) == (False, f"pid {p.pid} on {owner.host} is running")
        os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not probe(owner)[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(f"/proc/{p.pid}/stat") as f:
            assert f.read().split(") ")[1][0] == "Z"  # not reaped yet: still in /proc
        assert probe(owner)[0]
    finally:
        p.kill()
        p.wait()
