"""A pyarrow filter expression as a conjunction of ``Predicate``s, when it is one.

A scoped push decides from metadata alone (partition values, row-group statistics) whether
a segment holds no row of its ``replace_where`` predicate, only such rows, or some. That
needs the predicate's structure, which pyarrow does not expose: an ``Expression`` only
prints itself and pickles itself. The pickle is Arrow's own serialization of the
expression (``Expression._deserialize``): an Arrow IPC file whose schema metadata lists
the expression tree in prefix order (``call``, ``field_ref``, ``literal``, ``options``,
``end``) and whose columns hold the literals and function options. Python's view of schema
metadata is a dict, which drops repeated keys, so the list is read through the Arrow C data
interface, which keeps every pair in order.

Only what statistics can decide is recognised: ``and`` of ``column op literal`` (``==``,
``!=``, ``<``, ``<=``, ``>``, ``>=``, either side), ``column.isin([...])`` without nulls,
``column.is_null()``, ``column.is_valid()`` and ``~column.is_null()``, over top-level
columns. Anything else answers None and the caller falls back to reading the rows; this
module decides how much is *read*, never which rows match (the exact expression does that).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..stats import Predicate

__all__ = ["conjuncts"]

_OPS = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_AND = ("and", "and_kleene")

Node = tuple[Any, ...]  # ("call", name, args, options) | ("field", name) | ("literal", scalar) | ("other",)


def conjuncts(expression: pc.Expression, schema: pa.Schema) -> tuple[Predicate, ...] | None:
    """The ``Predicate``s whose conjunction is ``expression``, or None when it is not such a conjunction."""
    try:
        tree = _tree(expression)
    except Exception:  # a form this reader does not know: read the rows instead
        return None
    out: list[Predicate] = []
    if not _collect(tree, schema, out):
        return None
    return tuple(out)


def _collect(node: Node, schema: pa.Schema, out: list[Predicate]) -> bool:
    if node[0] != "call":
        return False
    _, name, args, options = node
    if name in _AND:
        return all(_collect(a, schema, out) for a in args)
    p = _predicate(name, args, options, schema)
    if p is None:
        return False
    out.append(p)
    return True


def _predicate(name: str, args: list[Node], options: Any, schema: pa.Schema) -> Predicate | None:
    if name in _OPS and len(args) == 2:
        (a, b), op = args, _OPS[name]
        if a[0] == "literal" and b[0] == "field":
            (a, b), op = (b, a), _FLIPPED[op]
        if a[0] == "field" and b[0] == "literal" and a[1] in schema.names:
            value = _python(b[1])
            return Predicate(a[1], op, value) if value is not None else None
        return None
    if name == "is_in" and len(args) == 1 and args[0][0] == "field" and args[0][1] in schema.names and options is not None:
        values = options.get("value_set")
        if values is None or any(v is None for v in values):
            return None
        return Predicate(args[0][1], "in", tuple(values))
    if name == "is_null" and len(args) == 1 and args[0][0] == "field" and args[0][1] in schema.names:
        if options is not None and options.get("nan_is_null"):
            return None
        return Predicate(args[0][1], "is_null")
    if name == "is_valid" and len(args) == 1 and args[0][0] == "field" and args[0][1] in schema.names:
        return Predicate(args[0][1], "not_null")
    if name == "invert" and len(args) == 1 and args[0][0] == "call" and args[0][1] == "is_null":
        inner = _predicate("is_null", args[0][2], args[0][3], schema)
        return Predicate(inner.column, "not_null") if inner is not None else None
    return None


def _python(scalar: pa.Scalar) -> Any:
    """A literal as the Python value statistics decode to (None: one they cannot be compared with)."""
    t = scalar.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return None  # as_py() would give a pandas Timestamp or lose nanoseconds
    if not (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    ):
        return None
    return scalar.as_py()


def _tree(expression: pc.Expression) -> Node:
    """The expression tree from Arrow's serialization of ``expression`` (see the module docstring)."""
    _, (buffer,) = expression.__reduce__()
    reader = pa.ipc.open_file(buffer)
    columns = reader.read_all()
    tokens = _metadata_pairs(reader.schema)
    node, end = _node(tokens, 0, columns)
    if end != len(tokens):
        raise ValueError("trailing tokens")
    return node


def _node(tokens: list[tuple[str, str]], i: int, columns: pa.Table) -> tuple[Node, int]:
    kind, value = tokens[i]
    if kind == "literal":
        return ("literal", columns.column(int(value))[0]), i + 1
    if kind == "field_ref":
        return ("field", value), i + 1
    if kind == "nested_field_ref":
        return ("other",), i + 1 + int(value)
    if kind != "call":
        raise ValueError(f"unexpected token {kind}")
    args: list[Node] = []
    options: Any = None
    i += 1
    while tokens[i][0] != "end":
        if tokens[i][0] == "options":
            options = columns.column(int(tokens[i][1]))[0].as_py()
            i += 1
            continue
        arg, i = _node(tokens, i, columns)
        args.append(arg)
    if tokens[i][1] != value:
        raise ValueError(f"call {value} ends as {tokens[i][1]}")
    return ("call", value, args, options), i + 1


class _ArrowSchema(ctypes.Structure):
    """The Arrow C data interface's ``struct ArrowSchema``."""

    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """Every key/value pair of ``schema``'s metadata, in order, repeats kept.

    The C interface encodes them as an int32 count, then per pair an int32 length and the
    key's bytes, an int32 length and the value's bytes (native byte order). The capsule owns
    the exported struct and releases it when collected."""
    capsule = schema.__arrow_c_schema__()
    c_schema = _ArrowSchema.from_address(_get_pointer(capsule, b"arrow_schema"))
    address = c_schema.metadata
    if not address:
        return []

    def read_int(at: int) -> int:
        return int(struct.unpack("=i", ctypes.string_at(at, 4))[0])

    count, at = read_int(address), address + 4
    pairs = []
    for _ in range(count):
        n = read_int(at)
        key = ctypes.string_at(at + 4, n).decode()
        at += 4 + n
        n = read_int(at)
        value = ctypes.string_at(at + 4, n).decode()
        at += 4 + n
        pairs.append((key, value))
    del capsule
    return pairs
