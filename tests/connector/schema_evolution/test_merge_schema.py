"""``merge_schema=True`` / ``overwrite_schema=True`` on Python writes; a rolled-back push brings its old schema back."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.errors import InvalidOptionError, SchemaEvolutionError, SchemaMismatchError
from mvtable.lineage.enums import Operation

BASE = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("s", pa.struct([("x", pa.int32())]))])


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=BASE)
    table.append(pa.table({"id": [1, 2], "qty": pa.array([10, 20], pa.int32()), "s": [{"x": 1}, {"x": 2}]}, schema=BASE))
    return table


def wider(ids: list[int]) -> pa.Table:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("qty", pa.int64()),
            ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
            ("note", pa.string()),
        ]
    )
    return pa.table(
        {"id": ids, "qty": [i * 100 for i in ids], "s": [{"x": i, "y": f"y{i}"} for i in ids], "note": [f"n{i}" for i in ids]},
        schema=schema,
    )


def test_without_merge_new_columns_fail_as_before(t):
    with pytest.raises(SchemaMismatchError, match="unexpected columns"):
        t.append(wider([3]))


def test_merge_adds_and_widens_in_the_same_commit_as_the_data(t):
    before = t.version
    t.append(wider([3]), merge_schema=True)
    assert t.version == before + 1
    h = t.history()[-1]
    assert h.operation is Operation.APPEND
    assert h.parameters["schemaChanges"] == ["widen qty to int64", "add s.y", "add note"]
    assert t.snapshot().schema_id == 1
    out = t.to_arrow().sort_by("id").to_pylist()
    assert out == [
        {"id": 1, "qty": 10, "s": {"x": 1, "y": None}, "note": None},
        {"id": 2, "qty": 20, "s": {"x": 2, "y": None}, "note": None},
        {"id": 3, "qty": 300, "s": {"x": 3, "y": "y3"}, "note": "n3"},
    ]
    # an overwrite merges too
    t.overwrite(wider([4]).append_column("more", pa.array([True])), merge_schema=True)
    assert t.to_arrow().to_pylist() == [{"id": 4, "qty": 400, "s": {"x": 4, "y": "y4"}, "note": "n4", "more": True}]


def test_merge_refuses_what_is_no_widening(t):
    bad = pa.table({"id": [3], "qty": ["ten"], "s": [{"x": 1}]}, schema=pa.schema([("id", pa.int64()), ("qty", pa.string()),
                   ("s", pa.struct([("x", pa.int32())]))]))  # fmt: skip
    before = t.version
    with pytest.raises(SchemaEvolutionError, match="'qty'"):
        t.append(bad, merge_schema=True)
    assert t.version == before


def test_overwrite_schema_on_a_push_and_its_rollback(t):
    new = pa.table({"key": ["a", "b"], "value": [1.5, 2.5]})
    t.overwrite(new, consistent_push=True, overwrite_schema=True)
    assert t.schema.names == ["key", "value"]
    assert t.to_arrow().to_pylist() == [{"key": "a", "value": 1.5}, {"key": "b", "value": 2.5}]
    assert t.snapshot().last_field_id == 6  # fresh ids after the old 1-4
    entry = t.lineage()[-1].id
    t.rollback(entry=entry)
    assert t.schema.names == ["id", "qty", "s"]
    assert t.to_arrow().sort_by("id").to_pylist() == [{"id": 1, "qty": 10, "s": {"x": 1}}, {"id": 2, "qty": 20, "s": {"x": 2}}]
    assert t.snapshot().last_field_id == 6  # ids are never reused, even after the rollback


def test_overwrite_schema_needs_an_overwrite(t):
    with pytest.raises(InvalidOptionError, match="overwriteSchema"):
        t.write(wider([5]), mode="append", overwrite_schema=True)


def test_merge_writes_nulls_for_nullable_columns_the_data_lacks(t):
    with t.update_schema() as u:
        u.add_column("note", pa.string())
    old_writer = pa.table({"id": [5], "qty": pa.array([50], pa.int32()), "s": [{"x": 5}]}, schema=BASE)
    with pytest.raises(SchemaMismatchError, match="missing columns"):
        t.append(old_writer)  # without merge_schema, as before
    t.append(old_writer, merge_schema=True)
    assert t.to_arrow(filter=pc.field("id") == 5).to_pylist() == [{"id": 5, "qty": 50, "s": {"x": 5}, "note": None}]
