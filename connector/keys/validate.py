"""Which columns can be a primary key, and whether incoming data fits the table's key.

Every check runs before anything is written, and each failure is its own typed error
naming the column and what to do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import (
    DuplicateKeyError,
    InvalidOptionError,
    KeyColumnMissingError,
    KeyTypeMismatchError,
    NonKeyColumnError,
    NullKeyError,
    SchemaMismatchError,
    UnsupportedKeyTypeError,
)

from ..stats import statable

__all__ = [
    "KEY_TYPES",
    "check_key_columns",
    "check_unique",
    "describe_keys",
    "find_column",
    "key_table",
    "parse_primary_key",
    "same_key",
]

KEY_TYPES = "integers, strings, dates, timestamps and decimals"
MAX_NAMED = 10


def key_type_ok(t: pa.DataType) -> bool:
    """Types whose equality is exact and whose row groups carry min/max statistics (the lookup prunes by them).

    Floats (NaN, -0.0), booleans, binary and nested types cannot be keys."""
    return statable(t) and not pa.types.is_floating(t) and not pa.types.is_boolean(t)


def parse_primary_key(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"a, b"`` or ``["a", "b"]`` → ``("a", "b")``; ``None`` → no key.

    Raises:
        InvalidOptionError: The value is not one or more column names, or names a column twice."""
    if value is None:
        return ()
    names = [n.strip() for n in value.split(",")] if isinstance(value, str) else list(value)
    if not names or any(not isinstance(n, str) or not n for n in names):
        raise InvalidOptionError(f"a primary key is one or more column names, got {value!r}")
    if len({n.lower() for n in names}) != len(names):  # column names are case-insensitive
        raise InvalidOptionError(f"primary key {names} names a column twice")
    return tuple(names)


def key_data(keys: object, key: Sequence[str]) -> pa.Table:
    """The keys of a delete by key as a table.

    A ``pyarrow`` table or batch, a dict of column → values, or (one-column keys) a list of values.

    A delete matches on the key only, so a column that is not part of it is refused
    (``NonKeyColumnError``) rather than ignored: ``{"id": [2], "s": ["x"]}`` must not
    delete id 2 whatever its ``s``. Missing key columns are found later, by ``key_table``.

    Raises:
        NonKeyColumnError: ``keys`` holds columns outside the primary key.
        InvalidOptionError: ``keys`` has a shape a delete by key cannot take."""
    if isinstance(keys, pa.RecordBatch):
        data = pa.Table.from_batches([keys])
    elif isinstance(keys, pa.Table):
        data = keys
    elif isinstance(keys, Mapping):
        data = _dict_table(keys)
    elif isinstance(keys, (list, tuple, pa.Array, pa.ChunkedArray, np.ndarray)):
        if len(key) != 1:
            raise InvalidOptionError(f"the primary key has columns {list(key)}: give keys as a table or a dict of them")
        data = _dict_table({key[0]: keys})
    else:
        raise InvalidOptionError(
            f"keys must be a pyarrow Table, a dict of key columns or a list of values, not {type(keys).__name__}"
        )
    key_names = {k.lower() for k in key}
    others = [n for n in data.column_names if n.lower() not in key_names]
    if others and key_names <= {n.lower() for n in data.column_names}:
        raise NonKeyColumnError(
            f"keys hold column(s) {others}, which are not part of the primary key {list(key)}; a delete by key "
            "matches on the key columns only, so give only those"
        )
    return data


