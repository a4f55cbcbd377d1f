"""Read by field id: which physical column of a segment feeds each column of the table schema being read.

A pure function of two schemas — the segment's Parquet schema with its field ids (ids by position
for a file written before them, ``field_ids.arrow_with_ids``) and the table schema of the version
being read — so every reader (``Table.scan``, the Spark data source, the change feed, compaction,
key lookups, deletes) resolves a segment the same way:

* a column whose id the file lacks reads as nulls (an added column, or a dropped name added
  again: a new id, so the old values never come back);
* a column the file holds under another name reads under the table's name (a rename changes no
  file);
* a file column whose id the table no longer has is never read (a dropped column);
* a widened column is cast to its new type; structs are matched field by field, by id, at every
  depth (through lists and maps too).

A file whose schema already is the table's (every segment of a table that never changed) needs no
projection: ``resolve`` says so with None and the reader reads the file as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .field_ids import arrow_field_id, arrow_with_ids

__all__ = ["ReadProjection", "resolve"]


@dataclass(frozen=True)
class _Column:
    """One output column: the file's column that feeds it (None: none, it reads null) and the two fields."""

    physical: str | None
    file_field: pa.Field | None
    table_field: pa.Field
    same: bool  # the file's column is the table's as it is (a rename at most)


@dataclass(frozen=True)
class ReadProjection:
    """How to read one segment file under one table schema (``resolve``)."""

    columns: dict[str, _Column]  # by table column name, in table order

    def physical_columns(self, names: Sequence[str] | None) -> list[str]:
        """The file's columns to decode for the table columns ``names`` (None: all of them)."""
        picked = self.columns.values() if names is None else (self.columns[n] for n in names)
        return [c.physical for c in picked if c.physical is not None]

    def physical_name(self, name: str) -> str | None:
        """The file's name of table column ``name``, when the file holds it unchanged (None otherwise)."""
        col = self.columns.get(name)
        return col.physical if col is not None and col.same else None

    def conform(self, table: pa.Table, names: Sequence[str] | None) -> pa.Table:
        """``table`` (the file's columns ``physical_columns(names)`` read) as the table columns ``names``."""
        picked = list(self.columns.values()) if names is None else [self.columns[n] for n in names]
        arrays = []
        for col in picked:
            if col.physical is None or col.file_field is None:
                arrays.append(pa.nulls(table.num_rows, col.table_field.type))
                continue
            data = table.column(col.physical)
            if col.same:
                arrays.append(data)
            else:
                arrays.append(
                    pa.chunked_array([_conform(c, col.file_field, col.table_field) for c in data.chunks], col.table_field.type)
                )
        fields = [c.table_field.with_type(a.type) if c.same else c.table_field for c, a in zip(picked, arrays)]
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def resolve(file_schema: pa.Schema, table_schema: pa.Schema) -> ReadProjection | None:
    """How a file of ``file_schema`` reads under ``table_schema`` (both with field ids), or None when it reads as it is.

    ``table_schema`` carries its ids as ``schema.schema_from_json`` gives them; the file's are its
    Parquet field ids, or ids by position when it has none."""
    return _resolve(file_schema.serialize().to_pybytes(), table_schema.serialize().to_pybytes())


@functools.lru_cache(maxsize=256)
def _resolve(file_bytes: bytes, table_bytes: bytes) -> ReadProjection | None:
    # keyed by the serialized schemas: pa.Schema equality ignores field metadata, where the ids are
    file_schema = arrow_with_ids(pa.ipc.read_schema(pa.py_buffer(file_bytes)))
    table_schema = pa.ipc.read_schema(pa.py_buffer(table_bytes))
    by_id = {arrow_field_id(f): f for f in file_schema}
    columns: dict[str, _Column] = {}
    identity = len(file_schema) == len(table_schema)
    for tf in table_schema:
        ff = by_id.get(arrow_field_id(tf))
        if ff is None:
            columns[tf.name] = _Column(None, None, tf, same=False)
            identity = False
            continue
        same = _same(ff, tf)
        identity = identity and same and ff.name == tf.name
        columns[tf.name] = _Column(ff.name, ff, tf, same=same)
    return None if identity else ReadProjection(columns)


def _same(ff: pa.Field, tf: pa.Field) -> bool:
    """Whether the file's field reads as the table's without change (names of nested fields and ids included)."""
    if arrow_field_id(ff) != arrow_field_id(tf):
        return False
    a, b = ff.type, tf.type
    if pa.types.is_struct(b):
        return (
            pa.types.is_struct(a)
            and a.num_fields == b.num_fields
            and all(a.field(i).name == b.field(i).name and _same(a.field(i), b.field(i)) for i in range(b.num_fields))
        )
    if pa.types.is_list(b) or pa.types.is_large_list(b):
        return type(a) is type(b) and _same_type(a.value_type, b.value_type)
    if pa.types.is_map(b):
        return pa.types.is_map(a) and _same_type(a.key_type, b.key_type) and _same_type(a.item_type, b.item_type)
    if pa.types.is_dictionary(a):
        return a.value_type == b
    return a == b


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    return _same(pa.field("x", a), pa.field("x", b))


def _conform(array: pa.Array, ff: pa.Field, tf: pa.Field) -> pa.Array:
    """One chunk of the file's field ``ff`` as the table's field ``tf``, nested fields matched by id."""
    if _same(ff, tf):
        return array
    a, b = ff.type, tf.type
    if pa.types.is_struct(b):
        by_id = {arrow_field_id(a.field(i)): i for i in range(a.num_fields)}
        children = []
        for j in range(b.num_fields):
            want = b.field(j)
            i = by_id.get(arrow_field_id(want))
            if i is None:
                children.append(pa.nulls(len(array), want.type))
            else:
                children.append(_conform(array.field(i), a.field(i), want))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=[b.field(j) for j in range(b.num_fields)], mask=mask)
    if pa.types.is_list(b) or pa.types.is_large_list(b):
        values = _conform(array.values, a.value_field, b.value_field)
        mask = array.is_null() if array.null_count else None
        cls = pa.ListArray if pa.types.is_list(b) else pa.LargeListArray
        return cls.from_arrays(array.offsets, values, type=b, mask=mask)
    if pa.types.is_map(b):
        keys = _conform(array.keys, a.key_field, b.key_field)
        items = _conform(array.items, a.item_field, b.item_field)
        out = pa.MapArray.from_arrays(array.offsets, keys, items, type=b)
        if array.null_count:
            out = pc.if_else(array.is_null(), pa.scalar(None, b), out)
        return out
    return pc.cast(array, b)
