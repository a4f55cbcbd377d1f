"""The ``filters`` and ``columns`` arguments of ``read_native`` / ``create_view``, checked without Spark.

Both are sequences, and Python iterates a string or a lone tuple too: ``columns="id"``
would ask for the columns ``i`` and ``d``, ``filters="id > 3"`` for the filters ``i``,
``d``, … So the whole argument's shape is checked first, and each message says what shape
is expected. Filters take ``pyarrow.parquet``'s flat form (a conjunction); its other form,
a list of lists (DNF, an OR of ANDs), is refused by name rather than misread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvtable import checks
from mvtable.errors import InvalidOptionError

from .. import stats
from ..schema import project
from ..stats import Predicate

__all__ = ["Filter", "checked_columns", "to_predicate", "to_predicates"]

Filter = tuple[str, str, Any]
"""``(column, op, value)``, as ``pyarrow.parquet.read_table(filters=…)`` takes them: ``op`` is
one of ``== != < <= > >=`` (``=`` too), ``in`` / ``not in`` (``value`` a collection), or
``is null`` / ``is not null`` (``value`` ignored; ``(column, op)`` will do). The list is a
conjunction."""

COMPARISONS = (*stats.COMPARISONS, "=")  # Predicate's comparisons, and SQL's spelling of ==
_EXAMPLE = "[('id', '>', 3), ('status', '==', 'ok')]"


def checked_columns(columns: Sequence[str] | None, schema: pa.Schema) -> pa.Schema:
    """The schema of the requested ``columns`` (all when ``None``).

    Raises:
        InvalidOptionError: ``columns`` is not a list of names (a bare string, say), names an
            unknown column, or is empty."""
    names = checks.column_names(columns, name="read_native columns")
    if names is not None and not names:
        raise InvalidOptionError("read_native: columns names no column; pass None for every column")
    return project(schema, names)  # InvalidOptionError for unknown columns


def to_predicates(filters: Sequence[Filter] | None, schema: pa.Schema) -> list[Predicate]:
    """Every filter of ``filters`` (a list of ``(column, op, value)`` tuples, ANDed) as a ``Predicate``.

    ``None`` or an empty list filter nothing.

    Raises:
        InvalidOptionError: ``filters`` or one of its filters does not have that shape."""
    if filters is None:
        return []
    if isinstance(filters, (str, bytes)) or not isinstance(filters, (list, tuple)):
        raise InvalidOptionError(
            f"read_native: filters must be a list of (column, op, value) tuples, e.g. {_EXAMPLE}, not {filters!r}"
        )
    if len(filters) in (2, 3) and all(isinstance(x, str) for x in filters[:2]):  # one filter without its list
        raise InvalidOptionError(
            f"read_native: filters must be a list of (column, op, value) tuples: wrap the one filter, [{tuple(filters)!r}]"
        )
    if any(isinstance(f, list) and f and all(isinstance(g, (list, tuple)) for g in f) for f in filters):
        raise InvalidOptionError(_dnf_message(filters))
    return [to_predicate(f, schema) for f in filters]


def _dnf_message(filters: Sequence[Any]) -> str:
    """What to write instead of a DNF: its one conjunction flat, or (an OR) ``.where``."""
    terms = [f if isinstance(f, list) else [f] for f in filters]
    if len(terms) == 1:
        hint = f"write the one AND flat: {[tuple(g) for g in terms[0]]!r}"
    else:
        hint = (
            f"an OR of {len(terms)} terms cannot be one filters list; pass the filters every term shares "
            f"(flat, e.g. {[tuple(g) for g in terms[0]]!r} for the first term alone) and OR the rest with .where(…) "
            "on the DataFrame"
        )
    return (
        "read_native: filters in DNF (a list of lists: an OR of ANDs, as pyarrow.parquet accepts) are not supported; "
        f"filters is one flat list of (column, op, value) tuples, all of which must hold: {hint}"
    )


def to_predicate(f: Filter, schema: pa.Schema) -> Predicate:
    """One ``(column, op, value)`` filter, checked against the table's schema.

    Raises:
        InvalidOptionError: The filter is not such a tuple, names an unknown column, or has an
            operator or value its column cannot take."""
    if not isinstance(f, (tuple, list)) or len(f) not in (2, 3):
        raise InvalidOptionError(
            f"read_native: each filter is a (column, op, value) tuple, e.g. ('id', '>', 3), not {f!r}; "
            f"filters is a list of them, e.g. {_EXAMPLE}"
        )
    column, op = f[0], str(f[1]).strip().lower()
    if column not in schema.names:
        raise InvalidOptionError(f"read_native: filter column {column!r} is not in the table (it has {schema.names})")
    if op in COMPARISONS:
        if len(f) == 2:
            raise InvalidOptionError(
                f"read_native: filter {f!r} has no value: {op!r} compares with one, ({column!r}, {f[1]!r}, value); "
                "two-item filters are only for 'is null' and 'is not null'"
            )
        if f[2] is None:
            raise InvalidOptionError(f"read_native: filter {f!r} compares with null; use ({column!r}, 'is null')")
        return Predicate(column, "==" if op == "=" else op, f[2])
    if op in ("in", "not in"):
        value = f[2] if len(f) == 3 else None
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise InvalidOptionError(f"read_native: filter {f!r} needs a collection of values, e.g. ({column!r}, {op!r}, [1, 2])")
        values = tuple(value)
        return Predicate(column, "in", values) if op == "in" else Predicate(column, "not_in", values)
    if op in ("is null", "is not null"):
        return Predicate(column, "is_null" if op == "is null" else "not_null")
    raise InvalidOptionError(
        f"read_native: unknown filter operator {f[1]!r}; use == != < <= > >= in, not in, is null, is not null"
    )
