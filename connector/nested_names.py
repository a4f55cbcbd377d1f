"""Nested field names spelled as the table spells them.

A write matches column names case-insensitively, as Spark does, and so does the schema
check for the fields of structs (``schema.check_write_schema`` compares them position by
position, lower-cased). Arrow's struct cast, though, matches fields by their exact name and
fills a *nullable* field it cannot find with nulls: ``struct<A:int>`` cast to
``struct<a:int>`` would store a null for every ``a`` instead of failing. So before the cast
the data's struct fields take the table's names (a zero-copy ``view``: only the names
change, the buffers stay), and the cast then converts types and checks nullability."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["with_table_names"]


def with_table_names(column: pa.Array | pa.ChunkedArray, table_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """``column`` with its struct fields (at any depth: in structs, lists and maps) named as in ``table_type``.

    Only names change; a column whose type does not have the table's shape is returned as it is, for
    the cast to report."""
    renamed = _renamed(column.type, table_type)
    if renamed.equals(column.type):
        return column
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([chunk.view(renamed) for chunk in column.chunks], type=renamed)
    return column.view(renamed)


def _renamed(have: pa.DataType, want: pa.DataType) -> pa.DataType:
    """``have`` with the struct field names of ``want`` where a name differs only in case.

    Only where the two have the same shape: the schema check has matched them already."""
    if pa.types.is_struct(have) and pa.types.is_struct(want) and have.num_fields == want.num_fields:
        fields = []
        for i in range(have.num_fields):
            mine, theirs = have.field(i), want.field(i)
            name = theirs.name if mine.name.lower() == theirs.name.lower() else mine.name
            fields.append(pa.field(name, _renamed(mine.type, theirs.type), nullable=mine.nullable, metadata=mine.metadata))
        return pa.struct(fields)
    if _is_list(have) and _is_list(want):
        item = _with_type(have.value_field, _renamed(have.value_type, want.value_type))
        if pa.types.is_large_list(have):
            return pa.large_list(item)
        if pa.types.is_fixed_size_list(have):
            return pa.list_(item, have.list_size)
        return pa.list_(item)
    if pa.types.is_map(have) and pa.types.is_map(want):
        key = _with_type(have.key_field, _renamed(have.key_type, want.key_type))
        item = _with_type(have.item_field, _renamed(have.item_type, want.item_type))
        return pa.map_(key, item, keys_sorted=have.keys_sorted)
    return have


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _with_type(f: pa.Field, t: pa.DataType) -> pa.Field:
    return f if f.type.equals(t) else f.with_type(t)
