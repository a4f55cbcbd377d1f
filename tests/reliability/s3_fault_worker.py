"""A writer of the object-storage fault run (``test_s3_faults.py``): appends uniquely
numbered rows through the fault-injecting proxy until the deadline and records, for every
attempt, what it was told. Run as a script:

    python s3_fault_worker.py WORKER_ID URI OPTIONS_JSON DEADLINE OUT_JSON

``DEADLINE`` is a wall-clock time (``time.time()``): no append starts after it.

Outcomes: ``landed`` (with the version, the transaction id and how many commit attempts it
took), ``unknown`` (``CommitStateUnknownError``, with the transaction id and the first
version it may hold), ``conflict`` (a ``CommitConflictError``: nothing landed) or
``failed`` (any other error, raised before the commit was sent)."""

from __future__ import annotations

import json
import sys
import time
import traceback

import pyarrow as pa

from mvtable.connector import Table
from mvtable.errors import CommitConflictError, CommitStateUnknownError

ROWS_PER_APPEND = 5


def ids_of(wid: int, seq: int) -> list[int]:
    return [wid * 10**9 + seq * 1000 + i for i in range(ROWS_PER_APPEND)]


def open_table(uri: str, options: dict, deadline: float) -> Table | None:
    while time.time() < deadline:
        try:
            return Table.open(uri, storage_options=options)
        except Exception:  # a fault on the first listing: try again
            time.sleep(0.05)
    return None


def run(wid: int, uri: str, options: dict, deadline: float) -> list[dict]:
    out: list[dict] = []
    t = open_table(uri, options, deadline)
    seq = 0
    while t is not None and time.time() < deadline:
        seq += 1
        ids = ids_of(wid, seq)
        record: dict = {"worker": wid, "seq": seq, "ids": ids}
        try:
            result = t.append(pa.table({"id": pa.array(ids, pa.int64())}))
            record.update(
                outcome="landed",
                version=result.commit.version,
                txn=result.commit.parameters["txn"],
                attempts=result.attempts,
            )
        except CommitStateUnknownError as exc:
            record.update(outcome="unknown", version=exc.version, txn=exc.txn, error=str(exc)[:300])
        except CommitConflictError as exc:
            record.update(outcome="conflict", error=f"{type(exc).__name__}: {str(exc)[:200]}")
        except Exception as exc:
            record.update(outcome="failed", error=f"{type(exc).__name__}: {str(exc)[:200]}", trace=traceback.format_exc()[-3000:])
        out.append(record)
    return out


def main() -> None:
    wid, uri, options, deadline, out_path = sys.argv[1:6]
    records = run(int(wid), uri, json.loads(options), float(deadline))
    with open(out_path, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
