"""A reader running while another process pushes sees exactly one snapshot per read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from mvtable.connector import Table
from tests.support.spark_session import assert_route

PUSHES = 12


def snapshot_rows(k: int) -> tuple[int, int]:
    start, n = k * 1000, 100 + 7 * k
    return start, n


def expected(k: int) -> tuple[int, int]:
    start, n = snapshot_rows(k)
    return n, sum(range(start, start + n))


PUSHER = textwrap.dedent(
    """
    import os, sys, time
    import pyarrow as pa
    from mvtable.connector import Table
    path, most, pause, stop = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    t = Table.open(path)
    k = 0
    while k < most and not (stop and os.path.exists(stop)):
        k += 1
        start, n = k * 1000, 100 + 7 * k
        # several segments per push, so a torn read would show up as a mix
        data = pa.table({"id": pa.array(range(start, start + n), pa.int64())})
        t.overwrite(data, consistent_push=True)
        time.sleep(pause)
    print(k)
    """
)


@pytest.fixture
def pushed_table(tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=pa.schema([("id", pa.int64())]), properties={"rowGroupRows": "16"})
    start, n = snapshot_rows(0)
    t.append(pa.table({"id": pa.array(range(start, start + n), pa.int64())}))
    return path


def run_pusher(path: str, *, pause_s: float, most: int = PUSHES, stop_file: str = "") -> subprocess.Popen:
    """Push ``most`` times, or until ``stop_file`` exists; prints how many pushes landed."""
    args = [sys.executable, "-c", PUSHER, path, str(most), str(pause_s), stop_file]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def test_table_reader_sees_whole_snapshots(pushed_table):
    valid = {expected(k) for k in range(PUSHES + 1)}
    pusher = run_pusher(pushed_table, pause_s=0.05)
    seen = set()
    reads = 0
    deadline = time.monotonic() + 120
    t = Table.open(pushed_table)
    while time.monotonic() < deadline:
        ids = t.scan().to_arrow().column("id")
        got = (len(ids), sum(ids.to_pylist()))
        assert got in valid, f"torn read: {got}"
        seen.add(got)
        reads += 1
        if pusher.poll() is not None:
            break
    assert pusher.wait(timeout=60) == 0
    assert reads > 5 and len(seen) > 2  # it really overlapped with several pushes
    assert (len(Table.open(pushed_table).to_arrow()),) == (expected(PUSHES)[0],)


@pytest.mark.spark
def test_spark_reader_sees_whole_snapshots(spark, pushed_table, tmp_path, read_route):
    """Spark reads while pushes land back to back: each read spans several pushes (a read
    takes ~0.5-1 s here, a push ~0.1 s), so a torn read would show.  Reads start once the
    first push has landed (the pusher's interpreter takes a moment to start) and go on
    until at least 4 reads saw at least 2 snapshots; then the pusher is told to stop,
    instead of pacing itself to an estimate of the read time."""
    most = 5000  # a bound for a runaway pusher only: the reads stop it
    valid = {expected(k) for k in range(most + 1)}
    stop = tmp_path / "stop"
    first = Table.open(pushed_table).version
    assert_route(spark.read.format("mvtable").load(pushed_table), read_route)
    pusher = run_pusher(pushed_table, pause_s=0.05, most=most, stop_file=str(stop))
    seen = set()
    reads = 0
    try:
        deadline = time.monotonic() + 120
        while Table.open(pushed_table).version == first and pusher.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        while (reads < 4 or len(seen) < 2) and pusher.poll() is None and time.monotonic() < deadline:
            row = spark.read.format("mvtable").load(pushed_table).selectExpr("count(*) AS n", "sum(id) AS s").first()
            got = (row.n, row.s)
            assert got in valid, f"torn read: {got}"
            seen.add(got)
            reads += 1
    finally:
        stop.touch()
        out, _ = pusher.communicate(timeout=120)
    assert pusher.returncode == 0
    pushes = int(out)
    assert pushes < most, "the pusher ran out of pushes before the reads were done"
    assert reads >= 4 and len(seen) >= 2, (reads, seen)
    t = Table.open(pushed_table)
    assert [h.operation for h in t.history()].count("CONSISTENT_PUSH") == pushes
    # starting each push dropped the snapshots older than the previous one
    assert [e.state for e in t.lineage()] == ["COMPLETED", "COMPLETED"]
