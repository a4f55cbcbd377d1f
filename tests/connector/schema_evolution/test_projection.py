"""``projection.resolve``: which physical column feeds each output column (pure, no files)."""

from __future__ import annotations

import pyarrow as pa

from mvtable.connector.schema_evolution.projection import resolve


def fid(name, type_, i):
    return pa.field(name, type_, metadata={b"PARQUET:field_id": str(i).encode()})


FILE = pa.schema([fid("a", pa.int32(), 1), fid("b", pa.string(), 2), fid("s", pa.struct([fid("x", pa.int16(), 4)]), 3)])


def test_the_same_schema_needs_no_projection():
    assert resolve(FILE, FILE) is None


def test_rename_drop_add_widen_and_nested():
    table = pa.schema(
        [
            fid("alpha", pa.int64(), 1),  # renamed + widened
            fid("s", pa.struct([fid("x", pa.int32(), 4), fid("y", pa.string(), 6)]), 3),  # nested widen + add
            fid("b", pa.string(), 5),  # dropped b (id 2) added again under its name
        ]
    )
    p = resolve(FILE, table)
    assert p is not None
    assert p.physical_columns(None) == ["a", "s"]
    data = pa.table({"a": pa.array([1, 2], pa.int32()), "s": pa.array([{"x": 7}, None], pa.struct([pa.field("x", pa.int16())]))})
    out = p.conform(data, None)
    assert out.schema.names == ["alpha", "s", "b"]
    assert out.to_pylist() == [{"alpha": 1, "s": {"x": 7, "y": None}, "b": None}, {"alpha": 2, "s": None, "b": None}]
    assert out.schema.field("alpha").type == pa.int64()


def test_files_without_ids_get_them_by_position():
    plain = pa.schema([("a", pa.int32()), ("b", pa.string()), ("s", pa.struct([("x", pa.int16())]))])
    assert resolve(plain, FILE) is None  # same positions, same ids
    renamed = pa.schema([fid("a", pa.int32(), 1), fid("bee", pa.string(), 2), FILE.field("s")])
    p = resolve(plain, renamed)
    assert p is not None and p.physical_columns(["bee"]) == ["b"]
