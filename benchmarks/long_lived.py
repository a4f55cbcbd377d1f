"""A table that lives for years (``python -m benchmarks.long_lived``): does the state stay flat?

Commits a mix of appends (2 in 3), deletes (1 in 3, one cumulative DV each) and a
consistent push replacing the whole table every ``--push-every`` steps, with vacuum
(retention 0s) every ``--vacuum-every`` commits. The commits go straight through
``CommitLog`` with tiny actions (segment descriptors of files that are never written), so
50,000 commits take minutes, not hours; vacuum and the open are the real thing. At each
milestone (default 1k, 10k and 50k commits) it prints, right after a vacuum:

* the bytes of the newest snapshot's checkpoint per live segment,
* the time to open the newest snapshot (``Table.open(uri).snapshot()``, median of 15: the
  newest checkpoint plus the commits after it, at most ``checkpointInterval - 1``),
* what the snapshot holds (segments, lineage entries, history items),

and the ratios of the last milestone to the first (target: open time within 1.5x).
``--smoke`` is the tiny run CI does (200 and 1,000 commits). Prints the load average."""

from __future__ import annotations

import argparse
import base64
import os
import random
import statistics
import sys
import tempfile
import time
import uuid

import pyarrow as pa
from pyroaring import BitMap64

from mvtable.connector import Table
from mvtable.dvref import DeletionVectorRef
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import RowGroupInfo, SegmentFile, SetDeletionVector
from mvtable.lineage.checkpoint import checkpoint_bytes
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.visibility import encode_dv

PROPS = {
    "versionRetentionPeriod": "0s",
    "replacedSegmentsRetentionPeriod": "0s",
    "lineageEntryCleanupRetentionPeriod": "0s",
    "orphanGracePeriod": "0s",
}
ROWS = 1000


def segment() -> SegmentFile:
    sid = uuid.uuid4().hex
    groups = (RowGroupInfo(num_rows=ROWS, first_row=0, total_byte_size=ROWS * 8),)
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=ROWS, size_bytes=ROWS * 8, row_groups=groups)


def dv(rows: BitMap64) -> DeletionVectorRef:
    return DeletionVectorRef(cardinality=len(rows), inline=base64.b64encode(encode_dv(rows)).decode())


class Workload:
    def __init__(self, uri: str, *, push_every: int, seed: int = 7) -> None:
        self.table = Table.create(uri, schema=pa.schema([("id", pa.int64())]), properties=PROPS)
        self.commit_log = CommitLog(self.table.io, check_files=False)  # its segments are never written
        self.current: Snapshot = self.commit_log.snapshot()
        self.rng = random.Random(seed)
        self.push_every = push_every
        self.deleted: dict[str, BitMap64] = {}
        self.steps = 0

    def _commit(self, operation: Operation, build) -> None:  # type: ignore[no-untyped-def]
        self.current = self.commit_log.commit(read=self.current, operation=operation, build=build).snapshot

    def step(self) -> None:
        self.steps += 1
        if self.steps % self.push_every == 0:
            entry = f"push-{self.steps}"
            read = self.current
            self._commit(Operation.PUSH_START, lambda cur: ops.push_start(read, cur, entry))
            new = [segment(), segment()]
            self._commit(Operation.CONSISTENT_PUSH, lambda cur: ops.push_segments(cur, entry, new, publish=True))
        elif self.steps % 3 == 0 and self.current.visible_segment_ids():
            sid = self.rng.choice(self.current.visible_segment_ids())
            rows = self.deleted.setdefault(sid, BitMap64())
            rows.add(self.rng.randrange(ROWS))
            ref = dv(rows)
            self._commit(Operation.DELETE, lambda cur: [SetDeletionVector(segment_id=sid, dv=ref)])
        else:
            self._commit(Operation.APPEND, lambda cur: ops.append(cur, [segment()]))

    def vacuum(self) -> None:
        self.table.vacuum(retention="0s", force=True)
        self.current = self.commit_log.snapshot()
        self.deleted = {sid: rows for sid, rows in self.deleted.items() if sid in self.current.segments}


