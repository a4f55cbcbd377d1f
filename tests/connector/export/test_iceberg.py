"""Iceberg v3 export read back by pyiceberg: every version, deletes applied, no copies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.table import StaticTable

from mvtable.connector import Table
from mvtable.connector.export.common import table_location
from mvtable.connector.export.types import iceberg_schema
from mvtable.errors import ExportPathNotWritableError, UnsupportedExportTypeError
from mvtable.lineage.actions import SetDeletionVector
from mvtable.lineage.enums import Operation
from mvtable.visibility import write_dvs

from .conftest import SCHEMA, rows, sorted_rows, tree


def iceberg_rows(metadata: str, version: int) -> list[dict]:
    table = StaticTable.from_metadata(metadata)
    return sorted_rows(table.scan(snapshot_id=version + 1).to_arrow())


def test_pyiceberg_reads_every_version_with_deletes_applied(history_table: Table) -> None:
    t = history_table
    result = t.export_iceberg(all_versions=True)
    assert result.versions == tuple(range(t.version + 1))
    for v in range(t.version + 1):
        expected = sorted_rows(t.scan(version=v).to_arrow())
        assert iceberg_rows(result.metadata, v) == expected, f"version {v}"
    # the newest snapshot is Iceberg's current one, and it has deletes to apply
    current = StaticTable.from_metadata(result.metadata)
    assert current.current_snapshot().summary["mvtable.version"] == str(t.version)
    assert sorted_rows(current.scan().to_arrow()) == sorted_rows(t.scan().to_arrow())
    assert any(task.delete_files for task in current.scan().plan_files())


def test_export_writes_metadata_only_and_references_dv_files_in_place(history_table: Table) -> None:
    t = history_table
    before = tree(t.uri, "data", "_mvtable")
    result = t.export_iceberg(all_versions=True)
    assert tree(t.uri, "data", "_mvtable") == before
    written = tree(t.uri, "metadata")
    assert len(written) == result.files_written
    assert sum(os.path.getsize(os.path.join(t.uri, p)) for p in written) == result.bytes_written
    # the one inline DV (a one-row delete; the restore's clone shares it) has no file to
    # point at: it is the only copy, made once for all the versions that use it
    inline = {ref for ref in t.snapshot().dvs.values() if ref.inline is not None}
    assert len(inline) == 1 and result.copied_dv_bytes == inline.pop().size
    data_bytes = sum(os.path.getsize(os.path.join(t.uri, p)) for p in before if p.startswith("data/"))
    assert result.bytes_written < data_bytes
    tasks = StaticTable.from_metadata(result.metadata).scan().plan_files()
    dv_files = {d.file_path for task in tasks for d in task.delete_files}
    assert any(p.startswith(f"file://{t.uri}/_mvtable/dv/") for p in dv_files)
    assert all(task.file.file_path.startswith(f"file://{t.uri}/data/") for task in tasks)


def test_dv_files_from_before_location_footers_are_copied_once(tmp_path) -> None:
    """A DV file whose Puffin footer names a segment id (what mvtable wrote before exports
    existed) cannot be referenced: pyiceberg matches blobs by that name. Its blob is copied
    into the export and the rows still come out right."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 2000))
    snap = t.snapshot()
    (sid,) = snap.visible_segment_ids()
    refs = write_dvs(t.io, {sid: list(range(0, 2000, 3))}, inline_max_bytes=0)  # no data_files: old footer
    t.commit_log.commit(read=snap, operation=Operation.DELETE, build=lambda _: [SetDeletionVector(segment_id=sid, dv=refs[sid])])
    result = t.export_iceberg()
    assert result.copied_dv_bytes == refs[sid].size
    assert iceberg_rows(result.metadata, t.version) == sorted_rows(t.scan().to_arrow())
    assert len(iceberg_rows(result.metadata, t.version)) == 2000 - 667


def test_incremental_exports_keep_older_snapshots(history_table: Table) -> None:
    t = history_table
    first = t.export_iceberg()
    assert first.versions == (t.version,) and first.metadata.endswith("/metadata/v1.metadata.json")
    t.append(rows(9000, 10))
    second = t.export_iceberg()
    assert second.versions == (t.version,) and second.metadata.endswith("/metadata/v2.metadata.json")
    assert iceberg_rows(second.metadata, t.version - 1) == sorted_rows(t.scan(version=t.version - 1).to_arrow())
    assert iceberg_rows(second.metadata, t.version) == sorted_rows(t.scan().to_arrow())
    meta = json.loads(open(second.metadata.removeprefix("file://")).read())
    assert [e["metadata-file"] for e in meta["metadata-log"]] == [first.metadata]
    assert open(os.path.join(t.uri, "metadata", "version-hint.text")).read() == "2"
    # nothing new: nothing written; an older version is never added after a newer one
    again = t.export_iceberg(all_versions=True)
    assert again.versions == () and again.files_written == 0


def test_iceberg_compat_exports_after_every_commit(tmp_path, caplog) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, properties={"icebergCompat": "true"})
    t.append(rows(0, 100))
    t.delete(pa.compute.field("id") < 10)
    hint = os.path.join(t.uri, "metadata", "version-hint.text")
    metadata = f"file://{t.uri}/metadata/v{open(hint).read()}.metadata.json"
    assert StaticTable.from_metadata(metadata).current_snapshot().summary["mvtable.version"] == str(t.version)
    assert iceberg_rows(metadata, t.version) == sorted_rows(t.scan().to_arrow())
    # an export that fails (a file where metadata/ should be) never fails the commit
    for name in os.listdir(os.path.join(t.uri, "metadata")):
        os.remove(os.path.join(t.uri, "metadata", name))
    os.rmdir(os.path.join(t.uri, "metadata"))
    open(os.path.join(t.uri, "metadata"), "w").close()
    t.append(rows(100, 5))
    assert t.scan().count() == 95
    assert "post-commit step icebergCompat export failed" in caplog.text


