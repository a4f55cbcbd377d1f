"""Vacuum forgets streaming applications idle past ``streamingAppRetentionPeriod``: the exactly-once records stay bounded."""

from __future__ import annotations

import time

import pyarrow as pa

from mvtable.connector import Table
from mvtable.lineage import operations as ops
from mvtable.lineage.enums import Operation


def batch(t: Table, app: str, batch_id: int) -> int:
    read = t.commit_log.snapshot()
    result = t.commit_log.commit(
        read=read, operation=Operation.STREAM_APPEND, build=lambda cur: ops.stream_batch(cur, [], app_id=app, batch_id=batch_id)
    )
    return result.commit.timestamp_ms


def test_vacuum_forgets_idle_applications_and_keeps_live_ones(tmp_path):
    t = Table.create(
        str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), properties={"streamingAppRetentionPeriod": "1s"}
    )
    for i in range(3):
        batch(t, "old", i)
    time.sleep(1.2)
    live_at = batch(t, "live", 0)
    report = t.vacuum(force=True, now_ms=live_at + 500)
    snapshot = t.snapshot()
    assert dict(snapshot.transactions) == {"live": 0} and set(snapshot.transaction_times) == {"live"}
    assert report.retention_commits and t.history()[-1].operation == Operation.RETENTION
    # the forgotten query starts over; the live one still cannot repeat a batch
    batch(t, "old", 0)
    assert dict(t.snapshot().transactions) == {"live": 0, "old": 0}
    t.vacuum(force=True, now_ms=live_at + 500)  # nothing idle any more: no commit
    assert t.history()[-1].operation == Operation.STREAM_APPEND
