"""An export continues only metadata this table's exports wrote: another table's export
(a table deleted and created again at the same location) or foreign or damaged files in
``metadata/`` / ``_delta_log/`` are refused with a typed error, and nothing is written."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.cli import EXIT_ERROR, main
from mvtable.errors import ExportConflictError, ExportOfAnotherTableError, ForeignExportMetadataError

SCHEMA = pa.schema([("id", pa.int64())])
FOLDERS = {"iceberg": "metadata", "delta": "_delta_log"}


def ids(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def export(t: Table, fmt: str, **kw: bool) -> object:
    return t.export_iceberg(**kw) if fmt == "iceberg" else t.export_delta(**kw)


def listing(root: str, folder: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, folder)))


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
@pytest.mark.parametrize("new_appends", [1, 5])  # fewer versions than the old export, and more
def test_a_table_created_again_at_the_same_path_refuses_the_old_tables_export(tmp_path: Path, fmt: str, new_appends: int) -> None:
    path = str(tmp_path / "t")
    old = Table.create(path, schema=SCHEMA)
    for i in range(3):
        old.append(ids(i * 10, 10))
    export(old, fmt)
    shutil.rmtree(os.path.join(path, "_mvtable"))
    shutil.rmtree(os.path.join(path, "data"))
    t = Table.create(path, schema=SCHEMA)
    for i in range(new_appends):
        t.append(ids(1000 + i, 1))
    before = listing(path, FOLDERS[fmt])
    with pytest.raises(ExportOfAnotherTableError, match="(?s)another table.*Move"):
        export(t, fmt, all_versions=True)
    assert listing(path, FOLDERS[fmt]) == before


ICEBERG_DOCS = {
    "snapshot without summary": {"snapshots": [{"snapshot-id": 1}]},
    "snapshots of ints": {"snapshots": [1, 2]},
    "version not a number": {"snapshots": [{"summary": {"mvtable.version": "x"}}]},
    "no snapshot-log": {"snapshots": [{"summary": {"mvtable.version": "0"}}]},
    "a list": [1, 2],
}
DELTA_COMMITS = {
    "not JSON": b"not json\n",
    "version not a number": b'{"commitInfo": {"mvtableVersion": "abc"}}\n',
    "add without path": b'{"add": {"size": 1}}\n',
    "a list": b"[1,2]\n",
    "not UTF-8": b"\xff\xfe\n",
    "another writer's commit": b'{"commitInfo": {"operation": "WRITE"}}\n',
}
BAD = [("iceberg", "metadata/v1.metadata.json", json.dumps(doc).encode()) for doc in ICEBERG_DOCS.values()]
BAD += [("iceberg", "metadata/v1.metadata.json", b"\xff\xfe garbage")]
BAD += [("delta", f"_delta_log/{0:020d}.json", body) for body in DELTA_COMMITS.values()]


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(ids(0, 10))
    return t


@pytest.mark.parametrize(("fmt", "name", "body"), BAD)
def test_foreign_or_damaged_export_metadata_is_refused_with_a_typed_error(table: Table, fmt: str, name: str, body: bytes) -> None:
    os.makedirs(os.path.join(table.uri, FOLDERS[fmt]))
    with open(os.path.join(table.uri, name), "wb") as f:
        f.write(body)
    with pytest.raises(ForeignExportMetadataError, match=f"(?s){name} was not written by mvtable.*move {FOLDERS[fmt]}/ away"):
        export(table, fmt)
    assert listing(table.uri, FOLDERS[fmt]) == [os.path.basename(name)]


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_a_directory_where_the_next_metadata_file_goes_is_not_a_retryable_conflict(table: Table, fmt: str) -> None:
    name = "metadata/v1.metadata.json" if fmt == "iceberg" else f"_delta_log/{0:020d}.json"
    os.makedirs(os.path.join(table.uri, name))
    with pytest.raises(ForeignExportMetadataError, match="not a regular file") as caught:
        export(table, fmt)
    assert not isinstance(caught.value, ExportConflictError)


def test_the_cli_reports_foreign_metadata_as_a_json_error(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    os.makedirs(os.path.join(table.uri, "_delta_log"))
    with open(os.path.join(table.uri, "_delta_log", f"{0:020d}.json"), "wb") as f:
        f.write(b"not json\n")
    assert main(["export", "delta", table.uri, "--json"]) == EXIT_ERROR
    report = json.loads(capsys.readouterr().out)
    assert report["type"] == "ForeignExportMetadataError" and report["exit_code"] == EXIT_ERROR
    assert "was not written by mvtable" in report["error"] and "move" in report["hint"]
