"""Spark's Parquet reader over segments written under an older schema, columns resolved by field id.

``read_native`` / ``create_view`` build the scans here; ``format("mvtable")`` sends the schemas and
expressions in its scan plan (``native_plan.schema_groups``) and ``NativeScanRule.java`` builds them.

Spark's Parquet scan matches columns by name, and a segment written before a rename, drop or type
change holds them under other names or types. Such segments are grouped by their file schema;
each group is read with its own physical columns and turned into the table's columns by Spark
expressions built from ``schema_evolution.projection``: a renamed column is aliased, a widened
one cast, an added one a typed null, a struct rebuilt field by field (``named_struct``), an array
of structs element by element (``transform``). A dropped column is never read, so its values
never come back, even under a column added again with its name. Filters on the result are still
pushed into the scans through these projections.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..schema import schema_to_json, type_string, type_to_json
from ..schema_evolution.field_ids import arrow_field_id, strip_ids
from ..schema_evolution.projection import ReadProjection

__all__ = ["physical_schema", "projection_exprs"]


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _spark_type(t: pa.DataType) -> str:
    return type_string(type_to_json(t, column="x"))


def physical_schema(projection: ReadProjection, file_schema: pa.Schema) -> Any:
    """The Spark schema of the file columns ``projection`` reads (at least one, so that rows are counted)."""
    from pyspark.sql.types import StructType

    used = set(projection.physical_columns(None)) or {file_schema.names[0]}
    fields = [f.with_metadata(None) for f in file_schema if f.name in used]
    return StructType.fromJson(strip_ids(schema_to_json(pa.schema(fields))))


def projection_exprs(projection: ReadProjection) -> list[str]:
    """One Spark SQL expression per table column, over the file's columns, named as the table names it."""
    out = []
    for name, col in projection.columns.items():
        if col.physical is None or col.file_field is None:
            out.append(f"CAST(NULL AS {_spark_type(col.table_field.type)}) AS {_q(name)}")
        elif col.same:
            out.append(f"{_q(col.physical)} AS {_q(name)}")
        else:
            out.append(f"{_conform(_q(col.physical), col.file_field, col.table_field, 0)} AS {_q(name)}")
    return out


def _conform(expr: str, ff: pa.Field, tf: pa.Field, depth: int) -> str:
    a, b = ff.type, tf.type
    if pa.types.is_struct(b) and pa.types.is_struct(a):
        by_id = {arrow_field_id(a.field(i)): a.field(i) for i in range(a.num_fields)}
        parts = []
        for j in range(b.num_fields):
            want = b.field(j)
            have = by_id.get(arrow_field_id(want))
            value = (
                f"CAST(NULL AS {_spark_type(want.type)})"
                if have is None
                else _conform(f"{expr}.{_q(have.name)}", have, want, depth + 1)
            )
            parts.append(f"'{want.name}', {value}")
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({', '.join(parts)}) END"
    if (pa.types.is_list(b) or pa.types.is_large_list(b)) and (pa.types.is_list(a) or pa.types.is_large_list(a)):
        var = f"x{depth}"
        return f"transform({expr}, {var} -> {_conform(var, a.value_field, b.value_field, depth + 1)})"
    if pa.types.is_map(b) and pa.types.is_map(a):
        k, v = f"k{depth}", f"v{depth}"
        return f"transform_values({expr}, ({k}, {v}) -> {_conform(v, a.item_field, b.item_field, depth + 1)})"
    if a == b:
        return expr
    if pa.types.is_date(a) and pa.types.is_timestamp(b) and b.tz is not None:
        # midnight UTC, as mvtable's own readers widen a date: a CAST would take the session's time zone
        return f"timestamp_seconds(CAST(unix_date({expr}) AS BIGINT) * 86400)"
    return f"CAST({expr} AS {_spark_type(b)})"
