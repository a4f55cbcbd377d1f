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
    assert schemas == {0: [(1, "id"), (2, "name"), (3, "qty")], 1: [(1, "id"), (2, "label")], 2: [(1, "id"), (2, "label"), (4, "qty")]}
    assert meta.snapshot_by_id(before + 1).schema_id == 0 and meta.current_snapshot().schema_id == 2
    old = meta.scan(snapshot_id=before + 1).to_arrow()
    assert old.column_names == ["id", "name", "qty"] and rows(old) == [{"id": 1, "name": "a", "qty": 10}, {"id": 2, "name": "b", "qty": 20}]
    new = meta.scan().to_arrow()
    assert rows(new) == [{"id": 1, "label": "a", "qty": None}, {"id": 3, "label": "c", "qty": 30}]
    assert rows(new) == rows(t.to_arrow())
