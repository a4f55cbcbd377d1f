"""A table on a real full disk (a small tmpfs filled to the last byte): every write fails
with a typed ``StorageFullError`` naming the path and the operation, nothing committed is
lost, no temp file stays behind, reads still work, a push whose abort could not be
written is reverted by the next push at once, and vacuum frees space before it writes.

Needs root for the tmpfs (CI runs as root); the mount is removed whatever happens."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support import mounts

from mvtable import Table, errors
from mvtable.connector import recovery, writes

SCHEMA = pa.schema([("id", pa.int64()), ("payload", pa.binary())])


def rows(start: int, stop: int, *, payload: int = 64) -> pa.Table:
    ids = list(range(start, stop))
    return pa.table({"id": pa.array(ids, pa.int64()), "payload": [os.urandom(payload) for _ in ids]}, schema=SCHEMA)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    reason = mounts.mount_unavailable()
    if reason:
        pytest.skip(reason)
    with mounts.tmpfs(tmp_path / "disk", size_bytes=8 << 20) as disk:
        yield disk


def temp_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


def sorted_rows(t: Table, version: int | None = None) -> pa.Table:
    return t.to_arrow(version=version).sort_by("id")


def test_every_write_on_a_full_disk_is_a_typed_error_and_loses_nothing(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(small_disk / "t")
    t = Table.create(uri, schema=SCHEMA, primary_key=["id"])
    t.append(rows(0, 100))
    t.append(rows(100, 200))
    t.delete(pc.field("id") < 10)
    expected, version = sorted_rows(t), t.version
    files = sorted(str(p.relative_to(small_disk)) for p in small_disk.rglob("*") if p.is_file())
    filler = mounts.fill(small_disk)

    attempts = {
        "append": lambda: t.append(rows(1000, 3000)),
        "delete": lambda: t.delete(pc.field("id") == 50),
        "upsert": lambda: t.upsert(rows(150, 250)),
        "overwrite": lambda: t.overwrite(rows(0, 10)),
        "consistent push": lambda: t.overwrite(rows(0, 10), consistent_push=True),
        "compact": lambda: t.compact(min_input_files=2, target_file_size="1MiB"),
        "export_iceberg": lambda: t.export_iceberg(),
        "export_delta": lambda: t.export_delta(),
    }
    for name, attempt in attempts.items():
        with pytest.raises(errors.StorageFullError) as info:
            attempt()
        err = info.value
        assert isinstance(err, (errors.StorageError, errors.MvTableError, OSError)), name
        assert err.errno == errno.ENOSPC, name
        assert err.path.startswith(uri), (name, err.path)
        assert err.operation in ("write", "create"), (name, err.operation)
        assert err.path in str(err) and "free space" in str(err), name

    # reads work on the full disk: the pin is skipped, with one warning
    caplog.clear()
    assert sorted_rows(t).equals(expected)
    assert sorted_rows(Table.open(uri), version - 1).num_rows == 200
    assert sum("without a reader pin" in r.getMessage() for r in caplog.records) <= 1
    # GC only deletes: it runs on a full disk
    assert t.collect_garbage().complete
    # nothing committed, nothing lost, no file of the failed writes left anywhere
    assert Table.open(uri).version == version
    assert temp_files(small_disk) == []
    left = sorted(str(p.relative_to(small_disk)) for p in small_disk.rglob("*") if p.is_file() and p != filler)
    assert left == files

    filler.unlink()
    t = Table.open(uri)
    assert sorted_rows(t).equals(expected)
    t.append(rows(1000, 1010))
    assert t.to_arrow().num_rows == expected.num_rows + 10


def test_gc_and_vacuum_free_space_on_a_completely_full_disk(small_disk: Path) -> None:
    uri = str(small_disk / "t")
    t = Table.create(uri, schema=SCHEMA)
    t.append(rows(0, 3000, payload=1000))  # ~3 MB of random bytes: one segment
    t.overwrite(rows(0, 10))  # makes it unreachable; vacuum's prune of it needs a commit
    kept = sorted_rows(t)
    time.sleep(0.01)
    filler = mounts.fill(small_disk)
    with pytest.raises(errors.StorageFullError):
        t.append(rows(100, 110))  # the disk really is full

    report = t.vacuum(retention="0s", force=True)
    assert report.complete
    assert report.bytes > 2_000_000
    assert report.retention_commits, "the retention commit landed once space was freed"
    assert any(f.startswith("data/") for f in report.files)
    assert sorted_rows(t).equals(kept)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    assert free > 2_000_000
    t.append(rows(100, 110))  # the table is writable again, without removing the filler
    assert t.to_arrow().num_rows == 20
    filler.unlink()


def test_vacuum_that_cannot_free_enough_says_so(small_disk: Path) -> None:
    """Nothing to free before its commit: vacuum deletes what needs no commit and raises
    a ``StorageFullError`` saying what it freed, never a bare ``[Errno 28]``."""
    uri = str(small_disk / "t")
    t = Table.create(uri, schema=SCHEMA)
    t.append(rows(0, 10))
    plan = writes.begin_write(uri, storage_options=None, incoming=SCHEMA, mode=writes.OVERWRITE, consistent_push=True)
    filler = mounts.fill(small_disk)
    writes.abort_write(plan, [])  # the revert does not fit: marked given up, so vacuum cleans it up
    mounts.fill(small_disk)  # again: the abort released its pin
    with pytest.raises(errors.StorageFullError) as info:
        t.vacuum(retention="0s", force=True)
    assert "vacuum" in str(info.value) and "run vacuum again" in str(info.value)
    assert info.value.operation == "vacuum"
    filler.unlink()
    report = t.vacuum(retention="0s", force=True)
    assert report.entries_purged == 1
    assert sorted_rows(t).num_rows == 10


PUSH_FROM_ANOTHER_PROCESS = """
import json, sys
import pyarrow as pa
from mvtable import Table
from mvtable.errors import PushInProgressError
t = Table.open(sys.argv[1])
try:
    t.overwrite(pa.table({"id": pa.array([7], pa.int64()), "payload": [b"x"]}), consistent_push=True)
    print(json.dumps({"ok": True, "recovered": t.history()[-2].parameters.get("recovered")}))
