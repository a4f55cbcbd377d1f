"""Data cast to the table's column types, and a cast that would lose values refused by name.

``check_write_schema`` compares Spark SQL types, so Arrow types that Spark sees as one
(``timestamp[ns]`` and ``timestamp[us]`` are both ``timestamp_ntz``) pass it, and the cast
to the table's Arrow types decides. That cast is safe: a value it can carry exactly (a
nanosecond timestamp on a whole microsecond) is converted, as Delta and Iceberg writers
convert it; one it cannot (a nanosecond part) would be silently truncated by an unsafe cast,
so the write is refused naming the column and a value, before anything is written. Iceberg
asks for an explicit opt-in to downcast nanoseconds for the same reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import SchemaMismatchError

__all__ = ["cast_columns"]

_Data = TypeVar("_Data", pa.Table, pa.RecordBatch)


def cast_columns(kind: type[_Data], columns: Sequence[Any], schema: pa.Schema, *, data_names: Sequence[str]) -> _Data:
    """``columns`` as a ``kind`` (``pa.Table`` or ``pa.RecordBatch``) of ``schema``.

    ``columns`` are in table order; ``data_names`` says what the data calls them.

    Raises:
        SchemaMismatchError: a column's values do not fit its table type exactly."""
    data = kind.from_arrays(list(columns), names=schema.names)
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _refusal(columns, schema, data_names, exc) from None


def _refusal(columns: Sequence[Any], schema: pa.Schema, data_names: Sequence[str], exc: Exception) -> SchemaMismatchError:
    for column, field, name in zip(columns, schema, data_names):
        if column.type == field.type:
            continue
        try:
            pc.cast(column, field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as col_exc:
            hint = ""
            if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(field.type):
                hint = (
                    f" To store them truncated to {field.type.unit}, cast the column first: "
                    f"pyarrow.compute.cast(data[{name!r}], pa.timestamp({field.type.unit!r}"
                    + (f", tz={field.type.tz!r}" if field.type.tz else "")
                    + "), safe=False)."
                )
            return SchemaMismatchError(
                f"column {name!r}: {column.type} values cannot be stored as the table's {field.type} without losing "
                f"data ({col_exc}); nothing was written.{hint}"
            )
    return SchemaMismatchError(f"data cannot be cast to the table's schema {schema}: {exc}; nothing was written")
