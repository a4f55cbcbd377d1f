"""A table read with credentials that may not write: an S3 identity allowed only to read
and list (SeaweedFS), and a local user without write permission on the table's folders.
Every version reads, pinning is skipped with one warning, every write is a typed
``StoragePermissionError`` naming the path."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.s3_seaweed import SEAWEED_READER_KEY, SEAWEED_READER_SECRET

from mvtable import Table, errors

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
PIN_WARNING = "without a reader pin"


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def build(uri: str, storage_options: dict[str, Any] | None = None) -> dict[int, list[int]]:
    t = Table.create(uri, schema=SCHEMA, storage_options=storage_options, properties={"dvInlineMaxBytes": "0"})
    t.append(rows(list(range(10)), "a"))
    t.delete(pc.field("id") < 3)  # a DV file
    t.overwrite(rows(list(range(40, 45)), "p"), consistent_push=True)
    t.append(rows([50], "c"))
    return {v: sorted(t.to_arrow(version=v).column("id").to_pylist()) for v in range(t.version + 1)}


def test_read_only_s3_credentials_read_every_version(seaweedfs_s3: Any, caplog: pytest.LogCaptureFixture) -> None:
    uri = seaweedfs_s3.url("tables/t")
    expected = build(uri, seaweedfs_s3.storage_options())
    reader_options = {
        **seaweedfs_s3.storage_options(),
        "key": SEAWEED_READER_KEY,
        "secret": SEAWEED_READER_SECRET,
    }
    t = Table.open(uri, storage_options=reader_options)
    caplog.clear()
    for version, ids in expected.items():
        assert sorted(t.to_arrow(version=version).column("id").to_pylist()) == ids, version
    assert t.changes(1).num_rows > 0
    assert sum(PIN_WARNING in r.getMessage() for r in caplog.records) == 1

    newest = t.version
    attempts = {
        "append": lambda: t.append(rows([100], "x")),
        "delete": lambda: t.delete(pc.field("id") == 50),
        "consistent push": lambda: t.overwrite(rows([1], "z"), consistent_push=True),
    }
    for name, attempt in attempts.items():
        with pytest.raises(errors.StoragePermissionError) as info:
            attempt()
        assert info.value.errno == errno.EACCES, name
        assert info.value.path.startswith(uri), (name, info.value.path)
    assert Table.open(uri, storage_options=seaweedfs_s3.storage_options()).version == newest


AS_NOBODY = """
import json, os, sys, logging
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import pyarrow as pa, pyarrow.compute as pc, pyarrow.dataset, pyarrow.parquet
from mvtable import Table, errors
import mvtable.connector.compaction.auto, mvtable.connector.vacuum, mvtable.connector.gc
t = Table.open(sys.argv[1])
t.to_arrow()  # imports what a read imports, while the installed packages can be read
import encodings.ascii  # opened text files (write intents read /proc) decode with it
os.setgid(65534)  # from here on: a user who may read the table but not write it
os.setuid(65534)
out = {"versions": {v: sorted(t.to_arrow(version=v).column("id").to_pylist()) for v in range(t.version + 1)}, "writes": {}}
for name, attempt in {
    "append": lambda: t.append(pa.table({"id": pa.array([100], pa.int64()), "name": ["x"]})),
    "delete": lambda: t.delete(pc.field("id") == 60),
    "vacuum": lambda: t.vacuum(retention="0s", force=True),
}.items():
    try:
        attempt()
        out["writes"][name] = "no error"
    except errors.StoragePermissionError as exc:
        out["writes"][name] = [type(exc).__name__, exc.errno, exc.path, exc.operation]
print(json.dumps(out))
"""


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A folder every user may traverse (pytest's own tmp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="mvtable-perm-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_user_without_write_permission_reads_every_version(world_readable_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("switching to an unprivileged user needs root (CI runs as root)")
    tmp_path = world_readable_dir
    root = tmp_path / "t"
    expected = build(str(root))
    Table.open(str(root)).overwrite(rows([60], "d"))  # leaves an unreachable segment for vacuum
    expected[max(expected) + 1] = [60]
    tmp_path.chmod(0o755)
    for p in [tmp_path, *tmp_path.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    done = subprocess.run([sys.executable, "-c", AS_NOBODY, str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert {int(v): ids for v, ids in out["versions"].items()} == expected
    assert done.stderr.count(PIN_WARNING) == 1
    for name, got in out["writes"].items():
        assert got != "no error", name
        kind, code, path, _operation = got
        assert kind == "StoragePermissionError" and code == errno.EACCES, (name, got)
        assert path.startswith(str(root)), (name, path)
