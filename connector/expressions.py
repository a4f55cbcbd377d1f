"""Which columns a pyarrow filter expression reads, exactly.

A delete decodes only the columns its filter needs, so a wrong answer here is a wrong
delete: a column left out fails the evaluation, a column guessed in costs a decode. pyarrow
has no public "referenced fields" API, and the expression's text is no guide (``id`` is a
substring of ``paid``; a column may be named ``a and b``). Binding is exact: a column is
referenced iff the expression no longer binds once that column is renamed to a name no
expression uses. Renaming rather than dropping keeps every other column at its position,
and a nested reference (``pc.field("s", "x")``) starts at its top-level column, so it counts
as a reference to ``s``.

The binding is done by planning the expression over an empty table of the schema (an Acero
``project``, about 0.2 ms a column). ``Expression.to_substrait`` binds too, but it refuses
every function without a Substrait mapping (``utf8_lower``, ``year``,
``list_value_length``, safe casts), which filters use.

A reference by position (``pc.field(1)``) binds whatever the names are, so it cannot be
attributed to a column: then every column is read, in table order, which is always right.
Such references are told apart by pyarrow's own serialization (pickling), which supports
references by name only.
"""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero

__all__ = ["referenced_columns"]


def referenced_columns(expression: pc.Expression, schema: pa.Schema) -> list[str] | None:
    """The top-level columns of ``schema`` that ``expression`` reads, in table order; ``None``
    (read every column) when it refers to a column by position or does not bind to
    ``schema`` at all (then evaluating it raises pyarrow's own error, naming the problem)."""
    if _by_position(expression) or not _binds(expression, schema):
        return None
    unused = _unused_name(schema)
    return [
        name for i, name in enumerate(schema.names) if not _binds(expression, schema.set(i, schema.field(i).with_name(unused)))
    ]


def _by_position(expression: pc.Expression) -> bool:
    """Whether ``expression`` refers to a column by position (or cannot be inspected:
    reading every column is right either way)."""
    try:
        pickle.dumps(expression)
    except Exception:
        return True
    return False


def _binds(expression: pc.Expression, schema: pa.Schema) -> bool:
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(schema.empty_table()))
    plan = acero.Declaration.from_sequence([source, acero.Declaration("project", acero.ProjectNodeOptions([expression]))])
    try:
        plan.to_table(use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
        return False
    return True


def _unused_name(schema: pa.Schema) -> str:
    name = "__mvtable_absent__"
    while name in schema.names:
        name += "_"
    return name
