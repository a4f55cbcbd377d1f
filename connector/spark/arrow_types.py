"""The Arrow schema of a DataFrame that a write hands to mvtable, refusing Spark types that would not come back as themselves.

pyspark's ``to_arrow_schema`` turns Spark's ``variant`` into its physical form, a struct of
two binary fields (``value``, ``metadata``). Written as such, the column would read back as
``struct<value: binary, metadata: binary>`` through every reader, silently another type. So a
write refuses it up front and says what to store instead."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, VariantType

from mvtable.errors import UnsupportedTypeError

__all__ = ["write_schema"]


def write_schema(schema: StructType) -> pa.Schema:
    """``schema`` as Arrow, with timestamps in UTC.

    Raises:
        UnsupportedTypeError: A column holds a ``variant`` anywhere inside it (the first such
            column is named)."""
    for field in schema.fields:
        if _has_variant(field.dataType):
            raise UnsupportedTypeError(
                f"column {field.name!r} holds Spark's variant type, which mvtable does not store: it would read back "
                "as a struct of binaries. Store it as a string (to_json(col)) or parse it into a struct first"
            )
    return to_arrow_schema(schema, timezone="UTC")


def _has_variant(t: DataType) -> bool:
    if isinstance(t, VariantType):
        return True
    if isinstance(t, StructType):
        return any(_has_variant(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return _has_variant(t.elementType)
    if isinstance(t, MapType):
        return _has_variant(t.keyType) or _has_variant(t.valueType)
    return False
