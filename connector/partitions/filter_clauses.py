"""The simple comparisons of a ``pyarrow.compute`` filter, as clauses of ``Predicate``s.

Pruning by Arrow's simplification costs one simplification per partition, which on a table
of thousands of partitions dominates planning. Most filters a scan gets are conjunctions of
comparisons of a column with a literal (``ts >= X & ts < Y & region == 'eu'``), which the
``Predicate`` pruner decides with one comparison per partition. So each conjunct of the
filter (the top-level ``&``) that is built of

* ``column op literal`` (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, either side),
* ``column.isin([...])``, ``column.is_null()``, ``column.is_valid()`` and their ``~``,
* ``&`` and ``|`` of those,

becomes a clause of predicates, and any part of a conjunct that reads no partitioned column
(``amount > 5``) cannot rule a partition out, so it is kept as "may match" without asking
Arrow. Only conjuncts that are neither (a function of a partitioned column, a literal the
column's type cannot hold) are left to Arrow, which then decides only the partitions the
clauses kept.

A literal is taken as Arrow compares it: cast to the column's type (a ``date`` literal to a
timestamp column's midnight), and only when that cast is exact (it casts back to the same
literal: ``0.1`` is no ``float32``, ``2.5`` no integer); a naive time against a zoned
column (or the reverse) is left to Arrow, which refuses to compare them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..expression_tree import Call, FieldRef, Literal, Node, expression_tree, field_names
from ..stats import Predicate, statable

__all__ = ["AllOf", "Always", "AnyOf", "Clause", "FilterClauses", "Leaf", "filter_clauses", "leaves", "parse_filter"]

_COMPARE = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_AND = ("and", "and_kleene")
_OR = ("or", "or_kleene")
_MATCH_NULLS = 0  # SetLookupOptions.null_matching_behavior MATCH: a null in the value set matches a null


@dataclass(frozen=True)
class Leaf:
    """One comparison, decided as the ``Predicate`` it is."""

    predicate: Predicate


@dataclass(frozen=True)
class AllOf:
    """An ``&``: a partition may match when it may match every part."""

    parts: tuple[Clause, ...]


@dataclass(frozen=True)
class AnyOf:
    """An ``|``: a partition may match when it may match some part."""

    parts: tuple[Clause, ...]


@dataclass(frozen=True)
class Always:
    """A part that cannot rule out a partition: it reads no partitioned column."""


Clause = Leaf | AllOf | AnyOf | Always


@dataclass(frozen=True)
class FilterClauses:
    """A filter split for pruning: ``clauses`` decided by predicates; ``rest``: whether Arrow must decide the rest."""

    clauses: tuple[Clause, ...]
    rest: bool


def filter_clauses(tree: Node | None, arrow: pa.Schema, partitioned: set[str]) -> FilterClauses:
    """The clauses of the conjuncts of ``tree`` (``expression_tree`` of a filter over ``arrow``).

    ``partitioned`` are the columns some partition field is a transform of."""
    if tree is None:
        return FilterClauses((), rest=True)
    clauses: list[Clause] = []
    rest = False
    for conjunct in _conjuncts(tree):
        clause = _clause(conjunct, arrow, partitioned)
        if clause is None:
            rest = True
        elif not isinstance(clause, Always):
            clauses.append(clause)
    return FilterClauses(tuple(clauses), rest=rest)


def parse_filter(filter: pc.Expression, arrow: pa.Schema, partitioned: set[str]) -> FilterClauses:
    """``filter_clauses`` of a ``pyarrow.compute`` expression."""
    return filter_clauses(expression_tree(filter), arrow, partitioned)


def leaves(clause: Clause) -> list[Predicate]:
    if isinstance(clause, Leaf):
        return [clause.predicate]
    if isinstance(clause, AllOf | AnyOf):
        return [p for c in clause.parts for p in leaves(c)]
    return []


def _conjuncts(node: Node) -> list[Node]:
    if isinstance(node, Call) and node.name in _AND:
        return [c for arg in node.args for c in _conjuncts(arg)]
    return [node]


def _clause(node: Node, arrow: pa.Schema, partitioned: set[str]) -> Clause | None:
    """The clause ``node`` (a boolean expression) prunes as, or None when only Arrow can decide it."""
    names = field_names(node)
    if not names <= set(arrow.names):
        return None  # a column the table lacks: not ours to judge (check_filter names it)
    if names and not names & partitioned:
        return Always()
    if not isinstance(node, Call):
        return None
    if node.name in _AND or node.name in _OR:
        parts = [_clause(arg, arrow, partitioned) for arg in node.args]
        if any(p is None for p in parts):
            return None
        kept = tuple(p for p in parts if p is not None and not isinstance(p, Always))
        if node.name in _OR and len(kept) < len(parts):
            return Always()  # one side may match anything
        return AllOf(kept) if node.name in _AND else AnyOf(kept)
    if node.name == "invert" and len(node.args) == 1 and isinstance(node.args[0], Call):
        inner = _null_test(node.args[0], arrow)
        if inner is None:
            return None
        return Leaf(Predicate(inner.column, "not_null" if inner.op == "is_null" else "is_null"))
    null_test = _null_test(node, arrow)
    if null_test is not None:
        return Leaf(null_test)
    if node.name in _COMPARE and len(node.args) == 2:
        return _comparison(_COMPARE[node.name], node.args[0], node.args[1], arrow)
    if node.name == "is_in" and len(node.args) == 1 and isinstance(node.args[0], FieldRef) and node.options is not None:
        return _is_in(node.args[0].name, node.options, arrow)
    return None


def _null_test(node: Call, arrow: pa.Schema) -> Predicate | None:
    """``is_null``/``is_valid`` of a column as a predicate (``is_null`` counting NaN as null is not one)."""
    if len(node.args) != 1 or not isinstance(node.args[0], FieldRef):
        return None
    column = node.args[0].name
    if node.name == "is_valid":
        return Predicate(column, "not_null")
    if node.name == "is_null":
        nan_is_null = node.options is not None and bool(node.options.as_py().get("nan_is_null"))
        if nan_is_null and pa.types.is_floating(arrow.field(column).type):
            return None
        return Predicate(column, "is_null")
    return None


def _comparison(op: str, left: Node, right: Node, arrow: pa.Schema) -> Clause | None:
    if isinstance(left, Literal) and isinstance(right, FieldRef):
        left, right, op = right, left, _FLIPPED[op]
    if not isinstance(left, FieldRef) or not isinstance(right, Literal):
        return None
    value = _value(right.value, arrow.field(left.name).type)
    if value is None:
        return None
    return Leaf(Predicate(left.name, op, value))


def _is_in(column: str, options: pa.StructScalar, arrow: pa.Schema) -> Clause | None:
    value_set = options["value_set"].values
    behaviour = options["null_matching_behavior"].as_py()
    if value_set is None:
        return None
    target = arrow.field(column).type
    values = []
    for item in value_set:
        if not item.is_valid:
            continue
        value = _value(item, target)
        if value is None:
            return None
        values.append(value)
    leaf = Leaf(Predicate(column, "in", tuple(values)))
    if behaviour == _MATCH_NULLS and value_set.null_count:
        return AnyOf((leaf, Leaf(Predicate(column, "is_null"))))
    return leaf


def _value(literal: pa.Scalar, target: pa.DataType) -> Any:
    """The Python value Arrow compares a column of type ``target`` with, or None when that is not exact."""
    if not literal.is_valid or not statable(target):
        return None
    if pa.types.is_timestamp(literal.type) and pa.types.is_timestamp(target) and (literal.type.tz is None) != (target.tz is None):
        return None
    try:
        cast = literal.cast(target)
        if not cast.cast(literal.type).equals(literal):
            return None  # not exact (a double that no float32 holds): Arrow compares in the wider type
        if pa.types.is_timestamp(target) and target.unit == "ns":
            cast = cast.cast(pa.timestamp("us", target.tz))  # safe: refuses a time with nanoseconds
        value = cast.as_py()
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
