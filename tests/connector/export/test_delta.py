"""Delta export read back by delta-kernel readers (polars, deltalake's DataFusion engine)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import deltalake
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from mvtable.connector import Table
from mvtable.connector.export.delta import z85
from mvtable.errors import ExportPathNotWritableError, UnsupportedExportTypeError

from .conftest import rows, sorted_rows, tree


def delta_rows(uri: str, version: int) -> list[dict]:
    table = DeltaTable(uri, version=version)
    return sorted_rows(pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all()))


def test_z85_matches_the_reference_vector() -> None:
    assert z85(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert z85(b"\x00") == "00000"  # padded to 4 bytes; sizeInBytes says 1


def test_delta_readers_see_every_version_with_deletes_applied(history_table: Table) -> None:
    t = history_table
    result = t.export_delta(all_versions=True)
    assert result.versions == tuple(range(t.version + 1))  # Delta version v is mvtable version v here
    for v in range(1, t.version + 1):
        expected = sorted_rows(t.scan(version=v).to_arrow())
        assert delta_rows(t.uri, v) == expected, f"deltalake, version {v}"
        assert sorted_rows(pl.read_delta(t.uri, version=v).to_arrow()) == expected, f"polars, version {v}"


def test_delta_log_names_files_relative_to_the_table_root(history_table: Table) -> None:
    t = history_table
    before = tree(t.uri, "data", "_mvtable")
    result = t.export_delta()
    assert tree(t.uri, "data", "_mvtable") == before
    assert result.files_written == 1 and result.bytes_written == os.path.getsize(
        os.path.join(t.uri, "_delta_log", f"{0:020d}.json")
    )
    actions = [json.loads(line) for line in open(os.path.join(t.uri, "_delta_log", f"{0:020d}.json"))]
    adds = [a["add"] for a in actions if "add" in a]
    assert {a["path"] for a in adds} == {s.file.path for s in t.snapshot().visible_segments()}
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert protocol["readerFeatures"] == ["deletionVectors"] and protocol["minReaderVersion"] == 3
    dvs = [a["deletionVector"] for a in adds if "deletionVector" in a]
    assert dvs and all(dv["storageType"] == "i" for dv in dvs)
    # inline DVs are the DV bytes again, in the log: counted, never hidden
    assert result.copied_dv_bytes == sum(dv["sizeInBytes"] for dv in dvs)


def test_incremental_delta_exports_append_commits(history_table: Table) -> None:
    t = history_table
    assert t.export_delta().versions == (t.version,)
    t.append(rows(9000, 10))
    t.delete(pa.compute.field("id") == 9001)
    second = t.export_delta(all_versions=True)
    assert second.versions == (t.version - 1, t.version)
    commits = sorted(os.listdir(os.path.join(t.uri, "_delta_log")))
    assert commits == [f"{v:020d}.json" for v in range(3)]
    for delta_version, v in enumerate((t.version - 2, t.version - 1, t.version)):
        assert delta_rows(t.uri, delta_version) == sorted_rows(t.scan(version=v).to_arrow())
    assert t.export_delta().versions == ()


def test_deltalake_pyarrow_reader_refuses_deletion_vectors(history_table: Table) -> None:
    """The README says deltalake's own pyarrow reader cannot read DV tables (QueryBuilder can)."""
    history_table.export_delta()
    with pytest.raises(deltalake.exceptions.DeltaProtocolError, match="deletionVectors"):
        DeltaTable(history_table.uri).to_pyarrow_table()


def test_delta_typed_errors_leave_the_table_alone(tmp_path, history_table: Table) -> None:
    t = Table.create(str(tmp_path / "names"), schema=pa.schema([("order id", pa.int64())]))
    with pytest.raises(UnsupportedExportTypeError, match="'order id'.*Delta"):
        t.export_delta()
    assert not os.path.exists(os.path.join(t.uri, "_delta_log"))
    open(os.path.join(history_table.uri, "_delta_log"), "w").close()
    before = tree(history_table.uri, "data", "_mvtable")
    with pytest.raises(ExportPathNotWritableError, match="_delta_log"):
        history_table.export_delta()
    assert tree(history_table.uri, "data", "_mvtable") == before


def test_delta_time_travel_by_timestamp_lands_on_the_version_of_that_time(tmp_path: Path) -> None:
    # delta-rs times a commit by its file's mtime: the export dates each commit file with
    # the mvtable commit's time, so an export made later still travels to the right version
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    for i in range(3):
        time.sleep(0.05)
        t.append(pa.table({"id": pa.array([i], pa.int64())}))
    time.sleep(0.5)
    t.export_delta(all_versions=True)
    for entry in t.history()[1:]:
        expected = t.scan(timestamp=entry.timestamp).count()
        assert expected == entry.version
        dtab = DeltaTable(t.uri)
        dtab.load_as_version(entry.timestamp)
        assert dtab.version() == entry.version
        assert pl.read_delta(t.uri, version=entry.timestamp).height == expected
    first = os.path.join(t.uri, "_delta_log", f"{1:020d}.json")
    with open(first) as f:
        info = next(json.loads(line)["commitInfo"] for line in f if "commitInfo" in line)
    assert abs(os.path.getmtime(first) * 1000 - info["timestamp"]) < 1
