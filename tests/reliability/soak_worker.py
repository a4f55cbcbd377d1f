"""A process of the concurrency soak: a writer doing random appends, deletes, consistent
pushes and rollbacks, a reader checking snapshots, or a GC/vacuum loop. Run as a script:

    python soak_worker.py ROLE WORKER_ID URI OPTIONS_JSON SECONDS OUT_JSON [PIN_ID]

The reader archives the log as it grows (see ``reader``). Writers record, for every operation, what landed (version, segment ids → row ids, deleted
row ids) or the typed error it failed with; the test replays the log against those records."""

from __future__ import annotations

import json
import random
import sys
import time
import traceback

import numpy as np
import pyarrow as pa

from mvtable.connector import Table
from mvtable.errors import CommitConflictError, MvTableError
from mvtable.lineage.actions import AddSegment


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def writer(t: Table, wid: int, rng: random.Random, deadline: float) -> list[dict]:
    out: list[dict] = []
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        op = rng.choices(["append", "delete", "push", "rollback"], weights=[5, 3, 2, 1])[0]
        record: dict = {"op": op, "worker": wid}
        try:
            if op in ("append", "push"):
                ids = [wid * 10**9 + seq * 1000 + i for i in range(rng.randint(1, 30))]
                result = t.append(rows(ids)) if op == "append" else t.overwrite(rows(ids), consistent_push=True)
                added = [a.segment.id for a in t.commit_log.read_commit(result.version).actions if isinstance(a, AddSegment)]
                record.update(version=result.version, segments={sid: ids for sid in added}, attempts=result.attempts)
            elif op == "delete":
                snap = t.snapshot()
                scanned = t.scan(version=snap.version, with_row_address=True).to_arrow()
                if scanned.num_rows == 0:
                    continue
                pick = sorted(rng.sample(range(scanned.num_rows), min(scanned.num_rows, rng.randint(1, 5))))
                chosen = scanned.take(pa.array(pick))
                by_seg: dict[str, list[int]] = {}
                for seg, pos in zip(chosen.column("_mv_segment").to_pylist(), chosen.column("_mv_row").to_pylist()):
                    by_seg.setdefault(seg, []).append(pos)
                result = t.delete_rows({s: np.array(p) for s, p in by_seg.items()}, read=snap)
                record.update(version=result.version, deleted=chosen.column("id").to_pylist())
            else:
                live = [e for e in t.lineage() if e.state == "COMPLETED"]
                if not live:
                    continue
                result = t.rollback(entry=rng.choice(live).id)
                record.update(version=result.version if result.changed else None, changed=result.changed)
        except CommitConflictError as exc:
            record.update(failed="conflict", error=type(exc).__name__)
        except MvTableError as exc:
            record.update(failed="refused", error=type(exc).__name__, message=str(exc)[:200])
        except Exception as exc:  # anything untyped is a bug the test reports
            record.update(failed="untyped", error=type(exc).__name__, message=traceback.format_exc()[-800:])
        out.append(record)
    return out


def reader(t: Table, rng: random.Random, deadline: float, pin_id: str) -> dict:
    """Reads the newest version in a loop, and archives every commit file as it appears.
    It holds a pin at the newest archived version and moves it forward, so GC (running at
    0 s retention) can never remove a commit before the model has seen it."""
    from mvtable.visibility import pins

    archive: dict[int, str] = {}
    archived = -1
    reads = []
    while time.monotonic() < deadline:
        latest = t.commit_log.latest_version()
        for v in range(archived + 1, latest + 1):
            archive[v] = t.io.read(f"_mvtable/log/{v:020d}.json").decode()
        if latest > archived:
            new_pin = pins.pin(t.io, latest, ttl_s=3600, owner="soak archiver")
            pins.release(t.io, pin_id)
            pin_id, archived = new_pin, latest
        try:
            version = t.version
            ids = t.scan(version=version).to_arrow().column("id").to_pylist()
            reads.append({"version": version, "count": len(ids), "sum": sum(ids), "dups": len(ids) - len(set(ids))})
        except MvTableError as exc:  # a version collected between listing and pinning
            reads.append({"failed": type(exc).__name__})
        except Exception as exc:
            reads.append({"failed": "untyped", "error": repr(exc), "trace": traceback.format_exc()[-800:]})
    return {"reads": reads, "archive": archive, "pin": pin_id, "archived": archived}


def janitor(t: Table, rng: random.Random, deadline: float) -> list[dict]:
    out = []
    while time.monotonic() < deadline:
        try:
            if rng.random() < 0.5:
                r = t.collect_garbage()
                out.append({"op": "gc", "complete": r.complete, "deleted": len(r.deleted)})
            else:
                r = t.vacuum()
                out.append({"op": "vacuum", "complete": r.complete, "deleted": len(r.files)})
        except MvTableError as exc:
            out.append({"op": "janitor", "failed": type(exc).__name__, "message": str(exc)[:200]})
        except Exception:
            out.append({"op": "janitor", "failed": "untyped", "trace": traceback.format_exc()[-800:]})
        time.sleep(0.2)
    return out


def main() -> None:
    role, wid, uri, options, seconds, out_path = sys.argv[1:7]
    pin_id = sys.argv[7] if len(sys.argv) > 7 else ""
    t = Table.open(uri, storage_options=json.loads(options))
    rng = random.Random(f"{role}-{wid}")
    deadline = time.monotonic() + float(seconds)
    fn = {
        "writer": lambda: writer(t, int(wid), rng, deadline),
        "reader": lambda: reader(t, rng, deadline, pin_id),
        "janitor": lambda: janitor(t, rng, deadline),
    }[role]
    records = fn()
    with open(out_path, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
