"""``merge_schema`` and ``overwrite_schema`` for writes (Delta's ``mergeSchema`` / ``overwriteSchema``) — pure.

A write whose data has columns the table lacks fails with ``SchemaMismatchError`` unless it asks
to merge: then the new columns (and new fields of structs) are added, and a column whose data has
a wider type than the table's is widened, in the same commit as the data, and nullable columns the data lacks are written as nulls
(``schema.check_write_schema(fill_missing=True)``). A narrower or incompatible type, or a
non-nullable column the data lacks, is still refused.
``overwrite_schema`` replaces the schema with the data's (a consistent push); every column gets a
fresh id, so nothing of the replaced rows can be read under it, and rolling the push back brings
the old schema back with the old rows (``lifecycle.rollback_entry``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mvtable.errors import SchemaEvolutionError
from mvtable.lineage.schema_ids import FIELD_ID_KEY, iter_fields

from .changes import EvolvingSchema
from .widening import can_widen, widening_rule

__all__ = ["merged_schema", "replaced_schema"]


def merged_schema(
    doc: dict[str, Any], incoming: pa.Schema, *, last_field_id: int, primary_key: tuple[str, ...]
) -> EvolvingSchema | None:
    """The table schema ``doc`` evolved to take ``incoming``: its new columns added, wider types widened; None when it takes it as is.

    Raises:
        SchemaEvolutionError: a column's data type is neither the table's nor a widening of it."""
    from ..schema import type_to_json

    evolving = EvolvingSchema.of(doc, last_field_id=last_field_id, primary_key=primary_key)
    for f in incoming:
        _merge(evolving, evolving.doc, f.name, type_to_json(f.type, column=f.name), prefix="")
    return evolving if evolving.changes else None


def _merge(evolving: EvolvingSchema, struct: dict[str, Any], name: str, data_type: Any, *, prefix: str) -> None:
    path = f"{prefix}{name}"
    existing = next((f for f in struct["fields"] if f["name"].lower() == name.lower()), None)
    if existing is None:
        evolving.add_column(path, data_type)
        return
    path = f"{prefix}{existing['name']}"
    table_type = existing["type"]
    if isinstance(table_type, dict) and table_type.get("type") == "struct":
        if not (isinstance(data_type, dict) and data_type.get("type") == "struct"):
            raise SchemaEvolutionError(f"column {path!r}: the table holds a struct, the data does not (rule: {widening_rule()})")
        for inner in data_type["fields"]:
            _merge(evolving, table_type, inner["name"], inner["type"], prefix=f"{path}.")
        return
    if _strip(table_type) == _strip(data_type):
        return
    if can_widen(table_type, data_type):
        evolving.update_column(path, data_type)
        return
    raise SchemaEvolutionError(
        f"column {path!r}: the data's type cannot be merged into the table's (rule: merge_schema adds columns and "
        f"{widening_rule()}); cast the column to the table's type"
    )


def _strip(t: Any) -> Any:
    if not isinstance(t, dict):
        return t
    if t.get("type") == "array":
        return ("array", _strip(t["elementType"]))
    if t.get("type") == "map":
        return ("map", _strip(t["keyType"]), _strip(t["valueType"]))
    return ("struct", tuple((f["name"].lower(), _strip(f["type"])) for f in t["fields"]))


def replaced_schema(doc: dict[str, Any], *, last_field_id: int) -> tuple[dict[str, Any], int]:
    """``doc`` (the data's schema) with fresh ids above ``last_field_id``, and the new highest id."""
    counter = [last_field_id]

    def number(t: Any) -> Any:
        if not isinstance(t, dict):
            return t
        if t.get("type") == "struct":
            fields = []
            for f in t["fields"]:
                counter[0] += 1
                meta = {k: v for k, v in (f.get("metadata") or {}).items() if k != FIELD_ID_KEY}
                fields.append({**f, "metadata": {**meta, FIELD_ID_KEY: counter[0]}})
            return {**t, "fields": [{**f, "type": number(f["type"])} for f in fields]}
        if t.get("type") == "array":
            return {**t, "elementType": number(t["elementType"])}
        if t.get("type") == "map":
            return {**t, "keyType": number(t["keyType"]), "valueType": number(t["valueType"])}
        return t

    numbered = number(doc)
    assert all(FIELD_ID_KEY in f["metadata"] for _, f in iter_fields(numbered))
    return numbered, counter[0]