def _dict_table(columns: Mapping[object, object]) -> pa.Table:
    """``columns`` (column name → values) as a table, with typed errors for what ``pa.table`` would refuse.

    ``pa.table`` would raise a raw error for columns of different lengths and values that are no
    Arrow array."""
    lengths: dict[str, int] = {}
    for name, values in columns.items():
        if not isinstance(name, str):
            raise InvalidOptionError(f"keys: column names are strings, not {name!r}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sized):
            raise InvalidOptionError(f"keys: column {name!r} must be a list or array of values, not {type(values).__name__}")
        lengths[name] = len(values)
    if len(set(lengths.values())) > 1:
        raise InvalidOptionError(
            f"keys: the columns have different lengths ({', '.join(f'{n!r}: {k}' for n, k in lengths.items())}); "
            "give one value per key in every column"
        )
    try:
        return pa.table(dict(columns))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidOptionError(f"keys: the values do not make an Arrow table ({exc})") from None


def check_key_columns(schema: pa.Schema, key: Sequence[str]) -> tuple[str, ...]:
    """The key of a new table, spelled as ``schema`` spells its columns, after checking it.

    Names match case-insensitively, as everywhere; the table stores the schema's spelling, which its
    segments and key indexes use. Its columns must exist and have a type a key can have.

    Raises:
        KeyColumnMissingError: A key column is not in ``schema``.
        UnsupportedKeyTypeError: A key column's type cannot be part of a key."""
    resolved = []
    for name in key:
        column = find_column(schema.names, name)
        if column is None:
            raise KeyColumnMissingError(f"primary key column {name!r} is not in the schema (columns: {schema.names})")
        t = schema.field(column).type
        if not key_type_ok(t):
            raise UnsupportedKeyTypeError(f"column {name!r} of type {t} cannot be part of a primary key; keys are {KEY_TYPES}")
        resolved.append(column)
    return tuple(resolved)


def same_key(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two spellings of a primary key name the same columns, in the same order."""
    return [n.lower() for n in a] == [n.lower() for n in b]


def find_column(names: Sequence[str], name: str) -> str | None:
    """The one of ``names`` that is ``name`` case-insensitively (as Spark resolves columns), or ``None``.

    ``SchemaMismatchError`` when several are: which one is the key would be a guess.

    Raises:
        SchemaMismatchError: Columns differ only in case, so the key column is ambiguous."""
    found = [n for n in names if n.lower() == name.lower()]
    if len(found) > 1:
        raise SchemaMismatchError(
            f"columns {found} differ only in case, so key column {name!r} is ambiguous; rename or drop all but one"
        )
    return found[0] if found else None


def check_key_schema(table: pa.Schema, key: Sequence[str], incoming: pa.Schema) -> None:
    """Before a keyed write: the data has every key column, with the table's type.

    (The rest of the schema is checked by the write itself.)

    Raises:
        KeyColumnMissingError: The data lacks a key column.
        KeyTypeMismatchError: A key column's type differs from the table's."""
    for name in key:
        column = find_column(incoming.names, name)
        if column is None:
            raise KeyColumnMissingError(f"the data has no column {name!r}, which is part of the primary key {list(key)}")
        have, want = incoming.field(column).type, table.field(name).type
        if have != want:
            raise KeyTypeMismatchError(f"key column {name!r} is {have} in the data but {want} in the table; cast it to {want}")


def key_table(data: pa.Table, schema: pa.Schema, key: Sequence[str]) -> pa.Table:
    """The key columns of ``data`` cast to the table's key types, after checking them.

    They must be there (named in any case, as every column), castable without loss, and never null.
    The result's columns are named as the table names them.

    Raises:
        KeyColumnMissingError: A key column is missing.
        NullKeyError: A key column holds nulls.
        KeyTypeMismatchError: A key column cannot be cast to the table's key type without loss."""
    columns = []
    for name in key:
        column = find_column(data.column_names, name)
        if column is None:
            raise KeyColumnMissingError(f"the data has no column {name!r}, which is part of the primary key {list(key)}")
        target = schema.field(name).type
        col = data.column(column)
        if col.type != target:
            # a null-typed column (keys=[] or [None]) casts to any type: empty, or NullKeyError below
            if not (pa.types.is_null(col.type) or _same_kind(col.type, target)):
                raise KeyTypeMismatchError(f"key column {name!r} is {col.type} in the data but {target} in the table")
            try:
                col = pc.cast(col, target, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise KeyTypeMismatchError(f"key column {name!r} ({col.type}) does not fit the table's {target}: {exc}") from None
        if col.null_count:
            first = pc.index(pc.is_null(col), True).as_py()
            raise NullKeyError(
                f"key column {name!r} is null in {col.null_count} row(s) (first at row {first}); keys may not be null"
            )
        columns.append(col)
    return pa.table(columns, names=list(key))


def _same_kind(a: pa.DataType, b: pa.DataType) -> bool:
    kinds = (
        pa.types.is_integer,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
        pa.types.is_date32,
        pa.types.is_timestamp,
        pa.types.is_decimal,
    )
    return any(k(a) and k(b) for k in kinds)


def check_unique(keys: pa.Table, hashes: np.ndarray) -> None:
    """``DuplicateKeyError`` when a key repeats inside ``keys`` (hashes narrow it down, the values decide).

    Raises:
        DuplicateKeyError: A key appears more than once in the data."""
    sorted_h = np.sort(hashes)  # no order needed unless two hashes repeat (a plain sort is several times faster)
    if not (sorted_h[1:] == sorted_h[:-1]).any():
        return
    order = np.argsort(hashes, kind="stable")
    sorted_h = hashes[order]
    same = sorted_h[1:] == sorted_h[:-1]
    suspects = np.unique(np.concatenate([order[1:][same], order[:-1][same]]))
    sub = keys.take(pa.array(suspects))
    counts = sub.group_by(list(keys.column_names)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        raise DuplicateKeyError(
            f"{dup.num_rows} key(s) appear more than once in the data: {describe_keys(dup.select(keys.column_names))}",
            keys=key_tuples(dup.select(keys.column_names)),
        )


def key_tuples(keys: pa.Table, limit: int = MAX_NAMED) -> list[tuple]:
    head = keys.slice(0, limit).to_pylist()
    return [tuple(row.values()) for row in head]


def describe_keys(keys: pa.Table, limit: int = MAX_NAMED) -> str:
    shown = [t[0] if len(t) == 1 else t for t in key_tuples(keys, limit)]
    more = keys.num_rows - len(shown)
    return ", ".join(repr(s) for s in shown) + (f" (+{more} more)" if more > 0 else "")
