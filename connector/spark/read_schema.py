"""Checking a schema the user gave ``spark.read.schema(…)`` against the table's.

Spark skips ``schema()`` when the user gives one and hands that schema to the reader, which
then casts every batch to it: a narrower type fails in an executor on the first value that
does not fit (or, for some pairs, has no cast at all), a string silently renders numbers as
text. So the types must be the table's own; only nullability may differ (a nullable column
can hold a non-null one's values). No widening (int column as bigint) is allowed either:
filter pushdown and row-group pruning compare literals under the table's types, and one rule
(use the table's type, cast after reading) is easier to trust than a list of safe pairs."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from mvtable.errors import InvalidOptionError, SchemaMismatchError


def check_requested_columns(requested: StructType, table: StructType, columns: Sequence[str]) -> None:
    """Check that every column of ``columns`` (the requested schema's data columns) is in ``table`` with the same type.

    Nullability aside. Names match case-insensitively, as in Spark SQL.

    Raises:
        InvalidOptionError: A requested column is not in the table.
        SchemaMismatchError: A requested column has another type in the table."""
    by_name = {f.name.lower(): f for f in table.fields}
    unknown = [c for c in columns if c.lower() not in by_name]
    if unknown:
        raise InvalidOptionError(f"columns {unknown} are not in the table (it has {table.names})")
    wanted = {f.name: f.dataType for f in requested.fields}
    for name in columns:
        have = by_name[name.lower()].dataType
        if _all_nullable(have) != _all_nullable(wanted[name]):
            raise SchemaMismatchError(
                f"column {name!r} is {have.simpleString()} in the table, but the schema given to "
                f"spark.read.schema() asks for {wanted[name].simpleString()}: give the table's type "
                "(nullability may differ), or drop .schema() and cast after reading"
            )


def _all_nullable(t: DataType) -> DataType:
    """``t`` with every nested field, element and value nullable.

    Comparing those compares the types without nullability."""
    if isinstance(t, StructType):
        return StructType([StructField(f.name, _all_nullable(f.dataType), True) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(_all_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(_all_nullable(t.keyType), _all_nullable(t.valueType), True)
    return t
