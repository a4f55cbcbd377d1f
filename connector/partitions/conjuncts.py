"""A pyarrow filter expression as a conjunction of ``Predicate``s, when it is one.

A scoped push decides from metadata alone (partition values, row-group statistics) whether
a segment holds no row of its ``replace_where`` predicate, only such rows, or some. That
needs the predicate's structure, read by ``expression_tree`` (the one reader of Arrow's
serialized expressions; partition pruning uses it too).

Only what statistics can decide is recognised: ``and`` of ``column op literal`` (``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, either side), ``column.isin([...])`` without nulls,
``column.is_null()``, ``column.is_valid()`` and ``~column.is_null()``, over top-level
columns. Anything else answers None and the caller falls back to reading the rows; this
module decides how much is *read*, never which rows match (the exact expression does that).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..expression_tree import Call, FieldRef, Literal, Node, expression_tree
from ..stats import Predicate, statable

__all__ = ["conjuncts"]

_OPS = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_AND = ("and", "and_kleene")


def conjuncts(expression: pc.Expression, schema: pa.Schema) -> tuple[Predicate, ...] | None:
    """The ``Predicate``s whose conjunction is ``expression``, or None when it is not such a conjunction."""
    tree = expression_tree(expression)
    out: list[Predicate] = []
    if tree is None or not _collect(tree, schema, out):
        return None
    return tuple(out)


def _collect(node: Node, schema: pa.Schema, out: list[Predicate]) -> bool:
    if not isinstance(node, Call):
        return False
    if node.name in _AND:
        return all(_collect(a, schema, out) for a in node.args)
    p = _predicate(node, schema)
    if p is None:
        return False
    out.append(p)
    return True


def _column(node: Node, schema: pa.Schema) -> str | None:
    return node.name if isinstance(node, FieldRef) and node.name in schema.names else None


def _option(node: Call, name: str) -> Any:
    if node.options is None:
        return None
    try:
        return node.options[name].as_py()
    except KeyError:
        return None


def _predicate(node: Call, schema: pa.Schema) -> Predicate | None:
    name, args = node.name, node.args
    if name in _OPS and len(args) == 2:
        (a, b), op = args, _OPS[name]
        if isinstance(a, Literal) and isinstance(b, FieldRef):
            (a, b), op = (b, a), _FLIPPED[op]
        column = _column(a, schema)
        if column is not None and isinstance(b, Literal):
            value = _python(b.value)
            return Predicate(column, op, value) if value is not None else None
        return None
    column = _column(args[0], schema) if len(args) == 1 else None
    if column is None:
        if name == "invert" and len(args) == 1 and isinstance(args[0], Call) and args[0].name == "is_null":
            inner = _predicate(args[0], schema)
            return Predicate(inner.column, "not_null") if inner is not None else None
        return None
    if name == "is_in":
        values = _option(node, "value_set")
        if values is None or any(v is None for v in values):
            return None
        return Predicate(column, "in", tuple(values))
    if name == "is_null":
        return None if _option(node, "nan_is_null") else Predicate(column, "is_null")
    if name == "is_valid":
        return Predicate(column, "not_null")
    return None


def _python(scalar: pa.Scalar) -> Any:
    """A literal as the Python value statistics decode to (None: one they cannot be compared with)."""
    t = scalar.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return None  # as_py() would give a pandas Timestamp or lose nanoseconds
    if not statable(t):
        return None
    return scalar.as_py()
