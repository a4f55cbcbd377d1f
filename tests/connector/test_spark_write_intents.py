"""A vacuum while Spark tasks write: the driver's write intent covers every task's files."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.write_intents import INTENT_DIR
from tests.support.spark_session import spark_conf

pytestmark = pytest.mark.spark

PROPS = {"orphanGracePeriod": "0s", "versionRetentionPeriod": "0s", "rowGroupRows": "64"}


def test_a_vacuum_while_tasks_write_takes_none_of_their_files(spark, tmp_path):
    path = str(tmp_path / "t")
    Table.create(path, schema=pa.schema([("id", pa.int64())]), properties=PROPS).append(pa.table({"id": [-1]}))
    data = os.path.join(path, "data")
    before = set(os.listdir(data))
    seen = str(tmp_path / "vacuumed")

    def vacuum_once(writing: list[str]) -> None:
        report = Table.open(path).vacuum(retention="0s", force=True)
        with open(f"{seen}-{os.getpid()}-{time.time_ns()}", "w") as f:
            f.write(f"{len(writing)} {len(set(writing) & {p.split('/')[-1] for p in report.files})}")

    def vacuum_midway(batches):
        # Upstream of the mvtable writer: hand the rows on in small slices and, once a
        # task's segment shows up in data/, vacuum (0 s grace, forced) as another job on
        # the table would. Never block mid-stream waiting for the file: Spark buffers rows
        # between this stage and the writer, so the file may need more rows to appear. At
        # the end the task is still open (no commit can happen yet): wait there if needed.
        vacuumed = False
        for batch in batches:
            for start in range(0, batch.num_rows, 250):
                yield batch.slice(start, 250)
                writing = sorted(set(os.listdir(data)) - before)
                if not vacuumed and writing:
                    vacuum_once(writing)
                    vacuumed = True
                time.sleep(0.01)
        deadline = time.time() + 30
        while not vacuumed and time.time() < deadline:
            writing = sorted(set(os.listdir(data)) - before)
            if writing:
                vacuum_once(writing)
                vacuumed = True
            time.sleep(0.05)

    df = spark.range(0, 40_000, 1, 2).mapInArrow(vacuum_midway, "id long")
    # small Arrow batches between the stages: the writer gets rows (and opens its file) early
    with spark_conf(spark, {"spark.sql.execution.arrow.maxRecordsPerBatch": "500"}):
        df.write.format("mvtable").mode("append").save(path)

    reports = [open(os.path.join(tmp_path, n)).read().split() for n in os.listdir(tmp_path) if n.startswith("vacuumed-")]
    assert reports and any(int(writing) > 0 for writing, _ in reports), "no vacuum ran while a segment was written"
    assert all(int(taken) == 0 for _, taken in reports)
    t = Table.open(path)
    assert t.to_arrow().num_rows == 40_001  # every file of the newest version is there
    assert not os.listdir(os.path.join(path, INTENT_DIR))  # the driver's commit removed the intent
    names = {os.path.basename(s.file.path) for s in t.snapshot().visible_segments()} - before
    assert len({n.split("-")[0] for n in names}) == 1  # every task named its file after the one intent
