"""A process of the compaction race: an appender, a deleter, or a compaction loop, all on
one table. Run as a script:

    python compaction_worker.py ROLE WORKER_ID URI OPTIONS_JSON SECONDS OUT_JSON

Every operation is recorded: what landed (version, ids appended or deleted, rows
remapped, retries) or the error it failed with. Appends and deletes must never fail; the
test replays the log against these records."""

from __future__ import annotations

import json
import random
import sys
import time
import traceback

import pyarrow as pa

from mvtable.connector import Table


def appender(t: Table, wid: int, rng: random.Random, deadline: float) -> list[dict]:
    out: list[dict] = []
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        ids = [wid * 10**9 + seq * 1000 + i for i in range(rng.randint(1, 40))]
        try:
            result = t.append(pa.table({"id": pa.array(ids, pa.int64())}))
            out.append({"op": "append", "version": result.version, "ids": ids, "attempts": result.attempts})
        except Exception as exc:
            out.append({"op": "append", "failed": type(exc).__name__, "error": traceback.format_exc()[-1500:]})
    return out


def deleter(t: Table, rng: random.Random, deadline: float) -> list[dict]:
    """Deletes rows by address as read at a version, then lingers before committing, so
    compactions land between its read and its commit."""
    out: list[dict] = []
    while time.monotonic() < deadline:
        read = t.snapshot()
        rows = t.scan(version=read.version, with_row_address=True).to_arrow()
        if rows.num_rows == 0:
            time.sleep(0.01)
            continue
        pick = rng.sample(range(rows.num_rows), min(rows.num_rows, rng.randint(1, 8)))
        chosen = rows.take(pa.array(pick))
        where: dict[str, list[int]] = {}
        for seg, pos in zip(chosen["_mv_segment"].to_pylist(), chosen["_mv_row"].to_pylist()):
            where.setdefault(seg, []).append(pos)
        time.sleep(rng.uniform(0, 0.3))
        try:
            result = t.delete_rows(where, read=read)
            out.append(
                {
                    "op": "delete",
                    "version": result.version,
                    "ids": chosen["id"].to_pylist(),
                    "deleted": result.deleted_rows,
                    "remapped": result.remapped_rows,
                    "read": read.version,
                }
            )
        except Exception as exc:
            out.append({"op": "delete", "failed": type(exc).__name__, "error": traceback.format_exc()[-1500:]})
    return out


def compactor(t: Table, rng: random.Random, deadline: float) -> list[dict]:
    out: list[dict] = []
    while time.monotonic() < deadline:
        try:
            report = t.compact(min_input_files=rng.randint(2, 4), max_bytes_per_commit=rng.choice([2000, 10**9]))
            out.append(
                {
                    "op": "compact",
                    "commits": report.commits,
                    "remapped": report.deletes_remapped,
                    "dropped": len(report.dropped),
                }
            )
        except Exception as exc:
            out.append({"op": "compact", "failed": type(exc).__name__, "error": traceback.format_exc()[-1500:]})
        time.sleep(rng.uniform(0, 0.1))
    return out


def main() -> None:
    role, wid, uri, options, seconds, out_path = sys.argv[1:7]
    rng = random.Random(f"{role}-{wid}")
    t = Table.open(uri, storage_options=json.loads(options))
    deadline = time.monotonic() + float(seconds)
    if role == "append":
        records = appender(t, int(wid), rng, deadline)
    elif role == "delete":
        records = deleter(t, rng, deadline)
    else:
        records = compactor(t, rng, deadline)
    with open(out_path, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
