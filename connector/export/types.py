"""mvtable's column types as Iceberg and Delta schemas.

A table schema is stored as Spark StructType JSON, so the sources are Spark's types. Both
targets hold almost all of them; what they cannot hold raises
``UnsupportedExportTypeError`` naming the column, before anything is written.

Iceberg identifies columns by field id: the Iceberg schema keeps the table's own ids (a table
stored before them gets them by position), and the table metadata gets a
``schema.name-mapping.default`` property for files written without ids (``name_mapping``).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from mvtable.errors import UnsupportedExportTypeError
from mvtable.lineage.schema_ids import FIELD_ID_KEY, collection_id, field_id, iter_fields, with_ids

__all__ = ["arrow_name_mapping", "iceberg_schema", "iceberg_type", "delta_schema"]

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")

_ICEBERG_PRIMITIVE = {
    "boolean": "boolean",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamptz",
    "timestamp_ntz": "timestamp",
}
_DELTA_PRIMITIVE = {
    "boolean",
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
}
# Delta without column mapping refuses these characters in column names.
_DELTA_BAD_NAME = re.compile(r"[ ,;{}()\n\t=]")


def _decimal(t: str, *, column: str, target: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    if not m:
        return None
    precision, scale = int(m.group(1)), int(m.group(2))
    if scale < 0 or scale > precision or precision > 38:
        raise UnsupportedExportTypeError(target, column, f"decimal({precision},{scale}) (needs 0 <= scale <= precision <= 38)")
    return precision, scale


def iceberg_type(t: Any, *, column: str) -> str:
    """The Iceberg type of a primitive column of stored type ``t`` (a partition source's, say).

    Raises:
        UnsupportedExportTypeError: ``t`` is not a primitive Iceberg can hold."""
    if isinstance(t, str):
        if t in _ICEBERG_PRIMITIVE:
            return _ICEBERG_PRIMITIVE[t]
        dec = _decimal(t, column=column, target="Iceberg")
        if dec is not None:
            return f"decimal({dec[0]}, {dec[1]})"
    raise UnsupportedExportTypeError("Iceberg", column, str(t))


def iceberg_schema(table_schema: dict[str, Any], *, schema_id: int = 0) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """``(schema JSON with field ids, name mapping, highest field id)`` for Iceberg.

    Struct fields keep the table's own field ids (``lineage.schema_ids``; by position for a table
    stored before them), so a renamed or dropped column is the same or a gone Iceberg field and
    Iceberg readers resolve the Parquet files by the ids they carry.

    Raises:
        UnsupportedExportTypeError: A column's type has no Iceberg equivalent."""
    numbered = with_ids(table_schema)
    used: list[int] = []
    mapping: list[dict[str, Any]] = []

    def convert(t: Any, column: str, names: list[dict[str, Any]], parent: int) -> Any:
        if isinstance(t, str):
            if t in _ICEBERG_PRIMITIVE:
                return _ICEBERG_PRIMITIVE[t]
            dec = _decimal(t, column=column, target="Iceberg")
            if dec is not None:
                return f"decimal({dec[0]}, {dec[1]})"
            raise UnsupportedExportTypeError("Iceberg", column, t)
        kind = t.get("type")
        if kind == "struct":
            return struct(t["fields"], f"{column}.", names)
        if kind == "array":
            eid = collection_id(parent, 0)
            used.append(eid)
            sub: list[dict[str, Any]] = []
            names.append({"field-id": eid, "names": ["element"], "fields": sub})
            element = convert(t["elementType"], f"{column}[]", sub, eid)
            return {"type": "list", "element-id": eid, "element": element, "element-required": not t.get("containsNull", True)}
        if kind == "map":
            kid, vid = collection_id(parent, 1), collection_id(parent, 2)
            used.extend((kid, vid))
            ksub: list[dict[str, Any]] = []
            vsub: list[dict[str, Any]] = []
            names.append({"field-id": kid, "names": ["key"], "fields": ksub})
            names.append({"field-id": vid, "names": ["value"], "fields": vsub})
            key = convert(t["keyType"], f"{column}.key", ksub, kid)
            value = convert(t["valueType"], f"{column}.value", vsub, vid)
            return {
                "type": "map",
                "key-id": kid,
                "key": key,
                "value-id": vid,
                "value": value,
                "value-required": not t.get("valueContainsNull", True),
            }
        raise UnsupportedExportTypeError("Iceberg", column, str(kind))

    def struct(fields: list[dict[str, Any]], prefix: str, names: list[dict[str, Any]]) -> dict[str, Any]:
        own = [(f, field_id(f) or 0) for f in fields]
        out = []
        for f, fid in own:
            used.append(fid)
            sub: list[dict[str, Any]] = []
            names.append({"field-id": fid, "names": [f["name"]], "fields": sub})
            out.append(
                {
                    "id": fid,
                    "name": f["name"],
                    "required": not f.get("nullable", True),
                    "type": convert(f["type"], prefix + f["name"], sub, fid),
                }
            )
        return {"type": "struct", "fields": out}

    schema = struct(numbered["fields"], "", mapping)
    _drop_empty(mapping)
    return {**schema, "schema-id": schema_id, "identifier-field-ids": []}, mapping, max(used, default=0)


