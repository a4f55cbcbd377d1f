"""Parsing ``partition_by=["day(ts)", "region", "bucket(16, id)"]`` into a checked ``PartitionSpec``.

The spelling is Spark SQL's and Iceberg's DDL (``PARTITIONED BY (days(ts), bucket(16, id))``):
a column alone is ``identity``; ``years``/``months``/``days``/``hours`` are accepted for the
singular names. Each field refers to its column by field id, so a later rename keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvtable.errors import PartitionSpecError, SchemaEvolutionError
from mvtable.lineage.partitioning import FIRST_PARTITION_FIELD_ID, PartitionField, PartitionSpec
from mvtable.lineage.schema_ids import top_level_ids

from ..schema import schema_from_json
from .transforms import Transform, make_transform, parse_transform

__all__ = ["carried_spec", "parse_partition_by", "parse_partition_field", "source_column", "spec_columns"]

_CALL = re.compile(r"^\s*([A-Za-z_]+)\s*\(\s*(?:(-?\d+)\s*,\s*)?(.+?)\s*\)\s*$")


def parse_partition_field(item: str) -> tuple[Transform, str]:
    """``(transform, column)`` of one ``partition_by`` item, the column as written (backticks removed).

    Raises:
        PartitionSpecError: the item is not a column or ``transform(column)``/``transform(N, column)``."""
    if not isinstance(item, str) or not item.strip():
        raise PartitionSpecError(f"a partition field must be a column name or a transform like day(ts), not {item!r}")
    m = _CALL.match(item)
    if m is None:
        if "(" in item or ")" in item:
            raise PartitionSpecError(f"cannot read the partition field {item!r}; write a column, or day(ts), bucket(16, id)")
        return parse_transform("identity"), _unquote(item.strip())
    name, param, column = m.group(1).lower(), m.group(2), m.group(3)
    return make_transform(name, int(param) if param is not None else None, what=item), _unquote(column)


def _unquote(column: str) -> str:
    return column[1:-1] if len(column) > 1 and column[0] == column[-1] == "`" else column


def parse_partition_by(
    items: Sequence[str], table_schema: dict[str, Any], *, spec_id: int = 1, first_field_id: int = FIRST_PARTITION_FIELD_ID
) -> PartitionSpec:
    """The spec ``items`` describe over a table of ``table_schema`` (the log's schema JSON, with field ids).

    Raises:
        PartitionSpecError: names the field: an unknown or nested column, a transform on a type it does not
            take, a field given twice (or two time transforms of one column), a missing or bad parameter."""
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise PartitionSpecError(f"partition_by takes a list of fields like ['day(ts)', 'region'], not {items!r}")
    arrow = schema_from_json(table_schema)
    ids = top_level_ids(table_schema)
    fields: list[PartitionField] = []
    seen: dict[tuple[int, str], str] = {}
    temporal: dict[int, str] = {}
    for item in items:
        transform, written = parse_partition_field(item)
        column = _column(written, arrow, item=item)
        transform.check_source(arrow.field(column).type, column)
        source_id = ids[column]
        key = (source_id, transform.text)
        if key in seen:
            raise PartitionSpecError(f"partition field {item!r} is given twice (as {seen[key]!r} before)")
        if transform.temporal:
            if source_id in temporal:
                raise PartitionSpecError(
                    f"partition field {item!r} is redundant with {temporal[source_id]!r}: one time transform per column"
                )
            temporal[source_id] = item
        seen[key] = item
        name = transform.default_name(column)
        if any(f.name == name for f in fields):
            raise PartitionSpecError(f"partition field {item!r} would be named {name!r}, like an earlier field")
        fields.append(
            PartitionField(source_id=source_id, field_id=first_field_id + len(fields), name=name, transform=transform.text)
        )
    return PartitionSpec(spec_id=spec_id, fields=tuple(fields))


def _column(written: str, schema: pa.Schema, *, item: str) -> str:
    """The table's spelling of ``written``: exact, else the one column equal ignoring case (Spark's default).

    Raises:
        PartitionSpecError: no such column, or a nested field (``a.b``)."""
    if written in schema.names:
        return written
    folded = [n for n in schema.names if n.lower() == written.lower()]
    if len(folded) == 1:
        return folded[0]
    head = written.split(".", 1)[0]
    if "." in written and head in schema.names:
        raise PartitionSpecError(f"cannot partition by {item!r}: {written} is a nested field; partition by a top-level column")
    raise PartitionSpecError(f"cannot partition by {item!r}: the table has no column {written!r}; its columns are {schema.names}")


def source_column(spec_field: PartitionField, table_schema: dict[str, Any]) -> str | None:
    """The column a spec field partitions by under ``table_schema`` (None once that column was dropped)."""
    for name, fid in top_level_ids(table_schema).items():
        if fid == spec_field.source_id:
            return name
    return None


def spec_columns(spec: PartitionSpec, table_schema: dict[str, Any]) -> list[tuple[PartitionField, str | None, Transform]]:
    """Each field of ``spec`` with its source column's current name and its parsed transform."""
    return [(f, source_column(f, table_schema), parse_transform(f.transform)) for f in spec.fields]


def carried_spec(
    specs: dict[int, PartitionSpec], default_spec_id: int, old_doc: dict[str, Any], new_doc: dict[str, Any]
) -> PartitionSpec | None:
    """The table's current spec over a schema that replaces its own (``overwrite_schema``), as a new spec.

    A replaced schema gives every column a new field id, so the spec's fields are carried over
    by their columns' names (as Spark matches them) to the new ids, under a new spec id and new
    partition field ids; the old specs stay for the versions before. None when the table is
    not partitioned.

    Raises:
        SchemaEvolutionError: a column the spec partitions by is not in the new schema, or has a type
            its transform does not take; the error says to change the spec first."""
    spec = specs[default_spec_id]
    if not spec.partitioned:
        return None
    arrow = schema_from_json(new_doc)
    ids = top_level_ids(new_doc)
    next_field_id = max(f.field_id for s in specs.values() for f in s.fields) + 1
    fields: list[PartitionField] = []
    for f in spec.fields:
        column = source_column(f, old_doc) or f.name
        matches = [n for n in arrow.names if n == column] or [n for n in arrow.names if n.lower() == column.lower()]
        rule = "(rule: a schema overwritten on a partitioned table keeps the columns its partition spec partitions by)"
        if len(matches) != 1:
            raise SchemaEvolutionError(
                f"overwrite schema: the new schema has no column {column!r}, the source of partition field {f.name!r} "
                f"({f.transform}) {rule}; change the spec first with Table.update_partitioning"
            )
        transform = parse_transform(f.transform)
        try:
            transform.check_source(arrow.field(matches[0]).type, matches[0])
        except PartitionSpecError as exc:
            raise SchemaEvolutionError(
                f"overwrite schema: partition field {f.name!r} cannot follow column {matches[0]!r} into the new schema "
                f"({exc.message}); change the spec first with Table.update_partitioning"
            ) from None
        fields.append(
            PartitionField(source_id=ids[matches[0]], field_id=next_field_id + len(fields), name=f.name, transform=f.transform)
        )
    return PartitionSpec(spec_id=max(specs) + 1, fields=tuple(fields))
