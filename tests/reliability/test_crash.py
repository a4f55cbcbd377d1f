"""Crash consistency: SIGKILL the writing process at every step of every operation.

Each trial builds a table with some history, records what every version shows, then runs
one operation in a separate process with ``MVTABLE_FAULT`` armed at one step (forked from a
fork server that has the imports done: ``crash_child.py``). After the
kill the table must open, show exactly one committed snapshot (the one before the
operation or the one after it, as the step dictates), have lost no committed version,
and accept the next writer, the next GC and the next vacuum."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support import forked

from mvtable.connector import Table
from mvtable.errors import FilesMissingError, VersionNotFoundError

from . import crash_child

PROPS = {
    "rowGroupRows": "8",
    "checkpointInterval": "4",
    "versionRetentionPeriod": "0s",
    "replacedSegmentsRetentionPeriod": "0s",
    "lineageEntryCleanupRetentionPeriod": "0s",
    "orphanGracePeriod": "0s",
}

# operation -> script run in the child (``t`` is the table, ``arg`` a JSON argument)
OPERATIONS = {
    "append": "t.append(rows(arg))",
    "overwrite": "t.overwrite(rows(arg))",
    "push": "t.overwrite(rows(arg), consistent_push=True)",
    # the same push, on a table where an earlier push's process was killed mid-write: its
    # start reverts that dead push in the same commit (the lease is 5m: the pid decides)
    "recover": "t.overwrite(rows(arg), consistent_push=True)",
    "delete": "t.delete(pc.field('id') < arg)",
    "rollback": "t.rollback(entry=arg)",
    "restore": "t.restore(version=arg)",
    "gc": "t.collect_garbage(batch_bytes=40, force=True)",  # orphanGracePeriod 0s
    "vacuum": "t.vacuum(batch_bytes=40, force=True)",
    # two bins (the push's worn segment, three plain appends), one commit each
    "compact": "t.compact(min_input_files=2, delete_ratio=0.01, max_bytes_per_commit=1)",
}

# (kill point, operation, which snapshot the table must show afterwards)
KILL_POINTS = [
    ("commit.APPEND.before_put", "append", "before"),
    ("write.after_files", "append", "before"),
    ("commit.APPEND.after_put", "append", "after"),
    ("commit.OVERWRITE.before_put", "overwrite", "before"),
    ("commit.OVERWRITE.after_put", "overwrite", "after"),
    ("commit.PUSH_START.before_put", "push", "before"),
    ("commit.PUSH_START.after_put", "push", "before"),  # entry IN_PROGRESS, invisible
    ("write.after_files", "push", "before"),
    ("commit.CONSISTENT_PUSH.before_put", "push", "before"),
    ("commit.CONSISTENT_PUSH.after_put", "push", "after"),
    ("delete.after_dv_files", "delete", "before"),
    ("commit.DELETE.before_put", "delete", "before"),
    ("commit.DELETE.after_put", "delete", "after"),
    ("commit.ROLLBACK.before_put", "rollback", "before"),
    ("commit.ROLLBACK.after_put", "rollback", "after"),
    ("commit.RESTORE.before_put", "restore", "before"),
    ("commit.RESTORE.after_put", "restore", "after"),
    ("checkpoint.before_write", "append", "after"),
    ("checkpoint.after_write", "append", "after"),
    ("gc.after_batch:1", "gc", "before"),
    ("gc.after_batch:2", "gc", "before"),
    ("vacuum.after_retention_commit", "vacuum", "before"),
    ("vacuum.after_data_batch", "vacuum", "before"),
    # a compaction changes no row: "before" is also "after"
    ("compact.after_outputs", "compact", "before"),
    ("commit.COMPACT.before_put", "compact", "before"),
    ("commit.COMPACT.after_put", "compact", "before"),
    ("compact.after_batch", "compact", "before"),
    # recovery: killed before and after the commit that reverts the dead push and starts its own
    ("commit.PUSH_START.before_put", "recover", "before"),
    ("commit.PUSH_START.after_put", "recover", "before"),  # now its own entry is the dead one
    ("write.after_files", "recover", "before"),
    ("commit.CONSISTENT_PUSH.after_put", "recover", "after"),
]
TRIALS = 2

CHILD = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa, pyarrow.compute as pc
    from mvtable.connector import Table
    def rows(spec):
        start, n = spec
        return pa.table({"id": pa.array(range(start, start + n), pa.int64())})
    t = Table.open(sys.argv[1])
    arg = json.loads(sys.argv[2])
    """
)


def ids(t: Table, **kw) -> list[int]:
    return sorted(t.scan(**kw).to_arrow().column("id").to_pylist())


def build_history(path: str, rng: random.Random) -> tuple[Table, dict[int, list[int]], str]:
    t = Table.create(path, schema=pa.schema([("id", pa.int64())]), properties=PROPS)
    t.append(pa.table({"id": pa.array(range(0, rng.randint(5, 40)), pa.int64())}))
    t.append(pa.table({"id": pa.array(range(100, 100 + rng.randint(5, 40)), pa.int64())}))
    t.overwrite(pa.table({"id": pa.array(range(200, 200 + rng.randint(5, 40)), pa.int64())}), consistent_push=True)
    entry = t.lineage()[-1].id
    t.delete(pc.field("id") < 200 + rng.randint(1, 4))
    versions = {h.version: ids(t, version=h.version) for h in t.history()}
    return t, versions, entry


def expected_after(op: str, before: list[int], versions: dict[int, list[int]], arg) -> list[int]:
    if op in ("append",):
        return sorted(before + list(range(arg[0], arg[0] + arg[1])))
    if op in ("overwrite", "push", "recover"):
        return list(range(arg[0], arg[0] + arg[1]))
    if op == "delete":
        return [i for i in before if i >= arg]
    if op == "rollback":
        return versions[2]  # the snapshot the push replaced
    if op == "restore":
        return versions[arg]
    return before  # gc, vacuum change no visible row


