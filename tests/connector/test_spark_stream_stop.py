"""Stopping a streaming query into mvtable in the middle of a micro-batch.

``query.stop()`` interrupts the batch in flight; Spark logs that the write "is aborting" and,
when the interrupt cuts the abort short, that it "failed to abort": the files of the tasks
that finished then stay. They carry the query's prefix, and the query's first commit after
it starts again removes them (its batch runs again with new files)."""

from __future__ import annotations

import pytest

from tests.support.spark_scripts import run_spark_script

pytestmark = pytest.mark.spark


def test_files_of_a_batch_stopped_in_flight_are_removed_when_the_query_starts_again(tmp_path):
    path, chk, flag = str(tmp_path / "t"), str(tmp_path / "chk"), str(tmp_path / "release")
    done = run_spark_script(
        f"""
        import os, time
        from pyspark.sql import functions as F
        from mvtable.connector import Table

        path, chk, flag = {path!r}, {chk!r}, {flag!r}

        def hold(v, part):  # partition 1 waits until released: stop() finds its batch in flight
            while part == 1 and not os.path.exists(flag):
                time.sleep(0.2)
            return v

        held = F.udf(hold, "long")

        def start():
            rows = spark.readStream.format("rate").option("rowsPerSecond", 50).option("numPartitions", 2).load()
            return (rows.select(held("value", F.spark_partition_id()).alias("id")).writeStream.format("mvtable")
                    .option("checkpointLocation", chk).trigger(processingTime="1 second").start(path))

        def data_files():
            return sorted(os.listdir(os.path.join(path, "data"))) if os.path.isdir(os.path.join(path, "data")) else []

        q = start()
        deadline = time.time() + 120
        while not data_files() and time.time() < deadline:  # partition 0 wrote its segment, 1 is held
            time.sleep(0.2)
        q.stop()  # mid-batch: Spark aborts the batch; the abort itself may be cut short

        from dataclasses import replace
        import pyarrow as pa
        from mvtable.connector import writes
        from mvtable.connector.streaming.sink import is_marked, query_app_id, query_segment_prefix

        def uncommitted(prefix):  # a real segment no commit names, as a task of the stopped batch leaves it
            plan = writes.begin_write(path, storage_options=None, incoming=pa.schema([("id", pa.int64())]), mode="append", pin=False)
            [seg] = writes.write_data(replace(plan, segment_prefix=prefix), pa.table({{"id": [1, 2]}}).to_batches())
            return os.path.basename(seg.path)

        committed = lambda: {{os.path.basename(s.file.path) for s in Table.open(path).snapshot().segments.values()}} if os.path.isdir(os.path.join(path, "_mvtable")) else set()
        prefix = query_segment_prefix(query_app_id(chk))
        left_by_stop = [f for f in data_files() if is_marked(f, prefix) and f not in committed()]
        stray = [*left_by_stop, uncommitted(prefix)]
        foreign = uncommitted("")  # another writer's file in flight: not the query's to remove

        open(flag, "w").close()
        q = start()
        deadline = time.time() + 120
        while time.time() < deadline and not any(is_marked(f, prefix) and f in committed() for f in data_files() if f not in stray):
            time.sleep(0.5)
        q.stop()
        emit(dict(stray=stray, left=[f for f in stray if f in data_files()], foreign=foreign in data_files(),
                  version=Table.open(path).version, left_by_stop=left_by_stop,
                  restarted=any(is_marked(f, prefix) and f in committed() for f in data_files() if f not in stray)))
        """,
        register=True,
        timeout=300,
    )
    [r] = done.result
    assert r["stray"] and r["left"] == [], r  # the query's uncommitted files are gone after its restart
    assert r["foreign"] and r["version"] >= 0
    assert r["restarted"], r  # the restarted query committed a batch of its own (files with its marker)


def test_stop_stream_waits_for_the_batch_in_flight_and_nothing_is_aborted(tmp_path):
    path, chk, flag = str(tmp_path / "t"), str(tmp_path / "chk"), str(tmp_path / "release")
    done = run_spark_script(
        f"""
        import os, threading, time
        from pyspark.sql import functions as F
        import mvtable
        from mvtable.connector import Table

        path, chk, flag = {path!r}, {chk!r}, {flag!r}

        def hold(v, part):  # partition 1 waits until released: the batch is in flight
            if part == 1 and not os.path.exists(flag):
                open(flag + ".held", "w").close()
            while part == 1 and not os.path.exists(flag):
                time.sleep(0.2)
            return v

        held = F.udf(hold, "long")
        rows = spark.readStream.format("rate").option("rowsPerSecond", 50).option("numPartitions", 2).load()
        q = (rows.select(held("value", F.spark_partition_id()).alias("id")).writeStream.format("mvtable")
             .option("checkpointLocation", chk).trigger(processingTime="2 seconds").start(path))
        deadline = time.time() + 120
        while time.time() < deadline and not os.path.exists(flag + ".held"):
            time.sleep(0.05)  # a batch with rows is running, partition 1 held (the first batch may be empty)
        threading.Timer(3, lambda: open(flag, "w").close()).start()
        started = time.time()
        between = mvtable.stop_stream(q, timeout=60)
        waited = time.time() - started
        committed = {{os.path.basename(s.file.path) for s in Table.open(path).snapshot().segments.values()}}
        files = sorted(os.listdir(os.path.join(path, "data")))
        emit(dict(between=between, waited=waited, active=q.isActive, left=[f for f in files if f not in committed],
                  rows=Table.open(path).to_arrow().num_rows))
        """,
        register=True,
        timeout=300,
    )
    [r] = done.result
    assert r["between"] is True and not r["active"], r
    assert r["waited"] >= 2, r  # it waited for the held batch instead of interrupting it
    assert r["left"] == [] and r["rows"] > 0, r  # the batch committed; no file of an aborted one
    assert "is aborting" not in done.stderr and "failed to abort" not in done.stderr
