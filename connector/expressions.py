"""Which columns a pyarrow filter expression reads, exactly.

A delete decodes only the columns its filter needs, so a wrong answer here is a wrong
delete: a column left out fails the evaluation, a column guessed in costs a decode. pyarrow
has no public "referenced fields" API, and the expression's text is no guide (``id`` is a
substring of ``paid``; a column may be named ``a and b``). Binding is exact: a column is
referenced iff the expression does not bind to the schema without it (references by name
only, see below, so dropping a column moves no other), and a nested reference
(``pc.field("s", "x")``) starts at its top-level column, so it counts as a reference to
``s``.

The binding is done by planning the expression over an empty table of the schema (an Acero
``project``). ``Expression.to_substrait`` binds too, but it refuses every function without
a Substrait mapping (``utf8_lower``, ``year``, ``list_value_length``, safe casts), which
filters use. A plan costs time in proportion to its columns, so the referenced columns are
not found by renaming each column in turn (one plan of every column per column: far too slow
on a wide table) but by growing a schema from nothing: a plan over the columns found so
far fails naming the first reference it cannot resolve (pyarrow's "No match for
FieldRef.Name(x)"), which is added, until the plan binds. With ``k`` referenced columns that
is one plan of the whole schema and ``k + 1`` plans of at most ``k`` columns. A reference is
added only when pyarrow names it, and the result always binds, so no column is ever left
out; a name pyarrow's message leaves ambiguous (a column named ``a) in b`` beside one named
``a``) adds every candidate, which costs a decode at most.

A reference by position (``pc.field(1)``) binds whatever the names are, so it cannot be
attributed to a column: then every column is read, in table order, which is always right.
Such references are told apart by pyarrow's own serialization (pickling), which supports
references by name only.

``check_filter`` is where a user's filter that does not fit the table becomes an
``InvalidFilterError`` (``referenced_columns`` itself only answers ``None`` for it).
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

from mvtable.errors import InvalidFilterError

__all__ = ["check_filter", "referenced_columns"]

_NO_MATCH = "No match for FieldRef."
# what pyarrow raises when an expression does not bind: unknown column, no kernel for the types
_BIND_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError)


def check_filter(expression: object, schema: pa.Schema, *, what: str = "filter") -> None:
    """Raise ``InvalidFilterError`` unless ``expression`` is a boolean expression over the columns of ``schema``.

    The one place where pyarrow's binding errors (``No match for FieldRef``, ``no kernel matching
    input types``) become an error that names the filter, the problem and the table's columns,
    before anything is read or committed.

    Raises:
        InvalidFilterError: ``expression`` is no expression, not a boolean condition, or does not bind to ``schema``."""
    if not isinstance(expression, pc.Expression):
        raise InvalidFilterError(
            f"{what} must be a pyarrow.compute.Expression (e.g. pc.field('id') == 1), not {type(expression).__name__}"
        )
    columns = ", ".join(f"{f.name!r} {f.type}" for f in schema)
    try:
        result = _bound_type(expression, schema)
    except _BIND_ERRORS as exc:
        message = str(exc)
        if message.startswith(_NO_MATCH):
            ref = message[len(_NO_MATCH) :].split(" in ", 1)[0]
            simple = ref.startswith("Name(") and ref.endswith(")")
            missing = f"column {ref[len('Name(') : -1]!r}" if simple else f"FieldRef.{ref}"
            problem = f"reads {missing}, which the table does not have"
        else:
            problem = (
                f"does not fit the types of the columns it reads ({message.splitlines()[0]}); cast the literal or the column"
            )
        raise InvalidFilterError(f"{what} {expression} {problem}; the table's columns are: {columns}") from None
    if not pa.types.is_boolean(result):
        raise InvalidFilterError(f"{what} {expression} must be a boolean condition, it is {result}; compare it with a value")


def referenced_columns(expression: pc.Expression, schema: pa.Schema) -> list[str] | None:
    """The top-level columns of ``schema`` that ``expression`` reads, in table order.

    ``None`` (read every column) when it refers to a column by position or does not bind to
    ``schema`` at all (then ``check_filter`` names the problem)."""
    if _by_position(expression) or _bind_error(expression, schema) is not None:
        return None
    found: set[str] = set()
    while True:
        error = _bind_error(expression, pa.schema([f for f in schema if f.name in found]))
        if error is None:
            return [name for name in schema.names if name in found]
        new = _unmatched(error, schema.names) - found
        if not new:  # not a reference pyarrow could name: reading every column is right
            return None
        found |= new


def _unmatched(error: Exception, names: list[str]) -> set[str]:
    """The columns of ``names`` that pyarrow's "No match for FieldRef.Name(x) in …" may name.

    The same holds for ``FieldRef.Nested(FieldRef.Name(x) …)``. Usually one; several only when one
    name followed by ``)`` starts another."""
    message = str(error)
    if not isinstance(error, pa.ArrowInvalid) or not message.startswith(_NO_MATCH):
        return set()
    rest = message[len(_NO_MATCH) :].removeprefix("Nested(FieldRef.")
    if not rest.startswith("Name("):
        return set()
    rest = rest[len("Name(") :]
    return {name for name in names if rest.startswith(name + ")")}


def _by_position(expression: pc.Expression) -> bool:
    """Whether ``expression`` refers to a column by position, or cannot be inspected.

    Reading every column is right either way."""
    try:
        pickle.dumps(expression)
    except Exception:
        return True
    return False


def _bound_type(expression: pc.Expression, schema: pa.Schema) -> pa.DataType:
    """The type of ``expression`` bound to ``schema``: one plan over an empty table of it."""
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(schema.empty_table()))
    plan = acero.Declaration.from_sequence([source, acero.Declaration("project", acero.ProjectNodeOptions([expression]))])
    return plan.to_table(use_threads=False).schema.field(0).type


def _bind_error(expression: pc.Expression, schema: pa.Schema) -> Exception | None:
    try:
        _bound_type(expression, schema)
    except _BIND_ERRORS as exc:
        return exc
    return None