def arg_for(op: str, rng: random.Random, entry: str, t: Table):
    if op in ("append", "overwrite", "push", "recover"):
        return [1000 + rng.randint(0, 50), rng.randint(3, 30)]
    if op == "delete":
        return 200 + rng.randint(5, 9)
    if op == "rollback":
        return entry
    if op == "restore":
        return 1
    return None


@pytest.mark.parametrize("point,op,state", KILL_POINTS, ids=[f"{p}-{o}" for p, o, _ in KILL_POINTS])
@pytest.mark.parametrize("trial", range(TRIALS))
def test_kill_at_step_leaves_one_committed_snapshot(tmp_path, point, op, state, trial):
    rng = random.Random(f"{point}-{op}-{trial}")
    t, versions, entry = build_history(str(tmp_path / "t"), rng)
    if point.startswith("checkpoint"):
        while (t.version + 1) % 4:  # land the append on a checkpoint version
            t.append(pa.table({"id": pa.array([5000 + t.version], pa.int64())}))
            versions[t.version] = ids(t)
    if op == "compact":
        for k in range(3):  # small plain segments beside the push's
            t.append(pa.table({"id": pa.array(range(3000 + 10 * k, 3005 + 10 * k), pa.int64())}))
            versions[t.version] = ids(t)
    if op == "recover":  # a push whose process dies with its entry IN_PROGRESS
        dead = run_child("push", t.uri, [4000, 5], "write.after_files")
        assert dead.returncode == -signal.SIGKILL, dead.stderr[-2000:]
        (dead_entry,) = [e.id for e in t.lineage() if e.state == "IN_PROGRESS"]
        versions[t.version] = ids(t)
    before_version = t.version
    before = ids(t)
    arg = arg_for(op, rng, entry, t)
    after = expected_after(op, before, versions, arg)

    child = run_child(op, t.uri, arg, point)
    assert child.returncode == -signal.SIGKILL, f"the kill point was not reached: {child.stderr[-2000:]}"

    t = Table.open(t.uri)
    now = ids(t)
    assert now == (before if state == "before" else after)
    if op == "recover":
        reverted = point != "commit.PUSH_START.before_put"  # the reverting commit landed
        assert {e.id: e.state for e in t.lineage()}[dead_entry] == ("REVERTED" if reverted else "IN_PROGRESS")
    if op == "compact":  # the next run picks up what is left, and then there is nothing left
        landed = point in ("commit.COMPACT.after_put", "compact.after_batch")  # the first batch committed
        assert t.compact(min_input_files=2, delete_ratio=0.01).committed_bins == (1 if landed else 2)
        assert t.compact(min_input_files=2, delete_ratio=0.01).bins == 0
        assert len(t.snapshot().visible_segment_ids()) == 2
        assert ids(t) == now
    # nothing committed is lost (GC/vacuum may only drop versions outside retention, typed)
    for v, content in versions.items():
        if v > before_version:
            continue
        try:
            assert ids(t, version=v) == content, f"version {v} changed"
        except (VersionNotFoundError, FilesMissingError):
            assert op in ("gc", "vacuum") or v < t.version - 100, f"version {v} lost after killing {op}"
    # the next writer, GC and vacuum succeed
    t.append(pa.table({"id": pa.array([99_999], pa.int64())}))
    assert ids(t) == sorted(now + [99_999])
    assert t.collect_garbage(force=True).complete
    assert t.vacuum(force=True).complete
    assert ids(t) == sorted(now + [99_999])
    # and nothing the newest version needs was removed by them (retention is 0s here)
    assert ids(Table.open(t.uri), version=t.version) == sorted(now + [99_999])
    # the very next push (another process than the killed one) goes through at once, even
    # over a push the kill left IN_PROGRESS: its owner is provably dead, no lease to wait for
    started = time.perf_counter()
    t.overwrite(pa.table({"id": pa.array([7, 8], pa.int64())}), consistent_push=True)
    assert time.perf_counter() - started < 30  # a lease would be 5 minutes
    assert ids(t) == [7, 8]
    assert not [e for e in t.lineage() if e.state == "IN_PROGRESS"]


_FORKS = forked.context()  # the kill tests' fork server (support.forked), its imports done


@pytest.fixture(scope="module", autouse=True)
def _stop_fork_server() -> Iterator[None]:
    """The fork server starts with the first trial; stop it with this module (it would
    otherwise live until pytest exits)."""
    yield
    forked.stop_fork_server()


def run_child(op: str, uri: str, arg, point: str) -> subprocess.CompletedProcess:
    """Run ``op`` in a fresh process with the kill point ``point`` armed (forked from a
    server that has the imports done; see ``crash_child.py``)."""
    with tempfile.TemporaryDirectory(prefix="mvtable-crash-") as tmp:
        err = os.path.join(tmp, "stderr")
        proc = _FORKS.Process(target=crash_child.run, args=(CHILD + OPERATIONS[op], uri, json.dumps(arg), point, err))
        proc.start()
        proc.join(120)
        if proc.is_alive():
            proc.kill()
            proc.join()
        stderr = open(err).read() if os.path.exists(err) else ""
    return subprocess.CompletedProcess(["crash-child", op, point], proc.exitcode, "", stderr)


def test_every_kill_point_is_distinct_and_counted():
    points = {(p, o) for p, o, _ in KILL_POINTS}
    assert len(points) == len(KILL_POINTS) == 31
    assert {o for _, o in points} == set(OPERATIONS)
