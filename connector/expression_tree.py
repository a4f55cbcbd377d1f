"""A ``pyarrow.compute.Expression`` as a tree of calls, column references and literals.

Partition pruning decides simple comparisons (``ts >= X``, ``region.isin([...])``) with a
comparison per partition instead of an Arrow simplification per partition, so it has to see
an expression's structure, which pyarrow exposes no API for. Arrow does serialize an
expression (that is how it pickles one): an IPC file of one row whose columns are the
literals and whose schema metadata lists the tree in prefix order (``call`` name, its
arguments, ``options`` column, ``end``; ``field_ref`` name; ``literal`` column). The
metadata repeats keys, which ``pa.Schema.metadata`` folds into a dict, so the pairs are
read through the Arrow C data interface, which hands them over in order as the format
specifies.

Anything that cannot be read this way (a reference by position or to a nested field, which
Arrow does not serialize; a layout this module does not know) gives ``None``: the caller then
lets Arrow decide the whole expression, which is always right.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Call", "FieldRef", "Literal", "Node", "expression_tree", "field_names"]


@dataclass(frozen=True)
class FieldRef:
    """A reference to a top-level column by name."""

    name: str


@dataclass(frozen=True)
class Literal:
    """A scalar literal, with its Arrow type."""

    value: pa.Scalar


@dataclass(frozen=True)
class Call:
    """A call of an Arrow compute function; ``options`` are its ``FunctionOptions`` as a struct scalar."""

    name: str
    args: tuple[Node, ...]
    options: pa.StructScalar | None = None


Node = Call | FieldRef | Literal


def expression_tree(expression: pc.Expression) -> Node | None:
    """The tree of ``expression``, or None when it cannot be read (then Arrow must decide it whole)."""
    try:
        reduced = expression.__reduce__()
        buffer = reduced[1][0]
        reader = pa.ipc.open_file(buffer)
        batch = reader.get_batch(0) if reader.num_record_batches else None
        pairs = _metadata_pairs(reader.schema)
        columns = batch.columns if batch is not None else []
        node, end = _parse(pairs, 0, columns)
    except Exception:  # any layout or content this reader does not expect: not ours to guess
        return None
    return node if end == len(pairs) else None


def field_names(node: Node) -> set[str]:
    """The columns ``node`` refers to."""
    if isinstance(node, FieldRef):
        return {node.name}
    if isinstance(node, Call):
        out: set[str] = set()
        for arg in node.args:
            out |= field_names(arg)
        return out
    return set()


def _parse(pairs: list[tuple[str, str]], i: int, columns: list[pa.Array]) -> tuple[Node, int]:
    key, value = pairs[i]
    if key == "field_ref":
        return FieldRef(value), i + 1
    if key == "literal":
        return Literal(columns[int(value)][0]), i + 1
    if key != "call":
        raise ValueError(f"unexpected {key!r} in a serialized expression")
    args: list[Node] = []
    options: pa.StructScalar | None = None
    i += 1
    while True:
        key, text = pairs[i]
        if key == "end":
            if text != value:
                raise ValueError(f"{value!r} ends as {text!r}")
            return Call(value, tuple(args), options), i + 1
        if key == "options":
            scalar = columns[int(text)][0]
            if not isinstance(scalar, pa.StructScalar):
                raise ValueError("options are not a struct")
            options = scalar
            i += 1
            continue
        arg, i = _parse(pairs, i, columns)
        args.append(arg)


class _ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface."""

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


_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _metadata_pairs(schema: pa.Schema) -> list[tuple[str, str]]:
    """The schema's metadata as the ordered list of pairs it holds, repeated keys included.

    The C data interface encodes it as an int32 count, then per pair an int32 length and the
    key's bytes, an int32 length and the value's bytes (native byte order)."""
    c_schema = _ArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        at = c_schema.metadata
        if not at:
            return []
        count = ctypes.c_int32.from_address(at).value
        at += 4
        pairs = []
        for _ in range(count):
            parts = []
            for _ in range(2):
                size = ctypes.c_int32.from_address(at).value
                parts.append(ctypes.string_at(at + 4, size).decode())
                at += 4 + size
            pairs.append((parts[0], parts[1]))
        return pairs
    finally:
        if c_schema.release:
            _RELEASE(c_schema.release)(ctypes.addressof(c_schema))
