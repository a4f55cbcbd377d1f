"""A partitioned table on a real S3 server (SeaweedFS on 127.0.0.1): created, appended to, its
partitions listed, scanned with pruning, and vacuumed."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.scan import plan_scan

from .conftest import START, events

pytestmark = pytest.mark.s3

TS = pa.timestamp("us")


def test_a_partitioned_table_on_s3(seaweedfs_s3):
    uri, opts = seaweedfs_s3.url("tables/p"), seaweedfs_s3.storage_options()
    zero = dict.fromkeys(("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod"), "0s")
    t = Table.create(uri, schema=events(1).schema, partition_by=["day(ts)", "region"], storage_options=opts, properties=zero)
    t.append(events(36, hours=4))  # 6 days x 3 regions
    t.append(events(6, start=36, hours=4))  # day 7
    again = Table.open(uri, storage_options=opts)
    parts = again.partitions()
    assert len(parts) == 7 * 3 and sum(parts.column("rows").to_pylist()) == 42
    assert parts.column("ts_day").to_pylist()[:3] == [START.date()] * 3
    # pruning reads only the partitions of the filter, and the same rows as a full scan does
    day = (pc.field("ts") >= pa.scalar(START + dt.timedelta(days=2), TS)) & (
        pc.field("ts") < pa.scalar(START + dt.timedelta(days=4), TS)
    )
    plan = plan_scan(again.snapshot(), filter=day & (pc.field("region") == "eu"))
    assert plan.pruned_segments == 21 - 2 and len(plan.tasks) == 2
    got = again.to_arrow(filter=day & (pc.field("region") == "eu"))
    everything = again.to_arrow()
    assert got.sort_by("id").equals(everything.filter(day & (pc.field("region") == "eu")).sort_by("id")) and got.num_rows == 4
    # a push over days 1-2 replaces every segment; vacuum then deletes the replaced files from the bucket
    old = set(again.snapshot().visible_segment_ids())
    again.overwrite(events(12, hours=4), consistent_push=True)
    report = again.vacuum(retention="0s", force=True)
    assert report.segments_pruned == len(old) == 21
    assert len([f for f in report.files if f.endswith(".parquet")]) == 21
    fs = again.io
    for seg in t.snapshot(version=2).visible_segments():
        assert not fs.exists(seg.file.path), seg.file.path
    assert sorted(Table.open(uri, storage_options=opts).to_arrow().column("id").to_pylist()) == list(range(12))
    assert len(Table.open(uri, storage_options=opts).partitions()) == 2 * 3
