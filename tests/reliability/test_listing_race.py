"""One appender and two openers, as separate processes on one table (local disk, and
SeaweedFS S3): no listing of the log taken while commits are linked into it is ever read as
garbage collection. Every open, newest snapshot and time-travel read succeeds, and each
shows the rows its version's appends wrote.

The log starts with a long history (cheap commits built in memory and copied in), as a
long-lived table's does: ext4 returns a large folder's names in hash order, one buffer at a
time, so a listing can show version N without N-1 (a small folder is read in one go), and
an object store lists more than a page of keys in several requests.

Duration per backend: ``MVTABLE_LISTING_RACE_SECONDS`` (default 12 s each, to keep CI
short; the issue's acceptance run is ``MVTABLE_LISTING_RACE_SECONDS=60``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.lineage.actions import SetTransaction
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import LOG_DIR, CommitLog, commit_path
from mvtable.storage import open_file_io

# seconds of racing; SeaweedFS lists and writes a thousand keys in ~0.5 s and ~10 s here,
# so its run is shorter by default to keep the whole test near a minute
SECONDS = os.environ.get("MVTABLE_LISTING_RACE_SECONDS")
WORKER = str(Path(__file__).with_name("listing_race_worker.py"))
PROPS = {"checkpointInterval": "10", "commitDurability": "os"}


def long_history(uri: str, options: dict, commits: int) -> None:
    """A table with ``commits`` commits after its create. They are built by the real commit
    loop in a memory:// log (a streaming writer's progress markers: no data files) and copied
    into the table's log, checkpoints included."""
    table = Table.create(uri, schema=pa.schema([("id", pa.int64())]), properties=PROPS, storage_options=options)
    memory = open_file_io(f"memory://listing-race-{uuid.uuid4().hex}")
    memory.write(commit_path(0), table.io.read(commit_path(0)))
    commit_log = CommitLog(memory)
    snap = commit_log.snapshot()
    for batch in range(commits):
        build = lambda s, b=batch: [SetTransaction(app_id="history", batch_id=b)]
        # a checkpoint every 100 versions, not 10: each holds the whole history, and writing
        # one every 10 versions would cost seconds here
        snap = commit_log.commit(read=snap, operation=Operation.STREAM_APPEND, build=build, checkpoint_interval=100).snapshot
    names = [n for n in memory.list_names(LOG_DIR) if n != commit_path(0).rsplit("/", 1)[1]]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: table.io.write(f"{LOG_DIR}/{n}", memory.read(f"{LOG_DIR}/{n}")), names))
    memory.delete([f"{LOG_DIR}/{n}" for n in memory.list_names(LOG_DIR)])
    assert Table.open(uri, storage_options=options).version == commits


def run_race(tmp_path: Path, uri: str, options: dict, *, label: str, history: int, seconds: float, min_versions: int) -> None:
    long_history(uri, options, history)
    procs = []
    until = time.time() + seconds
    for i, role in enumerate(["append", "open", "open"]):
        out = tmp_path / f"{role}-{i}.json"
        args = [sys.executable, WORKER, role, uri, json.dumps(options), str(until), str(out)]
        procs.append((role, out, subprocess.Popen(args)))
    for role, _out, p in procs:
        assert p.wait(timeout=seconds + 120) == 0, f"{role} process crashed"
    (_, appender), *openers = [(role, json.loads(out.read_text())) for role, out, _ in procs]

    failures = [f for _, rec in [("append", appender), *openers] for f in rec["failures"]]
    assert not failures, failures[:3]
    assert len(appender["versions"]) >= 20, "the appender hardly committed: no race to speak of"
    final = Table.open(uri, storage_options=options).version
    for _, rec in openers:
        distinct = set(rec["seen"])
        # each opener followed the appender: many versions, up to near the end
        assert len(distinct) >= min_versions, f"an opener saw only versions {sorted(distinct)}"
        assert max(distinct) >= history + len(appender["versions"]) // 2, "an opener did not follow the appender"
    opens = [len(rec["seen"]) for _, rec in openers]
    print(
        f"\nlisting race {label}, {seconds:.0f}s: {len(appender['versions'])} appends (log of {final + 1} versions), "
        f"{sum(opens)} opens by 2 openers ({', '.join(str(len(set(r['seen']))) for _, r in openers)} distinct versions seen), "
        f"0 errors; listings that showed a gap GC cannot explain and were taken again: {sum(r['relists'] for _, r in openers)}"
    )


def test_listing_race_local(tmp_path):
    # 1,200 commits: ext4 returns the folder's names in more than one readdir buffer
    run_race(tmp_path, str(tmp_path / "t"), {}, label="local disk", history=1200, seconds=float(SECONDS or 12), min_versions=50)


@pytest.mark.s3
def test_listing_race_seaweedfs(tmp_path, seaweedfs_s3):
    # over 1,000 keys in the log, so that every listing takes two pages; each takes ~0.5 s
    # on SeaweedFS here, so an opener's round takes seconds and it sees fewer versions
    uri, options = seaweedfs_s3.url("listing-race"), seaweedfs_s3.storage_options()
    run_race(tmp_path, uri, options, label="SeaweedFS S3", history=1000, seconds=float(SECONDS or 12), min_versions=5)
