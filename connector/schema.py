"""Table schemas: stored as Spark's StructType JSON, converted to and from Arrow without needing pyspark.

The JSON is readable by people and by ``StructType.fromJson``; without pyspark the ``Table`` API
works on machines with no JVM."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from mvtable.errors import InvalidOptionError, SchemaMismatchError, UnsupportedTypeError
from mvtable.lineage.schema_ids import FIELD_ID_KEY, collection_id, field_id, with_ids

_SIMPLE_TO_ARROW: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_ARROW_FIELD_ID = b"PARQUET:field_id"  # where Arrow (and pyarrow's Parquet I/O) keeps a field id
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")


def type_to_json(t: pa.DataType, *, column: str) -> Any:
    """The stored (Spark StructType JSON) form of Arrow type ``t`` of ``column``.

    Raises:
        UnsupportedTypeError: ``t`` has no Spark SQL equivalent, or is a decimal Spark and Parquet
            cannot hold."""
    if pa.types.is_dictionary(t):
        return type_to_json(t.value_type, column=column)
    if pa.types.is_boolean(t):
        return "boolean"
    for name, width in (("byte", 8), ("short", 16), ("integer", 32), ("long", 64)):
        if pa.types.is_signed_integer(t) and t.bit_width == width:
            return name
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise UnsupportedTypeError(f"column {column}: decimal precision {t.precision} exceeds Spark's 38")
        if not 0 <= t.scale <= t.precision:
            # Parquet (and Spark) store only 0 <= scale <= precision: such a table would take
            # no row, each append failing in the Parquet writer
            raise UnsupportedTypeError(
                f"column {column}: decimal scale {t.scale} with precision {t.precision}; Parquet and Spark need "
                "0 <= scale <= precision: cast the column (e.g. to decimal(precision - scale, 0)) before creating the table"
            )
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {
            "type": "array",
            "elementType": type_to_json(t.value_type, column=f"{column}[]"),
            "containsNull": t.value_field.nullable,
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": type_to_json(t.key_type, column=f"{column}.key"),
            "valueType": type_to_json(t.item_type, column=f"{column}.value"),
            "valueContainsNull": t.item_field.nullable,
        }
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_to_json(t.field(i), prefix=f"{column}.") for i in range(t.num_fields)]}
    raise UnsupportedTypeError(
        f"column {column}: Arrow type {t} has no Spark SQL equivalent; cast it first (e.g. uint32 → int64)"
    )


def _field_to_json(f: pa.Field, *, prefix: str = "") -> dict[str, Any]:
    fid = f.metadata.get(_ARROW_FIELD_ID) if f.metadata else None
    metadata = {FIELD_ID_KEY: int(fid)} if fid is not None and fid.isdigit() else {}
    return {"name": f.name, "type": type_to_json(f.type, column=prefix + f.name), "nullable": f.nullable, "metadata": metadata}


# The row-address columns mvtable adds to the rows it hands out (``segments.ROW_ADDRESS_*``;
# a test keeps the two in step): a table column with one of these names would be duplicated
# there, and a delete by row address would be ambiguous. Checked case-insensitively (as Spark
# resolves names) when a table is created. The change feed's columns are not reserved: a
# table may store a change feed (the change feed of such a table refuses to be read, see
# ``streaming.changes.change_schema``).
RESERVED_COLUMNS: Mapping[str, str] = MappingProxyType(
    {
        "_mv_segment": "row addresses (withRowAddress / with_row_address)",
        "_mv_row": "row addresses (withRowAddress / with_row_address)",
    }
)


def check_new_table_columns(schema: pa.Schema) -> None:
    """``SchemaMismatchError`` for a new table's column that collides with mvtable's names or has case-twin struct fields.

    That is a column taking a name mvtable adds to rows, or a struct (at any depth) with two fields
    whose names differ only in case.

    Raises:
        SchemaMismatchError: A column takes a reserved name, or struct fields differ only in case."""
    clash = [(n, RESERVED_COLUMNS[n.lower()]) for n in schema.names if n.lower() in RESERVED_COLUMNS]
    if clash:
        named = "; ".join(f"{n!r} (used by {use})" for n, use in clash)
        raise SchemaMismatchError(f"column names reserved by mvtable: {named}; rename the column(s) before creating the table")
    for f in schema:
        _check_struct_field_names(f.type, f.name)


def _check_struct_field_names(t: pa.DataType, column: str) -> None:
    """Refuse a struct with two fields whose names differ only in case, as duplicate column names are.

    Struct field names are matched case-insensitively like column names (a write's schema check,
    ``nested_names``; Spark and Delta readers refuse such a schema), so fields ``x`` and ``X`` of
    one struct could not be told apart."""
    if pa.types.is_struct(t):
        names = [t.field(i).name.lower() for i in range(t.num_fields)]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SchemaMismatchError(
                f"duplicate field names (case-insensitive) in struct column {column}: {dup}; rename them before creating the table"
            )
        for i in range(t.num_fields):
            _check_struct_field_names(t.field(i).type, f"{column}.{t.field(i).name}")
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        _check_struct_field_names(t.value_type, f"{column}[]")
    elif pa.types.is_map(t):
        _check_struct_field_names(t.key_type, f"{column}.key")
        _check_struct_field_names(t.item_type, f"{column}.value")
    elif pa.types.is_dictionary(t):
        _check_struct_field_names(t.value_type, column)


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """``schema`` as the table stores it (Spark's StructType JSON).

    Raises:
        SchemaMismatchError: ``schema`` has no column, or column names that differ only in case.
        UnsupportedTypeError: A column's type has no Spark SQL equivalent."""
    names = [n.lower() for n in schema.names]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SchemaMismatchError(f"duplicate column names (case-insensitive): {dup}")
    if not schema.names:
        raise SchemaMismatchError("a table needs at least one column")
    return {"type": "struct", "fields": [_field_to_json(f) for f in schema]}


def type_from_json(t: Any, *, holder: int | None = None) -> pa.DataType:
    """The Arrow type of stored (JSON) type ``t``; ``holder`` is the id of the field that holds it.

    With ``holder``, list elements and map keys and values carry the ids derived from it
    (``lineage.schema_ids.collection_id``), so the Parquet files written with the type have an id
    on every field.

    Raises:
        UnsupportedTypeError: ``t`` is no type this code knows."""
    if isinstance(t, str):
        if t in _SIMPLE_TO_ARROW:
            return _SIMPLE_TO_ARROW[t]
        m = _DECIMAL.match(t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        raise UnsupportedTypeError(f"unknown type {t!r} in table schema")
    kind = t.get("type")
    if kind == "array":
        return pa.list_(_held("element", t["elementType"], holder, 0, nullable=t.get("containsNull", True)))
    if kind == "map":
        return pa.map_(
            _held("key", t["keyType"], holder, 1, nullable=False),
            _held("value", t["valueType"], holder, 2, nullable=t.get("valueContainsNull", True)),
        )
    if kind == "struct":
        return pa.struct([field_from_json(f) for f in t["fields"]])
    raise UnsupportedTypeError(f"unknown type {t!r} in table schema")


def _held(name: str, t: Any, holder: int | None, kind: int, *, nullable: bool) -> pa.Field:
    """The element, key or value field of a list or map held by field ``holder``."""
    if holder is None:
        return pa.field(name, type_from_json(t), nullable=nullable)
    own = collection_id(holder, kind)
    return pa.field(name, type_from_json(t, holder=own), nullable=nullable, metadata={_ARROW_FIELD_ID: str(own).encode()})


def field_from_json(f: dict[str, Any]) -> pa.Field:
    """The Arrow field of a stored ``StructField``, its field id (if any) as ``PARQUET:field_id`` metadata."""
    fid = field_id(f)
    metadata = {_ARROW_FIELD_ID: str(fid).encode()} if fid is not None else None
    return pa.field(f["name"], type_from_json(f["type"], holder=fid), nullable=f.get("nullable", True), metadata=metadata)


def schema_from_json(doc: dict[str, Any]) -> pa.Schema:
    """The Arrow schema of a stored table schema, with field ids (by position for a table stored before them).

    Segments written with it carry the ids as Parquet field ids; reads resolve columns by them
    (``schema_evolution.projection``)."""
    return _schema_from_json(json.dumps(doc, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _schema_from_json(text: str) -> pa.Schema:
    return pa.schema([field_from_json(f) for f in with_ids(json.loads(text)).get("fields", [])])


def type_string(t: Any) -> str:
    """A stored (JSON) type in full, e.g. ``struct<a:integer,b:array<string>>``.

    A mismatch inside a nested type is only visible in its fields and element types (nullability is
    left out; writes do not compare it)."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "array":
        return f"array<{type_string(t['elementType'])}>"
    if kind == "map":
        return f"map<{type_string(t['keyType'])},{type_string(t['valueType'])}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{type_string(f['type'])}" for f in t["fields"]) + ">"
    return str(kind)


def arrow_type_name(t: Any) -> str:
    """A stored (JSON) type by its Arrow name (``int64``, ``struct<a: int32>``).

    That is how the Python API and ``mvtable inspect`` name types; the stored Spark name is used
    where Arrow has none."""
    try:
        return str(type_from_json(t))
    except (UnsupportedTypeError, KeyError, TypeError, ValueError):
        return type_string(t)


@functools.lru_cache(maxsize=64)
def _fields_by_lower_name(schema: pa.Schema) -> Mapping[str, Any]:
    """``schema_to_json``'s fields by lower-case name, once per schema.

    A write checks the same incoming schema when it plans and when it aligns its data, and a writer
    that appends again and again sends the same schema every time. Read-only to callers. Data
    without columns has none (``check_write_schema`` then names every column missing)."""
    if not schema.names:
        return MappingProxyType({})
    return MappingProxyType({f["name"].lower(): f for f in schema_to_json(schema)["fields"]})


def check_write_schema(table_schema: dict[str, Any], incoming: pa.Schema, *, fill_missing: bool = False) -> list[str | None]:
    """The incoming column names in table order, or ``SchemaMismatchError`` naming every missing, unexpected and mistyped column.

    Names match case-insensitively (as Spark), struct fields too, by position (``nested_names``
    gives them the table's spelling before the cast); a reordered, missing or extra struct field is
    a type mismatch. ``fill_missing`` (a merging write, as Delta's ``mergeSchema``): a nullable
    column the data lacks is None in the result, to be written as nulls.

    Raises:
        SchemaMismatchError: The data's columns or types do not match the table's."""
    table_fields = {f["name"].lower(): f for f in table_schema["fields"]}
    incoming_json = _fields_by_lower_name(incoming)
    by_lower = {n.lower(): n for n in incoming.names}
    missing = [
        f["name"]
        for k, f in table_fields.items()
        if k not in incoming_json and not (fill_missing and f.get("nullable", True) and incoming.names)
    ]
    extra = [f["name"] for k, f in incoming_json.items() if k not in table_fields]
    wrong = [
        f"{table_fields[k]['name']} (table: {arrow_type_name(table_fields[k]['type'])}, data: {arrow_type_name(f['type'])})"
        for k, f in incoming_json.items()
        if k in table_fields and _strip_nullability(f["type"]) != _strip_nullability(table_fields[k]["type"])
    ]
    if missing or extra or wrong:
        parts = []
        if missing:
            parts.append(f"missing columns {missing}")
        if extra:
            parts.append(f"unexpected columns {extra}")
        if wrong:
            parts.append(f"type mismatch in {', '.join(wrong)}")
        raise SchemaMismatchError(
            "data does not match the table schema: "
            + "; ".join(parts)
            + ". Select and cast the columns to the table's schema, or evolve it: merge_schema=True (Spark: "
            '.option("mergeSchema", "true")) adds new columns and widens types in the same commit; '
            "t.update_schema() adds, renames, drops and widens columns (see docs/schema.md)."
        )
    return [by_lower.get(f["name"].lower()) for f in table_schema["fields"]]


def _strip_nullability(t: Any) -> Any:
    if isinstance(t, str):
        return t
    if t.get("type") == "array":
        return ("array", _strip_nullability(t["elementType"]))
    if t.get("type") == "map":
        return ("map", _strip_nullability(t["keyType"]), _strip_nullability(t["valueType"]))
    return ("struct", tuple((f["name"].lower(), _strip_nullability(f["type"])) for f in t["fields"]))


def project(schema: pa.Schema, columns: Sequence[str] | None) -> pa.Schema:
    """The schema of the requested columns, in the requested order (case-insensitive).

    Raises:
        InvalidOptionError: A column is unknown or listed twice."""
    if columns is None:
        return schema
    by_lower = {n.lower(): n for n in schema.names}
    unknown = [c for c in columns if c.lower() not in by_lower]
    if unknown:
        raise InvalidOptionError(f"unknown columns {unknown}; the table has {schema.names}")
    if len({c.lower() for c in columns}) != len(columns):
        raise InvalidOptionError(f"columns listed twice in {list(columns)}")
    return pa.schema([schema.field(by_lower[c.lower()]) for c in columns])
