"""Vacuum collects what writes that died left behind, everywhere, once it is older than
``orphanGracePeriod``: temp files of interrupted writes in the log, lease and export
folders, and lease files (and gave-up markers) of pushes that no longer run. A young temp
file and the lease of a running push stay."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

from mvtable import Table
from mvtable.connector import recovery, writes

SCHEMA = pa.schema([("id", pa.int64())])
HEX = "0123456789abcdef0123456789abcdef"


def put(root: Path, rel: str, *, age_s: float) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"partial")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return rel


def test_vacuum_collects_leftovers_of_dead_writes_everywhere(tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = Table.create(str(root), schema=SCHEMA)
    t.append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    done = t.overwrite(pa.table({"id": [3]}, schema=SCHEMA), consistent_push=True)
    finished = str(done.entry)
    running = writes.begin_write(str(root), storage_options=None, incoming=SCHEMA, mode=writes.OVERWRITE, consistent_push=True)
    assert running.entry_id is not None
    day = 2 * 86400
    lease = recovery.LEASE_DIR
    gone = {
        put(root, f"{lease}/{finished}.json", age_s=day),  # a finished push's lease nobody dropped
        put(root, f"{lease}/{finished}.gave-up", age_s=day),
        put(root, f"{lease}/push-purged-long-ago.json", age_s=day),
        put(root, f"{lease}/{running.entry_id}.json.{HEX}.tmp", age_s=day),
        put(root, f"metadata/v3.metadata.json.{HEX}.tmp", age_s=day),
        put(root, f"_delta_log/00000000000000000003.json.{HEX}.tmp", age_s=day),
        put(root, f"_mvtable/log/.00000000000000000009.json.{HEX}.tmp", age_s=day),
    }
    kept = {
        put(root, f"{lease}/{running.entry_id}.json", age_s=day),  # its push runs
        put(root, f"{lease}/young.json.{HEX}.tmp", age_s=0),  # a write may still be finishing it
        put(root, "metadata/v1.metadata.json", age_s=day),  # not a temp file
    }

    dry = t.vacuum(dry_run=True)
    assert gone <= set(dry.files) and not kept & set(dry.files)
    report = t.vacuum()
    assert gone <= set(report.files) and not kept & set(report.files)
    for rel in gone:
        assert not (root / rel).exists(), rel
    for rel in kept:
        assert (root / rel).exists(), rel
    assert Table.open(str(root)).to_arrow().column("id").to_pylist() == [3]
    writes.abort_write(running, [])
