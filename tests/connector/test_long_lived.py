"""Tables that live for years, and maintenance that tells the truth.

* After vacuum, the newest snapshot (and its checkpoint) holds the live table and the
  versions GC keeps readable — not every segment, entry and history item ever written.
* A dry run of vacuum or GC lists exactly the files the real run then deletes."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.errors import FilesMissingError, VersionNotFoundError

PROPS = {
    "rowGroupRows": "8",
    "checkpointInterval": "3",
    "dvInlineMaxBytes": "0",  # every DV in a file, so GC has files to collect
    "replacedSegmentsRetentionPeriod": "0s",
    "lineageEntryCleanupRetentionPeriod": "0s",
    "versionRetentionPeriod": "0s",
    "orphanGracePeriod": "5m",
}


def rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def ids(t: Table, **kw) -> list[int]:
    return sorted(t.scan(**kw).to_arrow().column("id").to_pylist())


def busy_table(path: str, rounds: int) -> Table:
    """Appends, deletes, pushes and overwrites: removed segments, superseded DVs, lineage."""
    t = Table.create(path, schema=pa.schema([("id", pa.int64())]), properties=PROPS)
    for k in range(rounds):
        t.append(rows(1000 * k, 20))
        t.delete(pc.field("id") == 1000 * k + 3)
        t.delete(pc.field("id") == 1000 * k + 4)  # supersedes the DV of the line above
        if k % 2:
            t.overwrite(rows(1000 * k + 500, 10), consistent_push=True)
        else:
            t.overwrite(rows(1000 * k + 700, 10))
    return t


def log_now(t: Table) -> int:
    """Now, as vacuum should measure a 0 s retention here: commit timestamps are kept
    increasing (at least the previous one + 1 ms), so a burst of commits can run a few ms
    ahead of the wall clock, and a vacuum measured from the wall clock would then still
    keep the version before the newest (seen once in CI)."""
    newest = t.history()[-1].timestamp.timestamp() * 1000
    return max(int(time.time() * 1000), int(newest) + 1)


def test_vacuum_dry_run_lists_exactly_what_the_real_run_deletes(tmp_path):
    t = busy_table(str(tmp_path / "t"), rounds=4)
    old = time.time() - 3600
    for name in ("orphan-a.parquet", "orphan-b.parquet"):  # failed task attempts, long ago
        path = os.path.join(t.uri, "data", name)
        with open(path, "wb") as f:
            f.write(b"x")
        os.utime(path, (old, old))
    now = int(time.time() * 1000) + 1000
    dry = t.vacuum(dry_run=True, now_ms=now, batch_bytes=64)
    before = {p for p in _all_files(t.uri)}
    real = t.vacuum(now_ms=now, batch_bytes=64)
    gone = before - set(_all_files(t.uri))
    # the same files (a real run deletes what the log already made unreachable first: another order)
    assert sorted(dry.files) == sorted(real.files) and set(real.files) == gone
    assert any(p.startswith("data/") for p in gone) and any(p.startswith("_mvtable/dv/") for p in gone)
    assert any(p.startswith("_mvtable/log/") for p in gone) and {"data/orphan-a.parquet", "data/orphan-b.parquet"} <= gone
    assert (dry.bytes, dry.orphans, dry.segments_pruned) == (real.bytes, real.orphans, real.segments_pruned)
    assert ids(t) == list(range(3500, 3510))


def test_gc_dry_run_lists_exactly_what_the_real_run_deletes(tmp_path):
    t = busy_table(str(tmp_path / "t"), rounds=3)
    now = int(time.time() * 1000) + 1000
    dry = t.collect_garbage(dry_run=True, now_ms=now, batch_bytes=64)
    before = set(_all_files(t.uri))
    real = t.collect_garbage(now_ms=now, batch_bytes=64)
    assert dry.deleted == real.deleted and set(real.deleted) == before - set(_all_files(t.uri))
    assert real.deleted and dry.batches == real.batches


def test_snapshot_keeps_only_what_retained_versions_need(tmp_path):
    t = busy_table(str(tmp_path / "t"), rounds=6)
    s = t.snapshot()
    removed_before = sum(seg.removed_version is not None for seg in s.segments.values())
    assert removed_before > 0 and len(s.history) == s.version + 1
    report = t.vacuum(now_ms=log_now(t))
    assert report.segments_pruned == removed_before + report.segments_expired  # retention removes, then forgets
    s = t.snapshot()
    assert set(s.segments) == set(s.visible_segment_ids())  # no removed segment left
    assert set(s.dvs) <= set(s.segments)  # DV descriptors only for live segments
    assert s.lineage == {}  # completed pushes past retention are purged
    oldest_log = min(int(n.split(".")[0]) for n in os.listdir(os.path.join(t.uri, "_mvtable/log")) if n[0].isdigit())
    assert s.history[0].version == oldest_log  # history starts where the log does
    # time travel inside what the log holds still works; older versions fail with a typed error
    assert t.scan(version=s.history[0].version).to_arrow().num_rows > 0
    with pytest.raises((VersionNotFoundError, FilesMissingError)):
        t.scan(version=1).to_arrow()
    # the state stays the same size however long the table lives
    sizes = []
    for k in range(3):
        t.append(rows(90_000 + k, 1))
        t.overwrite(rows(80_000 + k, 5), consistent_push=True)
        t.vacuum(now_ms=log_now(t))
        s = t.snapshot()
        sizes.append((len(s.segments), len(s.lineage)))
        assert len(s.history) <= 2 * int(PROPS["checkpointInterval"]) + 2  # back to the log's first checkpoint
    assert len(set(sizes)) == 1, sizes
    assert ids(t) == list(range(80_002, 80_007))


def _all_files(root: str) -> list[str]:
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            out.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return out
