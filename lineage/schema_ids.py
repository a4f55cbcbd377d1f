"""Field ids in a stored table schema, and the rules the log applies to schema changes — pure functions of JSON.

A table schema is Spark's StructType JSON; each ``StructField`` (a column, or a field of a struct
at any depth, also inside arrays and maps) carries its id in its metadata under ``parquet.field.id``
— the key Spark's own Parquet reader and writer use for field ids, so a Spark schema made from the
stored JSON reads and writes by id as it is. Array elements and map keys and values have no id of
their own in the stored schema: they are reached through the field that holds them, and where a
format wants one (Parquet files, Iceberg schemas) it is derived from the holder's
(``collection_id``), the same for every version whatever was renamed.

A schema stored before field ids existed has none: it gets them by position, the same way every
time (``with_ids``), and so do the segments written under it (``connector.schema_evolution``
assigns a file's ids with the same walk), so an old table reads right without any rewrite.

The log keeps two numbers beside the schema (``MetadataAction``): the schema id, raised by every
change, and the highest field id ever assigned, so that a dropped column's id is never reused.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

FIELD_ID_KEY = "parquet.field.id"

__all__ = [
    "COLLECTION_ID_BASE",
    "FIELD_ID_KEY",
    "breaking_change",
    "collection_id",
    "field_id",
    "has_ids",
    "highest_id",
    "iter_fields",
    "key_follows_ids",
    "schema_race",
    "top_level_ids",
    "with_ids",
]


# Derived ids of list elements (kind 0) and map keys (1) and values (2) sit above any struct field's id.
COLLECTION_ID_BASE = 1 << 24


def collection_id(parent: int, kind: int) -> int:
    """The id of the element (``kind`` 0), key (1) or value (2) of the list or map that field ``parent`` holds.

    Iceberg readers (pyiceberg) resolve a Parquet file by ids only when every field of it has one,
    elements included; deriving them from the holder's id keeps them stable across renames and
    equal in every segment and every export."""
    return COLLECTION_ID_BASE + parent * 3 + kind


def field_id(f: dict[str, Any]) -> int | None:
    """The id a stored ``StructField`` carries, or None."""
    value = (f.get("metadata") or {}).get(FIELD_ID_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def has_ids(doc: dict[str, Any]) -> bool:
    """Whether the stored schema carries field ids (a schema written before them has none)."""
    return any(field_id(f) is not None for f in doc.get("fields", ()))


def _child_structs(t: Any) -> Iterator[dict[str, Any]]:
    """The struct types directly inside type ``t`` (itself, or the element / key / value of an array or map)."""
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            yield t
        elif kind == "array":
            yield from _child_structs(t.get("elementType"))
        elif kind == "map":
            yield from _child_structs(t.get("keyType"))
            yield from _child_structs(t.get("valueType"))


def with_ids(doc: dict[str, Any], *, start: int = 1) -> dict[str, Any]:
    """``doc`` with a field id on every ``StructField``; unchanged when it has them already.

    Ids go by position, level by level: a struct's own fields first, then the fields nested in each
    of them (the walk ``connector.schema_evolution.field_ids.arrow_ids`` makes over a Parquet
    file's schema). A copy; ``doc`` is not changed."""
    if has_ids(doc):
        return doc
    counter = [start]

    def struct(t: dict[str, Any]) -> dict[str, Any]:
        fields = []
        for f in t.get("fields", ()):
            fields.append({**f, "metadata": {**(f.get("metadata") or {}), FIELD_ID_KEY: counter[0]}})
            counter[0] += 1
        return {**t, "fields": [{**f, "type": nested(f["type"])} for f in fields]}

    def nested(t: Any) -> Any:
        if not isinstance(t, dict):
            return t
        kind = t.get("type")
        if kind == "struct":
            return struct(t)
        if kind == "array":
            return {**t, "elementType": nested(t["elementType"])}
        if kind == "map":
            return {**t, "keyType": nested(t["keyType"]), "valueType": nested(t["valueType"])}
        return t

    return struct(doc)


def iter_fields(doc: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every ``StructField`` of ``doc`` at any depth with its path of names (array/map levels add no name)."""
    for f in doc.get("fields", ()):
        path = (*prefix, f["name"])
        yield path, f
        for inner in _child_structs(f["type"]):
            yield from iter_fields(inner, path)


def highest_id(doc: dict[str, Any]) -> int:
    """The largest field id in ``doc`` (ids by position when it has none); 0 for no field."""
    return max((field_id(f) or 0 for _, f in iter_fields(with_ids(doc))), default=0)


def top_level_ids(doc: dict[str, Any]) -> dict[str, int]:
    """Column name → field id, ids by position when the schema has none."""
    return {f["name"]: field_id(f) or 0 for f in with_ids(doc).get("fields", ())}


def _shape(t: Any) -> Any:
    """A type without the fields of its structs: what a reader of the old files must be able to take as it is."""
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "array":
            return ("array", _shape(t.get("elementType")))
        if kind == "map":
            return ("map", _shape(t.get("keyType")), _shape(t.get("valueType")))
        return str(kind)
    return t


def breaking_change(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """What makes ``new`` more than an addition to ``old``, or None when it only adds fields (or makes them optional).

    A rename, a drop or a type change: after one, a column name or a file's statistics under a
    name may mean another field than before."""
    before = {field_id(f): (path, _shape(f["type"])) for path, f in iter_fields(with_ids(old))}
    after = {field_id(f): (path, _shape(f["type"])) for path, f in iter_fields(with_ids(new))}
    for fid, (path, shape) in before.items():
        now = after.get(fid)
        if now is None:
            return f"field {'.'.join(path)} (id {fid}) was dropped"
        if now[0] != path:
            return f"field {'.'.join(path)} (id {fid}) was renamed to {'.'.join(now[0])}"
        if now[1] != shape:
            return f"field {'.'.join(path)} (id {fid}) changed type"
    return None


def key_follows_ids(old: dict[str, Any], old_key: Sequence[str], new: dict[str, Any], new_key: Sequence[str]) -> bool:
    """Whether ``new_key`` names the same columns (by field id) in ``new`` as ``old_key`` in ``old``: a key renamed with its columns."""
    before, after = top_level_ids(old), top_level_ids(new)
    if len(old_key) != len(new_key):
        return False
    return all(k in before and n in after and before[k] == after[n] for k, n in zip(old_key, new_key))


def schema_race(
    read_schema_id: int, current_schema_id: int, *, changes_schema: bool, adds_files: bool, break_version: int, read_version: int
) -> str | None:
    """Why a commit prepared at ``read_version`` cannot land after the schema changes since, or None.

    A commit that changes the schema itself was made from the schema it read: any change since is a
    conflict. A commit that adds files wrote them under the schema it read: they read right by field
    id after any change, but their statistics are keyed by the names of that schema, so a rename,
    drop or type change since (``break_version``) is a conflict. Additions pass."""
    if current_schema_id == read_schema_id:
        return None
    if changes_schema:
        return f"the schema changed (schema id {read_schema_id} → {current_schema_id}) after this commit read it"
    if adds_files and break_version > read_version:
        return (
            f"columns were renamed, dropped or retyped at version {break_version}, after this write read version "
            f"{read_version}; write again against the new schema"
        )
    return None
