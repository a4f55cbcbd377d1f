"""Applying a DV to one row group of a segment while reading.

A row group covers file positions ``[start, start + count)``. Everything here answers
questions about that window only, in time proportional to the deletes inside it (plus a
``count``-sized mask when one is needed), never to the whole DV — a 1M-row segment read
as 100 row groups must not walk the whole bitmap 100 times.

Each function accepts either the ``BitMap64`` or the DV's sorted ``uint64`` positions
array (``positions_array`` / ``load_dv_positions``). With the array a window is two binary
searches and a slice; with the bitmap it is a ``range_cardinality`` check and, when the
window holds deletes, an intersection with a range bitmap. Both are well under a
millisecond per row group; the array wins when a DV is sliced into many row groups.

Note: positions are compared as ``uint64`` throughout. Mixing a ``uint64`` array with
signed numbers makes numpy compare in float64, which is both slow and wrong past 2**53.
"""

from __future__ import annotations

import numpy as np
from pyroaring import AbstractBitMap64, BitMap64

__all__ = ["deleted_in_range", "keep_mask", "fully_deleted", "deleted_count", "Deletes"]

Deletes = AbstractBitMap64 | np.ndarray

_U64_LIMIT = 1 << 64


def deleted_count(deletes: Deletes, start: int, count: int) -> int:
    """How many rows of the window are deleted (O(log n), no allocation)."""
    _check_window(start, count)
    if count == 0:
        return 0
    if isinstance(deletes, np.ndarray):
        lo, hi = _array_bounds(deletes, start, count)
        return hi - lo
    return _range_cardinality(deletes, start, start + count)


def deleted_in_range(deletes: Deletes, start: int, count: int) -> np.ndarray:
    """Deleted positions of the window, relative to ``start``: sorted ``int64``."""
    _check_window(start, count)
    if count == 0:
        return np.empty(0, dtype=np.int64)
    if isinstance(deletes, np.ndarray):
        lo, hi = _array_bounds(deletes, start, count)
        window = deletes[lo:hi]
    else:
        if _range_cardinality(deletes, start, start + count) == 0:
            return np.empty(0, dtype=np.int64)
        window = _bitmap_window(deletes, start, count)
    offsets: np.ndarray = (window - np.uint64(start)).astype(np.int64)
    return offsets


def keep_mask(deletes: Deletes, start: int, count: int) -> np.ndarray | None:
    """Boolean mask of the rows to keep, or None when the window has no deletes.

    None is the fast path readers should test for: most row groups of most segments have
    no deletes, and skipping the filter saves a full copy of the row group's columns.
    """
    _check_window(start, count)
    if count == 0:
        return None
    if isinstance(deletes, np.ndarray):
        lo, hi = _array_bounds(deletes, start, count)
        if lo == hi:
            return None
        window = deletes[lo:hi]
    else:
        if _range_cardinality(deletes, start, start + count) == 0:
            return None
        window = _bitmap_window(deletes, start, count)
    mask = np.ones(count, dtype=bool)
    # intp offsets: numpy's fancy indexing converts any other index dtype first (slower)
    mask[(window - np.uint64(start)).astype(np.intp)] = False
    return mask


def fully_deleted(deletes: Deletes, start: int, count: int) -> bool:
    """Whether every row of the window is deleted, so the row group need not be read.

    An empty window counts as fully deleted: there is nothing in it to read.
    """
    return deleted_count(deletes, start, count) == count


def _check_window(start: int, count: int) -> None:
    if start < 0 or count < 0:
        raise ValueError(f"row window must be non-negative (start={start}, count={count})")
    if start + count > _U64_LIMIT:
        raise ValueError(f"row window [{start}, {start + count}) exceeds 64-bit positions")


def _array_bounds(positions: np.ndarray, start: int, count: int) -> tuple[int, int]:
    if positions.dtype != np.uint64:
        raise TypeError(f"a positions array must be uint64 (from positions_array), got {positions.dtype}")
    end = start + count
    if end == _U64_LIMIT:  # the window runs to the top of the range: nothing lies beyond
        lo = int(positions.searchsorted(np.uint64(start), side="left"))
        return lo, len(positions)
    lo, hi = positions.searchsorted(np.array([start, end], dtype=np.uint64), side="left")
    return int(lo), int(hi)


# pyroaring takes range ends as C uint64, so an end of exactly 2**64 is split off.
_TOP = _U64_LIMIT - 1


def _range_cardinality(bm: AbstractBitMap64, start: int, end: int) -> int:
    if end == _U64_LIMIT:
        return bm.range_cardinality(start, _TOP) + (1 if _TOP in bm else 0)
    return bm.range_cardinality(start, end)


def _bitmap_window(bm: AbstractBitMap64, start: int, count: int) -> np.ndarray:
    window = BitMap64()
    end = start + count
    if end == _U64_LIMIT:
        window.add_range(start, _TOP)
        window.add(_TOP)
    else:
        window.add_range(start, end)
    window &= bm
    return np.frombuffer(window.to_array(), dtype=np.uint64)