def measure(uri: str) -> dict[str, float]:
    t = Table.open(uri)
    listing = t.commit_log.listing()
    times = []
    for _ in range(15):
        started = time.perf_counter()
        s = Table.open(uri).snapshot()
        times.append(time.perf_counter() - started)
    live = len(s.visible_segment_ids())
    cp_bytes = len(checkpoint_bytes(s))  # the checkpoint of the newest snapshot, as the log would write it
    return {
        "commits": s.version + 1,
        "live": live,
        "segments": len(s.segments),
        "entries": len(s.lineage),
        "history": len(s.history),
        "log_files": len(listing.commits) + len(listing.checkpoints),
        "replayed": s.version - max(listing.checkpoints, default=-1),  # commits read after the checkpoint
        "cp_bytes_per_live": cp_bytes / max(live, 1),
        "open_ms": statistics.median(times) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--milestones", default=None, help="commit counts to report at (default 1000,10000,50000)")
    p.add_argument("--vacuum-every", type=int, default=None, help="commits between vacuums (default 500; 100 with --smoke)")
    p.add_argument("--push-every", type=int, default=20, help="steps between consistent pushes")
    p.add_argument("--smoke", action="store_true", help="tiny run: 200 and 1000 commits")
    p.add_argument("--dir", default=None, help="where to put the table (a temporary folder by default)")
    a = p.parse_args(argv)
    milestones = [int(x) for x in (a.milestones or ("200,1000" if a.smoke else "1000,10000,50000")).split(",")]
    vacuum_every = a.vacuum_every or (100 if a.smoke else 500)
    root = a.dir or tempfile.mkdtemp(prefix="mvtable-long-lived-")
    uri = os.path.join(root, f"t-{uuid.uuid4().hex[:8]}")
    w = Workload(uri, push_every=a.push_every)
    print(f"long-lived table at {uri}; load {os.getloadavg()[0]:.1f} (1 min)", flush=True)
    print(
        f"{'commits':>8} {'live':>5} {'segments':>8} {'entries':>7} {'history':>7} {'log files':>9} "
        f"{'cp B/live seg':>13} {'replayed':>8} {'open ms':>8}"
    )
    results = []
    started = time.perf_counter()
    last_vacuum = 0
    for target in milestones:
        # run to the target, then on to the end of the next push: every milestone measures
        # the same shape of table (one push's segments live)
        while w.current.version + 1 < target or w.steps % a.push_every:
            w.step()
            if w.current.version - last_vacuum >= vacuum_every:
                w.vacuum()
                last_vacuum = w.current.version
        # vacuum reaches its fixed point in two runs: a run executes the plan it made before
        # its own retention commit, so what that commit frees goes in the next run
        w.vacuum()
        w.vacuum()
        last_vacuum = w.current.version
        m = measure(uri)
        results.append(m)
        print(
            f"{m['commits']:>8.0f} {m['live']:>5.0f} {m['segments']:>8.0f} {m['entries']:>7.0f} {m['history']:>7.0f} "
            f"{m['log_files']:>9.0f} {m['cp_bytes_per_live']:>13.0f} {m['replayed']:>8.0f} {m['open_ms']:>8.1f}",
            flush=True,
        )
    first, last = results[0], results[-1]
    print(
        f"{last['commits']:.0f} vs {first['commits']:.0f} commits: checkpoint bytes per live segment "
        f"{last['cp_bytes_per_live'] / first['cp_bytes_per_live']:.2f}x, open time {last['open_ms'] / first['open_ms']:.2f}x "
        f"(target <= 1.5x); generated in {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.1f}"
    )
    # the state must not grow with history: fail loudly if it did (the smoke test relies on it)
    if last["segments"] != last["live"] or last["history"] > first["history"] + 2 * vacuum_every:
        print("state grew with history", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
