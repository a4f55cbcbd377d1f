"""Field ids on Arrow schemas: how a stored schema's ids reach Parquet, and how a segment's ids are read back.

Arrow keeps a field's id in its metadata under ``PARQUET:field_id``, which is what pyarrow writes
as the Parquet ``field_id`` and hands back when it reads one; the stored (JSON) schema keeps it
under ``parquet.field.id`` (``lineage.schema_ids``). A file written before field ids has none: it
gets them by position with the walk ``lineage.schema_ids.with_ids`` makes over the table schema,
so old files and the old table schema agree without a rewrite.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mvtable.lineage.schema_ids import FIELD_ID_KEY, iter_fields, with_ids

__all__ = ["ARROW_FIELD_ID", "arrow_field_id", "arrow_with_ids", "fresh_ids", "strip_ids"]

ARROW_FIELD_ID = b"PARQUET:field_id"


def arrow_field_id(field: pa.Field) -> int | None:
    """The id an Arrow field carries (from a Parquet file or a table schema), or None."""
    meta = field.metadata
    if not meta or ARROW_FIELD_ID not in meta:
        return None
    try:
        value = int(meta[ARROW_FIELD_ID])
    except ValueError:
        return None
    return value if value >= 0 else None


def _nested_fields(t: pa.DataType) -> list[pa.Field] | None:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    return None


def arrow_with_ids(schema: pa.Schema) -> pa.Schema:
    """``schema`` (a segment's) with ids by position when it carries none; as it is when it does.

    The walk is ``lineage.schema_ids.with_ids``': a struct's fields first, then what each of them
    nests (through lists and maps), so that a file written before field ids gets the ids its table's
    schema got."""
    if any(arrow_field_id(f) is not None for f in schema):
        return schema
    counter = [1]

    def struct_fields(fields: list[pa.Field]) -> list[pa.Field]:
        numbered = []
        for f in fields:
            numbered.append(f.with_metadata({**(f.metadata or {}), ARROW_FIELD_ID: str(counter[0]).encode()}))
            counter[0] += 1
        return [f.with_type(nested(f.type)) for f in numbered]

    def nested(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct(struct_fields([t.field(i) for i in range(t.num_fields)]))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vf = t.value_field
            inner = vf.with_type(nested(vf.type))
            return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
        if pa.types.is_map(t):
            kf, itf = t.key_field, t.item_field
            return pa.map_(kf.with_type(nested(kf.type)), itf.with_type(nested(itf.type)))
        return t

    return pa.schema(struct_fields(list(schema)), metadata=schema.metadata)


def strip_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored schema without field ids (data from another source may carry its own)."""

    def struct(t: dict[str, Any]) -> dict[str, Any]:
        fields = []
        for f in t.get("fields", ()):
            meta = {k: v for k, v in (f.get("metadata") or {}).items() if k != FIELD_ID_KEY}
            fields.append({**f, "metadata": meta, "type": nested(f["type"])})
        return {**t, "fields": fields}

    def nested(t: Any) -> Any:
        if not isinstance(t, dict):
            return t
        if t.get("type") == "struct":
            return struct(t)
        if t.get("type") == "array":
            return {**t, "elementType": nested(t["elementType"])}
        if t.get("type") == "map":
            return {**t, "keyType": nested(t["keyType"]), "valueType": nested(t["valueType"])}
        return t

    return struct(doc)


def fresh_ids(doc: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A new table's schema with ids 1, 2, … by position (any ids its data came with dropped), and the highest."""
    numbered = with_ids(strip_ids(doc))
    return numbered, max((f["metadata"][FIELD_ID_KEY] for _, f in iter_fields(numbered)), default=0)
