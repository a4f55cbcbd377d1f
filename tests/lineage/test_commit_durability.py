"""``commitDurability``: ``fsync`` (default) flushes each commit file and its folder before
the commit counts; ``os`` leaves that to the OS. Commits stay put-if-absent either way."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.conf import TableProperties
from mvtable.connector import Table
from mvtable.errors import SettingsError
from mvtable.lineage.actions import AddSegment
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.storage import open_file_io

from .test_concurrent_commits import seg


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """``(call, path)`` of every fsync/fdatasync this process makes, in order (the real
    calls still run)."""
    calls: list[tuple[str, str]] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def spy(fd: int, _real=real, _name=name) -> None:
            calls.append((_name, os.readlink(f"/proc/self/fd/{fd}")))
            _real(fd)

        monkeypatch.setattr(os, name, spy)
    return calls


def _data(n: int = 10) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64())})


def test_default_is_fsync_and_bad_values_are_refused(tmp_path: Path) -> None:
    assert TableProperties.from_strings({}).commit_durability == "fsync"
    assert TableProperties.from_strings({"commitDurability": "os"}).commit_fsync is False
    with pytest.raises(SettingsError, match="commitDurability: 'never' is not a durability; use 'fsync'"):
        TableProperties.from_strings({"commitDurability": "never"})
    with pytest.raises(SettingsError, match="commitDurability"):
        Table.create(str(tmp_path / "t"), schema=_data().schema, properties={"commitDurability": "none"})
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*.json"))


def test_fsync_tables_sync_every_commit(tmp_path: Path, synced: list[tuple[str, str]]) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=_data().schema)
    synced.clear()
    t.append(_data())
    segment = f"{uri}/{t.snapshot().visible_segments()[0].file.path}"
    paths = [path for _, path in synced]
    commit = f"{uri}/_mvtable/log/{t.version:020d}.json"
    # the new segment and its folder, then the commit file (still under its temporary
    # name) and the log folder once the commit has its name: a commit never names data a
    # power loss could take
    assert paths[:2] == [segment, f"{uri}/data"]
    assert os.path.dirname(paths[2]) == f"{uri}/_mvtable/log" and paths[3:] == [f"{uri}/_mvtable/log"]
    assert synced[2][0] == "fdatasync" and os.path.exists(commit)  # data only: its name is the folder's fsync


def test_fsync_tables_sync_deletion_vector_files_before_the_delete_commits(tmp_path: Path, synced: list[tuple[str, str]]) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=_data().schema, properties={"dvInlineMaxBytes": "0"})
    t.append(_data(1000))
    synced.clear()
    t.delete_rows({t.snapshot().visible_segment_ids()[0]: list(range(0, 1000, 3))})
    ref = next(iter(t.snapshot().dvs.values()))
    assert ref.path is not None
    paths = [path for _, path in synced]
    assert paths[0] == f"{uri}/{ref.path}"
    assert os.path.dirname(paths[2]) == f"{uri}/_mvtable/log"


def test_os_tables_never_sync_and_stay_put_if_absent(tmp_path: Path, synced: list[tuple[str, str]]) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=_data().schema, properties={"commitDurability": "os"})
    synced.clear()
    for _ in range(11):  # past checkpointInterval: the checkpoint is not synced either
        Table(uri).append(_data())
    assert synced == []
    assert t.version == 11 and t.scan().to_arrow().num_rows == 110
    assert any(name.endswith(".checkpoint.parquet") for name in os.listdir(f"{uri}/_mvtable/log"))

    # two writers that read the same version: exactly one gets it, the other retries on top
    a, b = CommitLog(open_file_io(uri), check_files=False), CommitLog(open_file_io(uri), check_files=False)
    read = a.snapshot()
    first = a.commit(read=read, operation=Operation.APPEND, build=lambda cur: [AddSegment(segment=seg("a1"))])
    second = b.commit(read=read, operation=Operation.APPEND, build=lambda cur: [AddSegment(segment=seg("b1"))])
    assert (first.commit.version, second.commit.version) == (12, 13) and second.attempts == 2
    assert open_file_io(uri).put_if_absent("_mvtable/log/x.json", b"1", durable=False) is True
    assert open_file_io(uri).put_if_absent("_mvtable/log/x.json", b"2", durable=False) is False
    assert synced == []