def arrow_name_mapping(schema: pa.Schema) -> list[dict[str, Any]]:
    """The Iceberg name mapping of a Parquet file's own schema (field ids on every struct field): its names by id.

    Lists, maps and their elements get the ids ``iceberg_schema`` gives them, so the mapping
    matches the exported schema's ids at every depth."""

    def of_type(t: pa.DataType, parent: int) -> list[dict[str, Any]]:
        if pa.types.is_struct(t):
            return [entry(t.field(i)) for i in range(t.num_fields)]
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            eid = collection_id(parent, 0)
            return [{"field-id": eid, "names": ["element"], "fields": of_type(t.value_type, eid)}]
        if pa.types.is_map(t):
            kid, vid = collection_id(parent, 1), collection_id(parent, 2)
            return [
                {"field-id": kid, "names": ["key"], "fields": of_type(t.key_type, kid)},
                {"field-id": vid, "names": ["value"], "fields": of_type(t.item_type, vid)},
            ]
        return []

    def entry(f: pa.Field) -> dict[str, Any]:
        fid = int((f.metadata or {}).get(b"PARQUET:field_id", b"0"))
        return {"field-id": fid, "names": [f.name], "fields": of_type(f.type, fid)}

    mapping = [entry(f) for f in schema]
    _drop_empty(mapping)
    return mapping


def _drop_empty(mapping: list[dict[str, Any]]) -> None:
    for m in mapping:
        if m["fields"]:
            _drop_empty(m["fields"])
        else:
            del m["fields"]


def delta_schema(table_schema: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The Delta ``schemaString`` document and the table features it needs.

    The document is Spark's StructType JSON, checked for Delta; the features are
    ``deletionVectors``, plus ``timestampNtz`` if used.

    Raises:
        UnsupportedExportTypeError: A column's type or name has no Delta equivalent (without column mapping)."""
    features = ["deletionVectors"]

    def check(t: Any, column: str) -> None:
        if isinstance(t, str):
            if t == "timestamp_ntz" and "timestampNtz" not in features:
                features.append("timestampNtz")
            if t in _DELTA_PRIMITIVE or _decimal(t, column=column, target="Delta") is not None:
                return
            raise UnsupportedExportTypeError("Delta", column, t)
        kind = t.get("type")
        if kind == "struct":
            for f in t["fields"]:
                name = f"{column}.{f['name']}" if column else f["name"]
                if _DELTA_BAD_NAME.search(f["name"]):
                    raise UnsupportedExportTypeError(
                        "Delta", name, "a column name with one of ' ,;{}()\\n\\t=' (Delta needs column mapping for those)"
                    )
                check(f["type"], name)
        elif kind == "array":
            check(t["elementType"], f"{column}[]")
        elif kind == "map":
            check(t["keyType"], f"{column}.key")
            check(t["valueType"], f"{column}.value")
        else:
            raise UnsupportedExportTypeError("Delta", column, str(kind))

    check(table_schema, "")
    schema = {"type": "struct", "fields": [dict(f, metadata=f.get("metadata") or {}) for f in table_schema["fields"]]}
    return schema, features


def delta_column_mapping(schema: dict[str, Any], physical: dict[int, str]) -> tuple[dict[str, Any], int]:
    """``schema`` (``delta_schema``'s) with Delta column mapping (mode ``id``): every field's id and physical name.

    The id is the table's field id (Parquet ``field_id`` in mvtable's files: readers in mode ``id``
    resolve columns by it, so a rename or drop reads right). A field keeps the physical name it was
    first exported with (``physical``, by id); a new field takes its name, or ``col-<id>`` where a
    field of the same struct has that physical name already. Returns the schema and the highest id.
    """
    numbered = with_ids(schema)
    top = [0]

    def struct(t: dict[str, Any]) -> dict[str, Any]:
        taken = {physical[i] for f in t["fields"] if (i := field_id(f) or 0) in physical}
        fields = []
        for f in t["fields"]:
            fid = field_id(f) or 0
            top[0] = max(top[0], fid)
            name = physical.get(fid)
            if name is None:
                name = f["name"] if f["name"] not in taken else f"col-{fid}"
                taken.add(name)
                physical[fid] = name
            meta = {k: v for k, v in (f.get("metadata") or {}).items() if k != FIELD_ID_KEY}
            meta.update({"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": name})
            fields.append({**f, "type": nested(f["type"]), "metadata": meta})
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

    return struct(numbered), top[0]


def names_by_id(schema: dict[str, Any] | None) -> dict[int, str]:
    """Field id → name of a schema exported without column mapping (ids by position when it has none)."""
    if schema is None:
        return {}
    return {field_id(f) or 0: f["name"] for _, f in iter_fields(with_ids(schema))}


def physical_names(schema: dict[str, Any]) -> dict[int, str]:
    """Field id → physical name of a Delta schema with column mapping (empty without it)."""
    out: dict[int, str] = {}

    def walk(t: Any) -> None:
        if not isinstance(t, dict):
            return
        if t.get("type") == "struct":
            for f in t["fields"]:
                meta = f.get("metadata") or {}
                if "delta.columnMapping.id" in meta:
                    out[int(meta["delta.columnMapping.id"])] = str(meta["delta.columnMapping.physicalName"])
                walk(f["type"])
        elif t.get("type") == "array":
            walk(t["elementType"])
        elif t.get("type") == "map":
            walk(t["keyType"])
            walk(t["valueType"])

    walk(schema)
    return out