def test_without_iceberg_compat_commits_export_nothing(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 10))
    assert not os.path.exists(os.path.join(t.uri, "metadata"))


def test_unwritable_metadata_path_is_typed_and_leaves_the_table_alone(history_table: Table) -> None:
    t = history_table
    open(os.path.join(t.uri, "metadata"), "w").close()
    before = tree(t.uri, "data", "_mvtable")
    with pytest.raises(ExportPathNotWritableError, match="metadata"):
        t.export_iceberg(all_versions=True)
    assert tree(t.uri, "data", "_mvtable") == before
    assert os.path.getsize(os.path.join(t.uri, "metadata")) == 0


def test_type_iceberg_cannot_hold_is_typed() -> None:
    # create refuses a negative scale now; a table created before that still has one
    schema = {"type": "struct", "fields": [{"name": "d", "type": "decimal(5,-2)", "nullable": True, "metadata": {}}]}
    with pytest.raises(UnsupportedExportTypeError, match="'d'.*Iceberg.*decimal\\(5,-2\\)"):
        iceberg_schema(schema)


def test_a_reused_puffin_with_a_stale_blob_does_not_hide_rows_a_restore_brought_back(tmp_path: Path) -> None:
    # v3 and v4 put inline DVs on B and then A; the run exporting v4 and v5 copies both
    # into one Puffin file at v4. v5 restores v3: A is back without its DV while B keeps
    # its own, so v5 must not reuse that file (pyiceberg would apply A's stale blob too)
    schema = pa.schema([("id", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema)
    t.append(pa.table({"id": pa.array(range(0, 1000), pa.int64())}))
    t.append(pa.table({"id": pa.array(range(1000, 2000), pa.int64())}))
    t.delete(pc.field("id") == 1500)
    t.export_iceberg()
    t.delete(pc.field("id") == 5)
    t.restore(version=3)
    assert all(ref.inline is not None for ref in t.snapshot(4).dvs.values())
    result = t.export_iceberg(all_versions=True)
    assert result.versions == (4, 5)
    for v in (3, 4, 5):
        expected = sorted(t.scan(version=v).to_arrow().to_pylist(), key=lambda r: r["id"])
        assert iceberg_rows(result.metadata, v) == expected, f"version {v}"
    assert {"id": 5} in iceberg_rows(result.metadata, 5)


@pytest.mark.parametrize("name", ["my table", "t[1]", "t_{a,b}", "t*'%20", "t?x", "t#y"])
def test_pyiceberg_reads_the_export_of_a_table_whose_path_has_special_characters(tmp_path: Path, name: str) -> None:
    # pyiceberg opens locations as written (no percent-decoding), and cuts a file:// URI at
    # ? or #: the export names files by the raw path, DV files in place included
    t = Table.create(str(tmp_path / name), schema=SCHEMA)
    t.append(rows(0, 3000))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 3), 1))  # a DV file
    t.delete(pc.field("id") == 2000)
    result = t.export_iceberg(all_versions=True)
    for v in range(t.version + 1):
        assert iceberg_rows(result.metadata, v) == sorted_rows(t.scan(version=v).to_arrow()), f"version {v}"
    tasks = StaticTable.from_metadata(result.metadata).scan().plan_files()
    assert any(
        d.file_path.startswith(f"{result.metadata.split('/metadata/')[0]}/_mvtable/dv/")
        for task in tasks
        for d in task.delete_files
    )


def test_a_dv_file_whose_other_blob_is_stale_is_not_referenced_in_place(tmp_path: Path) -> None:
    # one DV file holds the DVs of segments A and B; a later version gives A another DV
    # (one that keeps rows the old one deleted) while B keeps its blob in that file. Used in
    # place, the file would still apply A's old blob to A (pyiceberg applies every blob)
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 2000))
    t.append(rows(2000, 2000))
    snap = t.snapshot()
    a, b = snap.visible_segment_ids()
    located = {sid: f"{table_location(t.io)}/{snap.segments[sid].file.path}" for sid in (a, b)}
    both = write_dvs(t.io, {a: list(range(0, 2000, 3)), b: list(range(0, 2000, 5))}, inline_max_bytes=0, data_files=located)
    t.commit_log.commit(
        read=snap,
        operation=Operation.DELETE,
        build=lambda _: [SetDeletionVector(segment_id=sid, dv=both[sid]) for sid in (a, b)],
    )
    other = write_dvs(t.io, {a: list(range(1, 2000, 7))}, inline_max_bytes=0, data_files={a: located[a]})
    t.commit_log.commit(
        read=t.snapshot(), operation=Operation.DELETE, build=lambda _: [SetDeletionVector(segment_id=a, dv=other[a])]
    )
    result = t.export_iceberg(all_versions=True)
    for v in range(t.version + 1):
        assert iceberg_rows(result.metadata, v) == sorted_rows(t.scan(version=v).to_arrow()), f"version {v}"
    shared = f"{table_location(t.io)}/{both[b].path}"
    tasks = StaticTable.from_metadata(result.metadata).scan(snapshot_id=t.version).plan_files()  # version t.version - 1: in place
    assert any(d.file_path == shared for task in tasks for d in task.delete_files)
    tasks = StaticTable.from_metadata(result.metadata).scan().plan_files()
    assert all(d.file_path != shared for task in tasks for d in task.delete_files)
