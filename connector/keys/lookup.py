"""Finding the rows that hold given keys without scanning the table.

For each visible segment: the key columns' min/max over its row groups (from the segment
descriptor) drop keys that cannot be there, the segment's Bloom filter drops most of the
rest, and only then are the key columns of the row groups whose range covers a remaining
key read — with the segment's deletion vector applied, so deleted rows never match. The
survivors are joined on the real key values, so the answer is exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.lineage.snapshot import SegmentState, Snapshot
from mvtable.storage import FileIO

from ..parallel import default_workers, ordered_map
from ..segments import DEFAULT_READ_ROWS, open_parquet, positions_at, read_row_groups, read_runs
from ..stats import decode
from .index import read_index

__all__ = ["KeyMatches", "find_keys"]

_IDX = "__mv_key_idx"
_POS = "__mv_key_pos"


@dataclass
class KeyMatches:
    """Where the looked-up keys live: ``positions`` maps segment id → sorted file positions
    of live rows holding one of the keys; ``matched[i]`` says whether key ``i`` was found.
    ``row_groups_read`` counts the row groups whose key columns were decoded."""

    positions: dict[str, np.ndarray] = field(default_factory=dict)
    matched: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    row_groups_read: int = 0

    @property
    def rows(self) -> int:
        return int(sum(len(p) for p in self.positions.values()))


def find_keys(
    io: FileIO,
    snapshot: Snapshot,
    keys: pa.Table,
    hashes: np.ndarray,
    *,
    segment_ids: Sequence[str] | None = None,
    masks_for: Any,
) -> KeyMatches:
    """The live rows of ``snapshot`` (or of its ``segment_ids`` only) whose key is one of
    ``keys`` (key columns cast to the table's types; ``hashes`` from ``hash_keys``).
    ``masks_for(segment_id)`` gives the segment's deletion mask source (or ``None``)."""
    out = KeyMatches(matched=np.zeros(keys.num_rows, dtype=bool))
    if keys.num_rows == 0:
        return out
    ids = snapshot.visible_segment_ids() if segment_ids is None else list(segment_ids)
    segments = [snapshot.segments[sid] for sid in ids if snapshot.segments[sid].file.num_rows]
    workers = min(default_workers(), max(1, len(segments)))

    def one(seg: SegmentState) -> tuple[str, np.ndarray, np.ndarray, int]:
        return (seg.id, *_find_in_segment(io, seg, keys, hashes, masks_for))

    for sid, positions, idx, read in ordered_map(one, segments, workers=workers):
        out.row_groups_read += read
        if len(positions):
            out.positions[sid] = positions
            out.matched[idx] = True
    return out


def _find_in_segment(
    io: FileIO, seg: SegmentState, keys: pa.Table, hashes: np.ndarray, masks_for: Any
) -> tuple[np.ndarray, np.ndarray, int]:
    """(sorted positions of matching live rows, indices of the keys matched, row groups read)."""
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0)
    row_groups = seg.file.row_groups
    candidates = np.flatnonzero(_in_range(keys, row_groups))
    if not len(candidates):
        return empty
    bloom = read_index(io, seg.file.path)
    if bloom is not None:
        candidates = candidates[bloom.may_contain(hashes[candidates])]
        if not len(candidates):
            return empty
    wanted = keys.take(pa.array(candidates))
    to_read = [i for i, rg in enumerate(row_groups) if _in_range(wanted, [rg]).any()]
    wanted = wanted.append_column(_IDX, pa.array(candidates))
    if not to_read:
        return empty
    columns = list(keys.column_names)
    pf = open_parquet(io, seg.file.path, row_groups=to_read, columns=columns)
    found_pos: list[np.ndarray] = []
    found_idx: list[np.ndarray] = []
    for run, keep in read_runs(seg.file, to_read, masks_for(seg.id), read_rows=DEFAULT_READ_ROWS):
        table = read_row_groups(pf, seg.file, run, columns, keep=None)
        offsets = np.arange(table.num_rows, dtype=np.int64) if keep is None else np.flatnonzero(keep).astype(np.int64)
        if keep is not None:
            table = table.filter(pa.array(keep, type=pa.bool_()))
        rows = table.append_column(_POS, pa.array(positions_at(seg.file, run, offsets)))
        joined = rows.join(wanted, columns, join_type="inner")  # Arrow's hash join: faster than hashing here
        if joined.num_rows:
            found_pos.append(joined.column(_POS).to_numpy())
            found_idx.append(joined.column(_IDX).to_numpy())
    if not found_pos:
        return (empty[0], empty[1], len(to_read))
    return np.sort(np.concatenate(found_pos)), np.concatenate(found_idx), len(to_read)


def _in_range(keys: pa.Table, row_groups: Sequence[Any]) -> np.ndarray:
    """Per key: whether some row group's min/max range covers it in every key column (a
    row group without statistics for a column covers everything in it)."""
    if not row_groups:
        return np.zeros(keys.num_rows, dtype=bool)
    covered = np.zeros(keys.num_rows, dtype=bool)
    for rg in row_groups:
        inside = np.ones(keys.num_rows, dtype=bool)
        for name in keys.column_names:
            stats = rg.stats.get(name)
            if stats is None or stats.min is None or stats.max is None:
                continue
            col = keys.column(name)
            t = col.type
            lo = pa.scalar(decode(stats.min, t), type=t)
            hi = pa.scalar(decode(stats.max, t), type=t)
            inside &= pc.and_(pc.greater_equal(col, lo), pc.less_equal(col, hi)).to_numpy(zero_copy_only=False)
        covered |= inside
        if covered.all():
            break
    return covered
