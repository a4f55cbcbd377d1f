"""The write schema check: a mismatch inside a nested type names both types in full."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mvtable.connector import Table
from mvtable.connector.schema import check_write_schema, schema_to_json
from mvtable.errors import SchemaMismatchError, UnsupportedTypeError

ST = pa.struct([("a", pa.int32()), ("b", pa.string())])
TABLE = schema_to_json(
    pa.schema([("id", pa.int64()), ("st", ST), ("tags", pa.list_(ST)), ("m", pa.map_(pa.string(), pa.list_(pa.int64())))])
)


def data(**changed: pa.DataType) -> pa.Schema:
    types = {"id": pa.int64(), "st": ST, "tags": pa.list_(ST), "m": pa.map_(pa.string(), pa.list_(pa.int64())), **changed}
    return pa.schema(list(types.items()))


@pytest.mark.parametrize(
    ("column", "changed", "shown"),
    [
        (
            "st",
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
            "st (table: struct<a: int32, b: string>, data: struct<a: int64, b: string>)",
        ),
        (
            "st",
            pa.struct([("b", pa.string()), ("a", pa.int32())]),
            "st (table: struct<a: int32, b: string>, data: struct<b: string, a: int32>)",
        ),
        (
            "st",
            pa.struct([("a", pa.int32()), ("b", pa.string()), ("c", pa.bool_())]),
            "st (table: struct<a: int32, b: string>, data: struct<a: int32, b: string, c: bool>)",
        ),
        (
            "tags",
            pa.list_(pa.struct([("a", pa.int32())])),
            "tags (table: list<element: struct<a: int32, b: string>>, data: list<element: struct<a: int32>>)",
        ),
        (
            "m",
            pa.map_(pa.string(), pa.list_(pa.int32())),
            "m (table: map<string, list<element: int64>>, data: map<string, list<element: int32>>)",
        ),
    ],
)
def test_a_nested_mismatch_shows_both_types_in_full(column, changed, shown) -> None:
    with pytest.raises(SchemaMismatchError) as err:
        check_write_schema(TABLE, data(**{column: changed}))
    assert f"type mismatch in {shown}" in str(err.value)


def test_struct_fields_that_differ_only_in_case_match() -> None:
    upper = pa.struct([("A", pa.int32()), ("B", pa.string())])
    assert check_write_schema(TABLE, data(st=upper, tags=pa.list_(upper))) == ["id", "st", "tags", "m"]


@pytest.mark.parametrize(
    ("column_type", "named"),
    [
        (pa.struct([("x", pa.int64()), ("X", pa.int64())]), "st"),
        (pa.list_(pa.struct([("id", pa.int64()), ("s", pa.struct([("ab", pa.int32()), ("aB", pa.int32())]))])), "st[].s"),
        (pa.map_(pa.string(), pa.struct([("v", pa.int32()), ("V", pa.int32())])), "st.value"),
    ],
)
def test_struct_fields_that_differ_only_in_case_are_refused_at_create(
    tmp_path: Path, column_type: pa.DataType, named: str
) -> None:
    # a write matches struct fields case-insensitively (as columns): x and X could not be
    # told apart, so the table is refused as one with columns a and A is
    schema = pa.schema([("id", pa.int64()), ("st", column_type)])
    with pytest.raises(
        SchemaMismatchError, match=rf"duplicate field names \(case-insensitive\) in struct column {re.escape(named)}:"
    ):
        Table.create(str(tmp_path / "t"), schema=schema)
    assert not os.path.exists(tmp_path / "t" / "_mvtable")
    Table.create(
        str(tmp_path / "ok"), schema=pa.schema([("id", pa.int64()), ("st", pa.struct([("x", pa.int64()), ("y", pa.int64())]))])
    )


@pytest.mark.parametrize("decimal", [pa.decimal128(5, -2), pa.decimal128(5, 6), pa.decimal128(10, 12)])
def test_decimals_with_a_negative_scale_or_one_above_the_precision_are_refused_at_create(
    tmp_path: Path, decimal: pa.DataType
) -> None:
    # Parquet (and Spark) cannot store them: every append would fail with a raw error
    schema = pa.schema([("id", pa.int64()), ("c", decimal)])
    with pytest.raises(UnsupportedTypeError, match=r"column c: decimal scale"):
        Table.create(str(tmp_path / "t"), schema=schema)
    assert not os.path.exists(tmp_path / "t" / "_mvtable")


def test_segments_carry_ids_on_list_elements_and_map_entries(tmp_path):
    """Every field of a segment has a Parquet field id, elements and map entries too (ids derived
    from the holding field's), so readers that resolve by id only when all fields have one
    (pyiceberg) do; the ids equal the Iceberg export's."""
    from mvtable.connector.export.types import iceberg_schema
    from mvtable.lineage.schema_ids import collection_id

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.list_(pa.int32()))),
            ("deep", pa.list_(pa.struct([("x", pa.list_(pa.int64()))]))),
        ]
    )
    t = Table.create(str(tmp_path / "t"), schema=schema)
    data = pa.table(
        {"id": [1], "tags": [["a"]], "attrs": [[("k", [1, 2])]], "deep": [[{"x": [5]}]]},
        schema=schema,
    )
    t.append(data)
    [seg] = t.snapshot().visible_segments()
    file_schema = pq.read_schema(os.path.join(t.uri, seg.file.path))

    def ids(f: pa.Field) -> list[int]:
        own = [int(f.metadata[b"PARQUET:field_id"])]
        ty = f.type
        if pa.types.is_list(ty):
            return own + ids(ty.value_field)
        if pa.types.is_map(ty):
            return own + ids(ty.key_field) + ids(ty.item_field)
        if pa.types.is_struct(ty):
            return own + [i for k in range(ty.num_fields) for i in ids(ty.field(k))]
        return own

    by_name = {f.name: ids(f) for f in file_schema}
    assert by_name["tags"] == [2, collection_id(2, 0)]
    assert by_name["attrs"] == [3, collection_id(3, 1), collection_id(3, 2), collection_id(collection_id(3, 2), 0)]
    x_id = by_name["deep"][2]  # the struct field x: its own id from the table schema
    assert by_name["deep"] == [4, collection_id(4, 0), x_id, collection_id(x_id, 0)]
    iceberg, _, _ = iceberg_schema(t.snapshot().table_schema)
    fields = {f["name"]: f["type"] for f in iceberg["fields"]}
    assert fields["tags"]["element-id"] == collection_id(2, 0)
    assert (fields["attrs"]["key-id"], fields["attrs"]["value-id"]) == (collection_id(3, 1), collection_id(3, 2))
    assert t.to_arrow().equals(data)
