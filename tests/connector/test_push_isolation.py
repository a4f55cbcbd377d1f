"""A reader running while another process pushes sees exactly one snapshot per read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pytest

from mvtable.connector import Table

PUSHES = 12


def snapshot_rows(k: int) -> tuple[int, int]:
    start, n = k * 1000, 100 + 7 * k
    return start, n


def expected(k: int) -> tuple[int, int]:
    start, n = snapshot_rows(k)
    return n, sum(range(start, start + n))


PUSHER = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    from mvtable.connector import Table
    t = Table.open(sys.argv[1])
    for k in range(1, int(sys.argv[2]) + 1):
        start, n = k * 1000, 100 + 7 * k
        # several segments per push, so a torn read would show up as a mix
        data = pa.table({"id": pa.array(range(start, start + n), pa.int64())})
        t.overwrite(data, consistent_push=True)
        time.sleep(float(sys.argv[3]))
    """
)


@pytest.fixture
def pushed_table(tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=pa.schema([("id", pa.int64())]), properties={"rowGroupRows": "16"})
    start, n = snapshot_rows(0)
    t.append(pa.table({"id": pa.array(range(start, start + n), pa.int64())}))
    return path


def run_pusher(path: str, *, pause_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PUSHER, path, str(PUSHES), str(pause_s)])


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
def test_spark_reader_sees_whole_snapshots(spark, pushed_table):
    valid = {expected(k) for k in range(PUSHES + 1)}
    pusher = run_pusher(pushed_table, pause_s=1.0)  # a Spark read takes ~1 s here
    seen = set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        row = spark.read.format("mvtable").load(pushed_table).selectExpr("count(*) AS n", "sum(id) AS s").first()
        got = (row.n, row.s)
        assert got in valid, f"torn read: {got}"
        seen.add(got)
        if pusher.poll() is not None:
            break
    assert pusher.wait(timeout=120) == 0
    assert len(seen) >= 2
    t = Table.open(pushed_table)
    assert [h.operation for h in t.history()].count("CONSISTENT_PUSH") == PUSHES
    # starting each push dropped the snapshots older than the previous one
    assert [e.state for e in t.lineage()] == ["COMPLETED", "COMPLETED"]
