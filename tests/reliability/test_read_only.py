"""A table on a read-only bind mount (a snapshot, a replica, a shared archive): every
version reads — through ``Table`` and through Spark — with pinning skipped and one
warning; every write is a typed ``StorageReadOnlyError`` naming the path.

Needs root for the bind mount (CI runs as root); the mount is removed whatever happens."""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support import mounts

from mvtable import Table, errors

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
PIN_WARNING = "without a reader pin"


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


@dataclass
class Mounted:
    uri: str  # the table, seen through the read-only mount
    versions: dict[int, pa.Table]  # every version as read before the mount
    changes: pa.Table


def build(uri: str) -> Table:
    """Every kind of commit: create, appends, a delete, an upsert, a consistent push (which
    leaves replaced segments for vacuum), another append."""
    t = Table.create(uri, schema=SCHEMA, primary_key=["id"], properties={"replacedSegmentsRetentionPeriod": "0s"})
    t.append(rows(list(range(10)), "a"))
    t.append(rows(list(range(10, 20)), "b"))
    t.delete(pc.field("id") < 3)
    t.upsert(rows([5, 6, 30], "u"))
    t.overwrite(rows(list(range(40, 45)), "p"), consistent_push=True)
    t.append(rows([50], "c"))
    t.append(rows([51], "c"))
    t.append(rows([52], "c"))
    return t


@pytest.fixture
def read_only_table(tmp_path: Path) -> Iterator[Mounted]:
    reason = mounts.mount_unavailable()
    if reason:
        pytest.skip(reason)
    t = build(str(tmp_path / "src" / "t"))
    versions = {v: t.to_arrow(version=v).sort_by("id") for v in range(t.version + 1)}
    changes = t.changes(1).sort_by([("_commit_version", "ascending"), ("id", "ascending")])
    time.sleep(0.01)  # the replaced segments' retention ("0s") has passed
    with mounts.read_only_bind(tmp_path / "src", tmp_path / "ro") as ro:
        yield Mounted(str(ro / "t"), versions, changes)


def pin_warnings(caplog: pytest.LogCaptureFixture) -> int:
    return sum(PIN_WARNING in r.getMessage() for r in caplog.records)


def test_every_version_reads_on_a_read_only_mount(read_only_table: Mounted, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mvtable")
    t = Table.open(read_only_table.uri)
    assert sorted(read_only_table.versions) == list(range(t.version + 1))
    for version, expected in read_only_table.versions.items():
        assert t.to_arrow(version=version).sort_by("id").equals(expected), version
        with t.pin(version) as pinned:
            assert not pinned.pin.pinned
            assert pinned.snapshot.version == version
    reader = t.scan(filter=pc.field("id") >= 40).to_reader()
    assert pa.Table.from_batches(list(reader), schema=reader.schema).num_rows == 8
    changes = t.changes(1).sort_by([("_commit_version", "ascending"), ("id", "ascending")])
    assert changes.equals(read_only_table.changes)
    assert t.history()[-1].operation == "APPEND"
    assert pin_warnings(caplog) == 1, "one warning per table and process, not one per read"


def _writes(t: Table) -> dict[str, Any]:
    return {
        "append": lambda: t.append(rows([100], "x")),
        "delete": lambda: t.delete(pc.field("id") == 50),
        "upsert": lambda: t.upsert(rows([50, 101], "y")),
        "overwrite": lambda: t.overwrite(rows([1], "z")),
        "consistent push": lambda: t.overwrite(rows([1], "z"), consistent_push=True),
        "compact": lambda: t.compact(min_input_files=2, target_file_size="1MiB"),
        "vacuum": lambda: t.vacuum(retention="0s", force=True),
        "export_iceberg": lambda: t.export_iceberg(),
        "export_delta": lambda: t.export_delta(),
    }


def test_every_write_on_a_read_only_mount_is_a_typed_error(read_only_table: Mounted) -> None:
    t = Table.open(read_only_table.uri)
    newest = t.version
    assert t.compact(min_input_files=2, target_file_size="1MiB", dry_run=True).bins, "compaction has work to do"
    assert t.vacuum(retention="0s", force=True, dry_run=True).files, "vacuum has work to do"
    for name, attempt in _writes(t).items():
        with pytest.raises((errors.StorageReadOnlyError, errors.ExportPathNotWritableError)) as info:
            attempt()
        err = info.value
        if name.startswith("export"):  # the export's own error, with the storage's as its cause
            assert isinstance(err, errors.ExportPathNotWritableError), name
            err = err.__cause__
        assert isinstance(err, errors.StorageReadOnlyError), name
        assert isinstance(err, errors.StoragePermissionError) and isinstance(err, PermissionError), name
        assert err.errno == errno.EROFS, name
        assert err.path.startswith(read_only_table.uri), (name, err.path)
        assert "read-only" in str(err) and err.path in str(err), name
    assert Table.open(read_only_table.uri).version == newest
    with pytest.raises(errors.StorageLocationError):
        Table.create(str(Path(read_only_table.uri).parent / "new"), schema=SCHEMA)


def test_spark_reads_every_version_on_a_read_only_mount(read_only_table: Mounted, spark: Any) -> None:
    for version, expected in read_only_table.versions.items():
        df = spark.read.format("mvtable").option("versionAsOf", version).load(read_only_table.uri)
        got = sorted((r["id"], r["name"]) for r in df.collect())
        assert got == sorted(zip(expected.column("id").to_pylist(), expected.column("name").to_pylist())), version