except PushInProgressError as exc:
    print(json.dumps({"ok": False, "error": str(exc)}))
"""


def push_from_another_process(uri: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PUSH_FROM_ANOTHER_PROCESS, uri], capture_output=True, text=True, timeout=120, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_push_whose_abort_cannot_be_written_is_reverted_by_the_next_push_at_once(small_disk: Path) -> None:
    """The issue's case: the start of a consistent push lands, the disk fills, the data
    write and then the abort fail. The owner (this process) lives on and its lease (5 min
    by default) holds; the next push, from another process, reverts the push at once
    because its writer said it gave up."""
    uri = str(small_disk / "t")
    t = Table.create(uri, schema=SCHEMA)
    t.append(rows(0, 10))
    plan = writes.begin_write(uri, storage_options=None, incoming=SCHEMA, mode=writes.OVERWRITE, consistent_push=True)
    assert plan.entry_id is not None
    filler = mounts.fill(small_disk)
    with pytest.raises(errors.StorageFullError):
        writes.write_data(plan, rows(100, 2000).to_batches())
    writes.abort_write(plan, [])  # the revert commit does not fit: no error over the write's own
    entry = Table.open(uri).snapshot().lineage[plan.entry_id]
    assert entry.state.value == "IN_PROGRESS"
    assert recovery.gave_up(Table.open(uri).io, plan.entry_id)
    filler.unlink()

    out = push_from_another_process(uri)
    assert out["ok"], out
    assert out["recovered"] and out["recovered"][0]["entry"] == plan.entry_id  # type: ignore[index]
    assert "gave up" in out["recovered"][0]["reason"]  # type: ignore[index]
    t = Table.open(uri)
    assert t.snapshot().lineage[plan.entry_id].state.value == "REVERTED"
    assert t.to_arrow().column("id").to_pylist() == [7]
    assert not any(p.name.startswith(plan.entry_id) for p in (small_disk / "t" / recovery.LEASE_DIR).glob("*"))


def test_a_live_push_that_did_not_give_up_still_blocks(small_disk: Path) -> None:
    """The control: the same push without the abort (its writer still runs) is never
    reverted by another process while its lease holds."""
    uri = str(small_disk / "t")
    Table.create(uri, schema=SCHEMA).append(rows(0, 10))
    plan = writes.begin_write(uri, storage_options=None, incoming=SCHEMA, mode=writes.OVERWRITE, consistent_push=True)
    out = push_from_another_process(uri)
    assert not out["ok"] and plan.entry_id in str(out["error"])
    writes.abort_write(plan, [])
    assert Table.open(uri).snapshot().lineage[plan.entry_id].state.value == "REVERTED"


@pytest.mark.parametrize("free_bytes", [0, 4096, 8192, 16384])
def test_a_push_that_fills_the_disk_never_blocks_the_next_one(small_disk: Path, free_bytes: int) -> None:
    """The issue's run: a consistent push with a few KiB free. Wherever it fails (before
    its start, or after it with an abort that does not fit), it fails with the typed
    error of its own write, and the next push from another process goes through at once."""
    uri = str(small_disk / "t")
    t = Table.create(uri, schema=SCHEMA)
    t.append(rows(0, 10))
    filler = mounts.fill(small_disk, leave_bytes=free_bytes)
    with pytest.raises(errors.StorageFullError):
        t.overwrite(rows(100, 3000), consistent_push=True)
    stuck = [e for e in Table.open(uri).snapshot().lineage.values() if e.state.value == "IN_PROGRESS"]
    assert all(recovery.gave_up(t.io, e.id) for e in stuck)
    filler.unlink()
    out = push_from_another_process(uri)
    assert out["ok"], out
    assert Table.open(uri).to_arrow().column("id").to_pylist() == [7]
