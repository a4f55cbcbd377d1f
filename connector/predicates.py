"""Checking the ``Predicate``s of a scan against the table's schema when it is planned.

A predicate is used twice: to skip row groups by their statistics and as an exact Arrow
filter on the rows read. A predicate that does not fit the table would fail in the middle
of a read (or worse, be skipped by the pruning, which keeps a row group it cannot compare),
so every one is checked first and a bad one is an ``InvalidFilterError`` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mvtable.errors import InvalidFilterError

from .expressions import check_filter
from .stats import COMPARISONS, OPS, STRING_OPS, Predicate

__all__ = ["check_predicates"]

_HOW = "use Predicate(column, op, value) from mvtable.connector.stats"


def check_predicates(predicates: object, schema: pa.Schema) -> tuple[Predicate, ...]:
    """``predicates`` as a tuple, after checking each one against ``schema``.

    Each must be a ``Predicate`` over a column of ``schema`` with a known operator and a value that
    column's type can be compared with (the predicate's expression binds to ``schema``, see
    ``check_filter``).

    ``(column, op, value)`` tuples are refused rather than guessed at: they are the
    ``filters`` of ``create_view``/``read_native``, whose operators are SQL's (``=``,
    ``not in``, ``is null``) and not ``Predicate``'s.

    Raises:
        InvalidFilterError: A predicate is malformed or does not fit ``schema``."""
    if isinstance(predicates, (str, bytes, Predicate)) or not isinstance(predicates, Sequence):
        raise InvalidFilterError(f"predicates must be a list of Predicate objects, not {type(predicates).__name__}; {_HOW}")
    for p in predicates:
        _check_one(p, schema)
    return tuple(predicates)


def _check_one(p: object, schema: pa.Schema) -> None:
    if not isinstance(p, Predicate):
        hint = f" (e.g. Predicate{tuple(p)!r})" if isinstance(p, tuple) else ""
        raise InvalidFilterError(f"predicate {p!r} is a {type(p).__name__}, not a Predicate: {_HOW}{hint}")
    if p.column not in schema.names:
        raise InvalidFilterError(f"{p}: the table has no column {p.column!r}; its columns are {schema.names}")
    if p.op not in OPS:
        raise InvalidFilterError(f"{p}: unknown operator {p.op!r}; the operators are {' '.join(OPS)}")
    if p.op in COMPARISONS and p.value is None:
        raise InvalidFilterError(f"{p} compares with None, which matches no row; use op 'is_null' or 'not_null'")
    if p.op == "in" and not isinstance(p.value, (list, tuple, set, frozenset)):
        raise InvalidFilterError(f"{p}: 'in' takes a list or tuple of values, not {type(p.value).__name__}")
    if p.op in STRING_OPS and not isinstance(p.value, str):
        raise InvalidFilterError(f"{p}: {p.op!r} takes a string, not {type(p.value).__name__}")
    try:
        expression = p.expression()
    except (pa.ArrowException, TypeError, ValueError) as exc:  # e.g. an 'in' list of mixed types
        raise InvalidFilterError(f"{p}: its value cannot be an Arrow literal ({exc})") from None
    check_filter(expression, schema, what=repr(p))
