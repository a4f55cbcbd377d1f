"""A stable 64-bit hash of each key row, vectorised.

Bloom filters written by one process are probed by another (a Spark executor, a later
writer, another mvtable version), so the hash must not depend on a process seed or a
library's internals: integers go through splitmix64's finaliser, strings through FNV-1a over
their UTF-8 bytes (read straight from the Arrow buffers, one numpy pass per byte position),
and the columns of a composite key are folded together. Equal keys (after casting to the
table's key types) hash equal; collisions only cost a look at the real keys."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["hash_keys"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def hash_keys(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """One ``uint64`` per row of ``table`` from its key ``columns`` (no nulls; the caller checked)."""
    out: np.ndarray | None = None
    for name in columns:
        h = hash_column(table.column(name))
        out = h if out is None else _mix(out ^ (h + _GOLDEN + (out << np.uint64(6)) + (out >> np.uint64(2))))
    return out if out is not None else np.zeros(table.num_rows, dtype=np.uint64)


def hash_column(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The hash of each value of one key column."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _hash_strings(arr)
    if pa.types.is_decimal(t):
        return _hash_strings(pc.cast(arr, pa.string()))
    if pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    elif pa.types.is_timestamp(t):
        arr = arr.cast(pa.int64())
    if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
        values = arr.to_numpy(zero_copy_only=False).astype(np.uint64)
    else:
        values = arr.to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
    return _mix(values + _GOLDEN)  # splitmix64: step by the golden gamma, then finalise


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit reaches every output bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _hash_strings(arr: pa.Array) -> np.ndarray:
    """FNV-1a of each string's bytes, then the finaliser.

    Strings are visited longest first so that byte position ``j`` is one numpy step over the strings
    that have it."""
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=arr.offset * 8)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    order = np.argsort(-lengths, kind="stable")
    sorted_len = lengths[order]
    sorted_start = starts[order]
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    active = n
    for j in range(int(sorted_len[0])):
        while active and sorted_len[active - 1] <= j:
            active -= 1
        h[:active] ^= data[sorted_start[:active] + j].astype(np.uint64)
        h[:active] *= _FNV_PRIME
    h ^= sorted_len.astype(np.uint64)
    out = np.empty(n, dtype=np.uint64)
    out[order] = h
    return _mix(out)
