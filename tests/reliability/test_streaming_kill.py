"""SIGKILL the Spark driver (JVM, Python and its workers at once) of a running
source -> sink streaming query, restart it from the same checkpoint, and check that every
row of the source is in the sink exactly once: the source emitted each version once and the
sink committed each micro-batch once, whatever the kill interrupted.  The killed driver runs
in a subprocess; the restart runs in this process's shared session (any driver resumes
from the checkpoint, and a second subprocess driver would cost another JVM start)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from support.spark_scripts import run_spark_script

from mvtable.connector import Table

from ..connector.conftest import orders

pytestmark = pytest.mark.spark

QUERY = """
import os, random, signal, time
from mvtable.connector import Table
src, dst, ck, kill_after = {src!r}, {dst!r}, {ck!r}, {kill_after!r}
df = spark.readStream.format("mvtable").option("maxRowsPerTrigger", "20").load(src)
w = df.writeStream.format("mvtable").option("checkpointLocation", ck)
q = w.trigger(processingTime="0 seconds").start(dst)
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    try:
        if Table.open(dst).version >= kill_after:
            break
    except Exception:
        pass
    time.sleep(0.02)
time.sleep(random.Random(kill_after).uniform(0, 0.5))  # anywhere in the next batch
os.killpg(0, signal.SIGKILL)
"""


def test_killed_driver_restarts_from_its_checkpoint_exactly_once(spark, tmp_path):
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    t = Table.create(src, schema=orders(0, 1).schema)
    for i in range(12):
        t.append(orders(i * 100, 20))  # one segment of 20 rows per version: one batch each
    kill_after = random.randint(1, 4)
    killed = run_spark_script(
        QUERY.format(src=src, dst=dst, ck=ck, kill_after=kill_after), register=True, check=False, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    committed = Table.open(dst).version
    assert committed >= kill_after
    t.append(orders(5000, 20))  # more data while the query is down
    df = spark.readStream.format("mvtable").option("maxRowsPerTrigger", "20").load(src)
    q = df.writeStream.format("mvtable").option("checkpointLocation", ck).trigger(availableNow=True).start(dst)
    try:
        assert q.awaitTermination(300), "the restarted query did not finish"
        assert q.exception() is None
    finally:
        q.stop()
    got = Counter(Table.open(dst).to_arrow().column("id").to_pylist())
    assert got == Counter(Table.open(src).to_arrow().column("id").to_pylist())
    assert max(got.values()) == 1
    history = Table.open(dst).history()
    batch_ids = [h.parameters["batchId"] for h in history]
    assert batch_ids == sorted(set(batch_ids)), "a micro-batch was committed twice"
    assert len({h.parameters["appId"] for h in history}) == 1  # the query kept its id across the restart
