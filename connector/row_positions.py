"""The row positions of ``Table.delete_rows``, checked before anything is committed.

A position is a row's index in its segment file, so only integers are positions: a float
such as ``0.5`` used to be truncated to row 0 and delete a row nobody addressed. Positions
come as Python ints, NumPy integer arrays or pyarrow integer arrays; they become ``uint64``
(what a deletion vector holds) only after negative ones are refused, so a ``uint64`` of
``2**63`` is a row past the end (``commit_deletes`` says so), not a negative one."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from mvtable.errors import InvalidOptionError, InvalidRowAddressError

__all__ = ["row_positions"]

_SHAPE = "{segment id: [row positions]}, e.g. {'3f2a…': [0, 5]}"


def row_positions(positions: object) -> dict[str, np.ndarray]:
    """``{segment id: positions}`` as ``uint64`` arrays.

    Raises:
        InvalidOptionError: ``positions`` has a wrong shape or a position that is no integer.
        InvalidRowAddressError: A position is negative."""
    if not isinstance(positions, Mapping):
        raise InvalidOptionError(f"delete_rows takes a mapping {_SHAPE}, not a {type(positions).__name__}")
    out: dict[str, np.ndarray] = {}
    for sid, values in positions.items():
        if not isinstance(sid, str):
            raise InvalidOptionError(f"delete_rows: segment ids are strings, not {sid!r}; pass {_SHAPE}")
        out[sid] = _positions(sid, values)
    return out


def _positions(sid: str, values: object) -> np.ndarray:
    items: list[Any] | None = None  # the values as given, when they are a Python collection
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_integer(values.type) or (pa.types.is_null(values.type) and len(values) == 0)):
            raise InvalidOptionError(f"delete_rows: the positions of segment {sid!r} must be integers, not {values.type}")
        if values.null_count:
            raise InvalidOptionError(f"delete_rows: the positions of segment {sid!r} hold {values.null_count} null(s)")
        array = np.asarray(values.to_numpy(zero_copy_only=False)) if len(values) else np.empty(0, np.int64)
    elif isinstance(values, np.ndarray):
        array = values if values.size else np.empty(0, np.int64)
    elif isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Collection):
        raise InvalidOptionError(
            f"delete_rows: the positions of segment {sid!r} must be a list or array of integers, not {type(values).__name__}"
        )
    else:
        items = list(values)
        array = np.asarray(items) if items else np.empty(0, np.int64)
        if array.ndim == 1 and array.dtype.kind in "fO" and all(_is_int(v) for v in items):
            array = _big_ints(sid, items)  # NumPy found no one integer type for them all (it made floats or objects)
    if array.ndim != 1:
        raise InvalidOptionError(f"delete_rows: the positions of segment {sid!r} must be flat, not {array.ndim}-dimensional")
    if array.dtype.kind not in "iu":
        shown = items if items is not None else array.tolist()
        bad = next((v for v in shown if not _is_int(v)), shown[0])
        raise InvalidOptionError(f"delete_rows: the positions of segment {sid!r} must be integers, not {bad!r} ({array.dtype})")
    if array.dtype.kind == "i" and len(array) and array.min() < 0:
        raise InvalidRowAddressError(f"delete_rows: negative row position {array.min()} for segment {sid!r}")
    return array.astype(np.uint64)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _big_ints(sid: str, values: list[Any]) -> np.ndarray:
    """Python ints that NumPy holds in no one integer type (some below 0, some at or above ``2**63``; or beyond ``2**64``).

    Refused if negative or beyond any ``uint64``, else as ``uint64`` (and then past the segment's
    end, which ``commit_deletes`` reports)."""
    ints = [int(v) for v in values]
    low, high = min(ints), max(ints)
    if low < 0:
        raise InvalidRowAddressError(f"delete_rows: negative row position {low} for segment {sid!r}")
    if high >= 2**64:
        raise InvalidRowAddressError(f"delete_rows: row position {high} of segment {sid!r} is past the end of any segment")
    return np.array(ints, dtype=np.uint64)
