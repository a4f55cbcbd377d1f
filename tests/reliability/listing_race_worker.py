"""A process of the listing race: an appender committing as fast as it can, or an opener
that opens the table afresh and reads its newest version (and the one before) in a loop. Run as a script:

    python listing_race_worker.py ROLE URI OPTIONS_JSON DEADLINE OUT_JSON

``DEADLINE`` is a wall-clock time (``time.time()``) shared by the processes, so that the time
they take to start counts towards the race's duration.

An opener takes a new listing on every open, while the appender links new commit (and
checkpoint) files into the log: the listing can show version N without N-1. Every
operation is recorded: what it saw (versions, row counts) or the error it failed with."""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback

import pyarrow as pa

from mvtable.connector import Table
from mvtable.lineage.enums import Operation


def appender(uri: str, options: dict, deadline: float) -> dict:
    t = Table.open(uri, storage_options=options)
    versions, failures = [], []
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        try:
            versions.append(t.append(pa.table({"id": pa.array([seq], pa.int64())})).commit.version)
        except Exception as exc:
            failures.append({"error": type(exc).__name__, "trace": traceback.format_exc()[-1500:]})
    return {"versions": versions, "failures": failures}


class _Relists(logging.Handler):
    """Counts the times ``CommitLog`` found a listing with versions missing that GC cannot
    explain and looked again: how often the race happened under this opener."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "listing again" in record.getMessage()


def opener(uri: str, options: dict, deadline: float) -> dict:
    """Each round: a fresh ``Table`` (a new listing, no snapshot to catch up from) and its
    newest snapshot; every other round also the version before it, through a listing of its
    own. The rows of a version must equal its appends: the appender adds one row a commit."""
    relists = _Relists()
    lineage_log = logging.getLogger("mvtable.lineage")
    lineage_log.setLevel(logging.DEBUG)
    lineage_log.addHandler(relists)
    seen, failures = [], []
    while time.monotonic() < deadline:
        try:
            t = Table.open(uri, storage_options=options)
            snap = t.snapshot()
            rows = sum(s.file.num_rows for s in snap.visible_segments())
            appends = sum(1 for h in snap.history if h.operation == Operation.APPEND)
            if rows != appends:
                failures.append({"error": "wrong rows", "trace": f"version {snap.version}: {rows} rows, {appends} appends"})
            seen.append(snap.version)
            if len(seen) % 2:
                t.commit_log.snapshot(max(0, snap.version - 1))
        except Exception as exc:
            failures.append({"error": type(exc).__name__, "trace": traceback.format_exc()[-1500:]})
    return {"seen": seen, "failures": failures, "relists": relists.count}


def main() -> None:
    role, uri, options, until, out_path = sys.argv[1:6]
    deadline = time.monotonic() + float(until) - time.time()
    fn = appender if role == "append" else opener
    with open(out_path, "w") as f:
        json.dump(fn(uri, json.loads(options), deadline), f)


if __name__ == "__main__":
    main()
