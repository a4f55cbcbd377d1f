"""The per-segment key index file: its filter's size and probe count, as written and read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mvtable.connector.key_index import SEGMENT_BITS_PER_KEY, SEGMENT_HASHES, build_index, forget_filters, read_index
from mvtable.lineage.key_filters import KeyBloom
from mvtable.storage import open_file_io


def test_a_segment_filter_takes_16_probes_and_stays_near_3e_7_false_positives(tmp_path: Path) -> None:
    """32 bits and 16 probes per key (22 would minimise false positives at 2.1e-7; 16 give
    3.3e-7 for a quarter fewer random writes per key written and reads per key probed).
    The probe count is stored in the file, so a reader probes as the writer built."""
    io = open_file_io(str(tmp_path))
    rng = np.random.default_rng(11)
    present = rng.integers(0, 2**63, 200_000, dtype=np.uint64)
    build_index(io, "data/seg.parquet", present)
    forget_filters()
    bloom = read_index(io, "data/seg.parquet")
    assert bloom is not None
    assert (bloom.num_hashes, bloom.num_bits) == (SEGMENT_HASHES, 200_000 * SEGMENT_BITS_PER_KEY) == (16, 6_400_000)
    assert bloom.may_contain(present).all()
    absent = rng.integers(0, 2**63, 4_000_000, dtype=np.uint64)
    assert bloom.may_contain(absent).sum() <= 10  # expected ~1.3


def test_a_probe_count_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="num_hashes"):
        KeyBloom.build(np.arange(10, dtype=np.uint64), num_hashes=0)
