"""Row-group windows over a DV: both the bitmap and the positions-array inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64, FrozenBitMap64

from mvtable.visibility import deleted_count, deleted_in_range, fully_deleted, keep_mask, positions_array

TOP = 2**64 - 1


def both(positions: list[int]) -> list:
    bm = BitMap64(positions)
    return [bm, positions_array(bm), FrozenBitMap64(positions)]


def reference(positions: list[int], start: int, count: int) -> list[int]:
    return sorted(p - start for p in set(positions) if start <= p < start + count)


@pytest.mark.parametrize("kind", [0, 1, 2], ids=["bitmap", "array", "frozen"])
class TestWindows:
    def test_range_edges(self, kind: int) -> None:
        deletes = both([9, 10, 19, 20])[kind]
        # window [10, 20): 10 and 19 are in, 9 and 20 are out
        assert deleted_in_range(deletes, 10, 10).tolist() == [0, 9]
        assert keep_mask(deletes, 10, 10).tolist() == [False] + [True] * 8 + [False]
        assert deleted_count(deletes, 10, 10) == 2
        assert not fully_deleted(deletes, 10, 10)
        assert deleted_in_range(deletes, 11, 8).tolist() == []
        assert keep_mask(deletes, 11, 8) is None
        assert deleted_in_range(deletes, 0, 9).tolist() == []
        assert keep_mask(deletes, 21, 1000) is None

    def test_empty_dv(self, kind: int) -> None:
        deletes = both([])[kind]
        assert keep_mask(deletes, 0, 1000) is None
        assert deleted_in_range(deletes, 0, 1000).dtype == np.int64
        assert deleted_in_range(deletes, 0, 1000).size == 0
        assert not fully_deleted(deletes, 0, 1000)

    def test_empty_window(self, kind: int) -> None:
        deletes = both([0, 1, 2])[kind]
        assert keep_mask(deletes, 1, 0) is None
        assert deleted_in_range(deletes, 1, 0).size == 0
        assert fully_deleted(deletes, 1, 0)  # nothing left to read

    def test_all_deleted(self, kind: int) -> None:
        deletes = both(list(range(100, 200)))[kind]
        assert fully_deleted(deletes, 100, 100)
        assert fully_deleted(deletes, 150, 10)
        assert not fully_deleted(deletes, 99, 100)
        assert not fully_deleted(deletes, 100, 101)
        mask = keep_mask(deletes, 100, 100)
        assert mask is not None and not mask.any()
        assert deleted_in_range(deletes, 100, 100).tolist() == list(range(100))

    def test_positions_beyond_32_bits(self, kind: int) -> None:
        base = 2**32 - 2
        deletes = both([base, base + 1, base + 2, base + 5, 2**40, 2**53 + 1, TOP - 1, TOP])[kind]
        assert deleted_in_range(deletes, base, 6).tolist() == [0, 1, 2, 5]
        assert keep_mask(deletes, base + 1, 3).tolist() == [False, False, True]
        assert deleted_in_range(deletes, 2**53, 2).tolist() == [1]  # exact past float precision
        assert deleted_in_range(deletes, 2**53 + 2, 10).tolist() == []
        # a window that ends exactly at 2**64
        assert deleted_in_range(deletes, TOP - 3, 4).tolist() == [2, 3]
        assert keep_mask(deletes, TOP, 1).tolist() == [False]
        assert fully_deleted(deletes, TOP - 1, 2)

    def test_invalid_windows(self, kind: int) -> None:
        deletes = both([1])[kind]
        with pytest.raises(ValueError):
            keep_mask(deletes, -1, 5)
        with pytest.raises(ValueError):
            deleted_in_range(deletes, 0, -1)
        with pytest.raises(ValueError):
            fully_deleted(deletes, TOP, 2)

    def test_mask_is_a_fresh_writable_bool_array(self, kind: int) -> None:
        deletes = both([3])[kind]
        mask = keep_mask(deletes, 0, 5)
        assert mask.dtype == np.bool_ and mask.flags.writeable
        mask[:] = False
        assert keep_mask(deletes, 0, 5).tolist() == [True, True, True, False, True]


def test_positions_array_must_be_uint64() -> None:
    with pytest.raises(TypeError):
        keep_mask(np.array([1, 2], dtype=np.int64), 0, 5)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3000), max_size=400),
    st.integers(0, 3100),
    st.integers(0, 500),
    st.sampled_from([0, 2**32 - 1000, 2**63]),
)
def test_matches_reference(positions: list[int], start: int, count: int, shift: int) -> None:
    positions = [p + shift for p in positions]
    start += shift
    expected = reference(positions, start, count)
    for deletes in both(positions):
        assert deleted_in_range(deletes, start, count).tolist() == expected
        assert deleted_count(deletes, start, count) == len(expected)
        mask = keep_mask(deletes, start, count)
        if expected:
            assert np.flatnonzero(~mask).tolist() == expected
        else:
            assert mask is None
        assert fully_deleted(deletes, start, count) == (len(expected) == count)


def test_row_groups_of_a_large_segment_cover_every_delete() -> None:
    rng = np.random.default_rng(7)
    rows = 1_000_000
    positions = np.sort(rng.choice(rows, rows // 10, replace=False)).astype(np.uint64)
    bm = BitMap64(positions.tolist())
    arr = positions_array(bm)
    for deletes in (bm, arr):
        kept = 0
        for start in range(0, rows, 65_536):
            count = min(65_536, rows - start)
            mask = keep_mask(deletes, start, count)
            kept += count if mask is None else int(mask.sum())
        assert kept == rows - positions.size
