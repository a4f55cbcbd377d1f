"""Exports after add, rename, drop + re-add: Iceberg keeps the field ids, every schema and each snapshot's schema
id (pyiceberg reads every version right); Delta with column mapping mode ``id``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import StaticTable

from mvtable.connector import Table

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("qty", pa.int32())])


def evolved(tmp_path) -> tuple[Table, int]:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"], "qty": pa.array([10, 20], pa.int32())}))
    before = t.version
    with t.update_schema() as u:
        u.rename_column("name", "label").drop_column("qty")
    with t.update_schema() as u:
        u.add_column("qty", pa.int64())  # the old name, a new id: old rows read null
    t.append(pa.table({"id": pa.array([3], pa.int64()), "label": ["c"], "qty": pa.array([30], pa.int64())}))
    t.delete(pc.field("id") == 2)
    return t, before


def rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_iceberg_keeps_ids_every_schema_and_snapshot_schema_ids(tmp_path):
    t, before = evolved(tmp_path)
    result = t.export_iceberg(all_versions=True)
    meta = StaticTable.from_metadata(result.metadata)
    schemas = {s.schema_id: [(f.field_id, f.name) for f in s.fields] for s in meta.schemas().values()}
    assert schemas == {
        0: [(1, "id"), (2, "name"), (3, "qty")],
        1: [(1, "id"), (2, "label")],
        2: [(1, "id"), (2, "label"), (4, "qty")],
    }
    assert meta.snapshot_by_id(before + 1).schema_id == 0 and meta.current_snapshot().schema_id == 2
    old = meta.scan(snapshot_id=before + 1).to_arrow()
    assert old.column_names == ["id", "name", "qty"] and rows(old) == [
        {"id": 1, "name": "a", "qty": 10},
        {"id": 2, "name": "b", "qty": 20},
    ]
    new = meta.scan().to_arrow()
    assert rows(new) == [{"id": 1, "label": "a", "qty": None}, {"id": 3, "label": "c", "qty": 30}]
    assert rows(new) == rows(t.to_arrow())


def test_delta_export_switches_to_column_mapping_id_after_a_rename(tmp_path):
    import json
    from pathlib import Path

    import polars as pl
    import pytest
    from deltalake import DeltaTable, QueryBuilder

    t, before = evolved(tmp_path)
    t.export_delta(all_versions=True)
    log = sorted(Path(t.uri, "_delta_log").glob("*.json"))
    metas = [json.loads(line)["metaData"] for p in log for line in p.read_text().splitlines() if '"metaData"' in line]
    assert metas[0]["configuration"].get("delta.columnMapping.mode") is None  # names, until a column was renamed
    last = json.loads(metas[-1]["schemaString"])
    assert metas[-1]["configuration"]["delta.columnMapping.mode"] == "id"
    fields = [
        (f["name"], f["metadata"]["delta.columnMapping.id"], f["metadata"]["delta.columnMapping.physicalName"])
        for f in last["fields"]
    ]
    assert fields == [("id", 1, "id"), ("label", 2, "name"), ("qty", 4, "qty")]  # physical names stay

    def delta(version: int | None = None) -> list[dict]:
        table = DeltaTable(t.uri) if version is None else DeltaTable(t.uri, version=version)
        return rows(pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all()))

    assert delta(before) == [{"id": 1, "name": "a", "qty": 10}, {"id": 2, "name": "b", "qty": 20}]
    # delta-rs resolves mode-id columns by physical name, not by Parquet field id: after the rename
    # it misreads the files (docs/schema.md says so); this fails once it reads by id, to update the docs
    assert delta() != rows(t.to_arrow()) == [{"id": 1, "label": "a", "qty": None}, {"id": 3, "label": "c", "qty": 30}]
    # polars' Delta reader has no column mapping: it refuses (docs/schema.md says so); before the rename it reads
    assert rows(pl.read_delta(t.uri, version=before).to_arrow()) == delta(before)
    with pytest.raises(Exception, match="columnMapping"):
        pl.read_delta(t.uri)


def test_iceberg_first_exported_after_a_rename_of_a_table_with_a_list_column(tmp_path):
    # pyiceberg maps a file by name when its list elements carry no field id, as mvtable's files:
    # the mapping must hold the names the older files were written with, not only today's
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("tags", pa.list_(pa.string()))])
    t = Table.create(str(tmp_path / "t"), schema=schema)
    t.append(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"], "tags": [["x"]]}, schema=schema))
    with t.update_schema() as u:
        u.rename_column("name", "label")
    t.append(pa.table({"id": pa.array([2], pa.int64()), "label": ["b"], "tags": [["y"]]}, schema=t.schema))
    with t.update_schema() as u:
        u.rename_column("label", "title")
    meta = StaticTable.from_metadata(t.export_iceberg().metadata)
    assert (
        rows(meta.scan().to_arrow())
        == rows(t.to_arrow())
        == [
            {"id": 1, "title": "a", "tags": ["x"]},
            {"id": 2, "title": "b", "tags": ["y"]},
        ]
    )
