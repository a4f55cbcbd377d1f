"""The bodies of the process races in ``test_put_if_absent.py``: module-level functions,
so that the "spawn" children of a ``ProcessGang`` can import them."""

from __future__ import annotations

import os
import uuid


def race_put_if_absent_worker(index: int, barrier, uri: str, options: dict, rounds: int, prefix: str) -> list:
    """In each round: wait for every racer, then ``put_if_absent`` the round's path with
    content unique to this process (and of a process-specific length).
    Returns ``[(round, won, data, error)]``."""
    from mvtable.storage import open_file_io

    io = open_file_io(uri, options)
    io.exists(f"{prefix}/warm-up")  # open the connection pool before racing
    out = []
    for r in range(rounds):
        data = (f"worker={index} pid={os.getpid()} round={r} nonce={uuid.uuid4().hex} " + "x" * (7 * index)).encode()
        barrier.wait(timeout=60)
        try:
            out.append((r, io.put_if_absent(f"{prefix}/{r:020d}.json", data), data, None))
        except Exception as exc:
            out.append((r, None, data, f"{type(exc).__name__}: {exc}"))
    return out


def commit_appends_worker(index: int, barrier, uri: str, options: dict, appends: int) -> list:
    """``appends`` blind appends through ``CommitLog.commit``; whoever finds no table creates
    it (``MetadataAction`` in the same commit). Returns ``[(version, segment_id, attempts)]``."""
    from mvtable.lineage.actions import AddSegment, MetadataAction, SegmentFile
    from mvtable.lineage.enums import Operation
    from mvtable.lineage.log import CommitLog
    from mvtable.lineage.snapshot import Snapshot
    from mvtable.storage import open_file_io

    log = CommitLog(open_file_io(uri, options), check_files=False)
    barrier.wait(timeout=60)
    read = log.snapshot() if log.exists() else Snapshot()
    barrier.wait(timeout=60)  # nobody has committed yet: all start from the empty table
    done = []
    for j in range(appends):
        seg_id = f"w{index}-a{j}"

        def build(s: Snapshot, seg_id: str = seg_id) -> list:
            first = [] if s.exists else [MetadataAction(table_id="t", table_schema={})]
            segment = SegmentFile(id=seg_id, path=f"data/{seg_id}.parquet", num_rows=1, size_bytes=1)
            return [*first, AddSegment(segment=segment)]

        # every process starts each append together from its own, by now stale, snapshot:
        # all but one lose the race for the next version and must catch up and retry
        barrier.wait(timeout=60)
        result = log.commit(read=read, operation=Operation.APPEND, build=build)
        done.append((result.commit.version, seg_id, result.attempts))
        read = result.snapshot
    return done
