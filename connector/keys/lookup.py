"""Finding the rows that hold given keys without scanning the table.

For each visible segment: the key columns' min/max over the segment (from its row groups'
statistics in the segment descriptor) drop keys that cannot be there, the segment's Bloom
filter drops most of the rest, and only then are the key columns of the row groups whose
range covers a remaining key read — with the segment's deletion vector applied, so deleted
rows never match. The survivors are joined on the real key values, so the answer is exact."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.lineage.key_filters import KeyBloom
from mvtable.lineage.snapshot import SegmentState, Snapshot
from mvtable.storage import FileIO

from ..key_index import index_cached, read_index
from ..parallel import default_workers, ordered_map
from ..schema import schema_from_json
from ..segments import DEFAULT_READ_ROWS, open_parquet, positions_at, read_row_groups, read_runs
from ..stats import decode

__all__ = ["KeyMatches", "find_keys"]

_IDX = "__mv_key_idx"
_POS = "__mv_key_pos"


@dataclass
class KeyMatches:
    """Where the looked-up keys live.

    ``positions`` maps segment id → sorted file positions of live rows holding one of the keys;
    ``matched[i]`` says whether key ``i`` was found. ``row_groups_read`` counts the row groups whose
    key columns were decoded."""

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
    """The live rows of ``snapshot`` (or of its ``segment_ids`` only) whose key is one of ``keys``.

    Key columns are cast to the table's types; ``hashes`` come from ``hash_keys``.
    ``masks_for(segment_id)`` gives the segment's deletion mask source (or ``None``).

    In two passes: the in-memory one (segment ranges, then key filters) over every segment
    on this thread — a thread per segment costs more than its work — then, in parallel,
    the reads of the few row groups a key may be in. Filters not in memory yet are read
    and probed in parallel."""
    out = KeyMatches(matched=np.zeros(keys.num_rows, dtype=bool))
    if keys.num_rows == 0:
        return out
    ids = snapshot.visible_segment_ids() if segment_ids is None else list(segment_ids)
    segments = [snapshot.segments[sid] for sid in ids if snapshot.segments[sid].file.num_rows]
    columns = _Columns(keys)
    in_range: list[tuple[SegmentState, list[Bounds], np.ndarray]] = []
    for seg in segments:
        bounds = _bounds(seg.file.row_groups, keys.schema)
        if bounds:
            candidates = np.flatnonzero(columns.inside(_span(bounds)))
            if len(candidates):
                in_range.append((seg, bounds, candidates))

    def probed(item: tuple[SegmentState, list[Bounds], np.ndarray]) -> tuple[SegmentState, list[Bounds], np.ndarray]:
        seg, bounds, candidates = item
        bloom = read_index(io, seg.file.path)
        return seg, bounds, candidates if bloom is None else _probe(bloom, hashes, candidates, row_groups=len(bounds))

    # Filters not in memory are read and probed on the pool (the read and its checksum
    # release the GIL, so one segment's probe overlaps the next one's read); filters all in
    # memory are probed on this thread
    cold = any(not index_cached(io, seg.file.path) for seg, _, _ in in_range)
    # (segment, row groups to read, the keys their ranges cover with their indices): a
    # segment's row groups are split so that both cores read even when one segment has them all
    work: list[tuple[SegmentState, list[int], pa.Table]] = []
    for seg, bounds, candidates in ordered_map(probed, in_range, workers=_workers(len(in_range)) if cold else 1):
        if not len(candidates):
            continue
        wanted = keys.take(pa.array(candidates)).append_column(_IDX, pa.array(candidates))
        few = _Columns(wanted.drop_columns([_IDX]))
        rgs = [i for i, b in enumerate(bounds) if few.inside(b).any()]
        if rgs:
            work.append((seg, rgs, wanted))
    work = _split(work)

    schema = schema_from_json(snapshot.table_schema)  # key columns resolve by field id (a key may have been renamed)

    def one(item: tuple[SegmentState, list[int], pa.Table]) -> tuple[str, np.ndarray, np.ndarray, int]:
        seg, to_read, wanted = item
        return (seg.id, *_read_matches(io, seg, to_read, wanted, masks_for, schema))

    found: dict[str, list[np.ndarray]] = {}
    for sid, positions, idx, read in ordered_map(one, work, workers=_workers(len(work))):
        out.row_groups_read += read
        if len(positions):
            found.setdefault(sid, []).append(positions)
            out.matched[idx] = True
    out.positions = {sid: np.sort(np.concatenate(parts)) for sid, parts in found.items()}
    return out


# When the keys a filter lets through are many per row group, every row group in their range
# is read anyway (an upsert whose keys mostly exist): the filter may then stop probing early
# (``KeyBloom.may_contain(enough=…)``). A few more candidates cost nothing the read does not
# cost already, and the join on the real values stays exact.
_KEYS_PER_ROW_GROUP = 8


def _probe(bloom: KeyBloom, hashes: np.ndarray, candidates: np.ndarray, *, row_groups: int) -> np.ndarray:
    """The ``candidates`` (key indices) that ``bloom`` may hold (and, when they are many, a few it does not)."""
    return candidates[bloom.may_contain(hashes[candidates], enough=_KEYS_PER_ROW_GROUP * max(1, row_groups))]


def _workers(items: int) -> int:
    return min(default_workers(), max(1, items))


def _split(work: list[tuple[SegmentState, list[int], pa.Table]]) -> list[tuple[SegmentState, list[int], pa.Table]]:
    """Split the row groups of the work into about one piece per core (no piece smaller than one row group).

    A lookup whose candidates are all in one segment reads in parallel too."""
    workers = default_workers()
    total = sum(len(rgs) for _, rgs, _ in work)
    if len(work) >= workers or total <= len(work):
        return work
    per = -(-total // workers)
    return [(seg, rgs[i : i + per], wanted) for seg, rgs, wanted in work for i in range(0, len(rgs), per)]


def _read_matches(
    io: FileIO, seg: SegmentState, to_read: list[int], wanted: pa.Table, masks_for: Any, schema: pa.Schema | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """The live rows of the row groups ``to_read`` that hold one of the ``wanted`` keys.

    Returned as (their positions, the key indices (``_IDX``) they hold, row groups read)."""
    columns = [n for n in wanted.column_names if n != _IDX]
    pf = open_parquet(io, seg.file.path, row_groups=to_read, columns=columns, footer_crc32=seg.file.footer_crc32, schema=schema)
    found_pos: list[np.ndarray] = []
    found_idx: list[np.ndarray] = []
    for run, keep in read_runs(seg.file, to_read, masks_for(seg.id), read_rows=DEFAULT_READ_ROWS):
        table = read_row_groups(pf, seg.file, run, columns, keep=None)
        offsets = np.arange(table.num_rows, dtype=np.int64) if keep is None else np.flatnonzero(keep).astype(np.int64)
        if keep is not None:
            table = table.filter(pa.array(keep, type=pa.bool_()))
        rows = table.append_column(_POS, pa.array(offsets))  # offsets in the run: positions only for the hits
        joined = rows.join(wanted, columns, join_type="inner")  # Arrow's hash join: faster than hashing here
        if joined.num_rows:
            at = joined.column(_POS).to_numpy()
            order = np.argsort(at)
            found_pos.append(positions_at(seg.file, run, at[order]))
            found_idx.append(joined.column(_IDX).to_numpy()[order])
    if not found_pos:
        return (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), len(to_read))
    return np.concatenate(found_pos), np.concatenate(found_idx), len(to_read)


# Per key column, the (min, max) a row group's statistics give, or None: no statistics,
# so the row group may hold any value of that column.
Bounds = dict[str, tuple[Any, Any] | None]


def _bounds(row_groups: Sequence[Any], schema: pa.Schema) -> list[Bounds]:
    """The decoded key-column ranges of each row group."""
    out = []
    for rg in row_groups:
        b: Bounds = {}
        for f in schema:
            stats = rg.stats.get(f.name)
            missing = stats is None or stats.min is None or stats.max is None
            b[f.name] = None if missing else (decode(stats.min, f.type), decode(stats.max, f.type))
        out.append(b)
    return out


def _span(bounds: Sequence[Bounds]) -> Bounds:
    """The range of a whole segment: per column, the smallest min and the largest max."""
    span: Bounds = {}
    for name in bounds[0]:
        ranges = [b[name] for b in bounds]
        known = [r for r in ranges if r is not None]
        span[name] = (min(r[0] for r in known), max(r[1] for r in known)) if len(known) == len(ranges) else None
    return span


class _Columns:
    """The key columns, compared against ranges.

    Integer columns as numpy arrays (one comparison costs microseconds), the other key types through
    Arrow compute."""

    def __init__(self, keys: pa.Table) -> None:
        self.rows = keys.num_rows
        self.columns: dict[str, Any] = {}
        for f in keys.schema:
            col = keys.column(f.name)
            self.columns[f.name] = col.to_numpy() if pa.types.is_integer(f.type) else (col, f.type)

    def inside(self, bounds: Bounds) -> np.ndarray:
        """Per key: whether ``bounds`` cover it in every key column."""
        inside = np.ones(self.rows, dtype=bool)
        for name, r in bounds.items():
            if r is None:
                continue
            col = self.columns[name]
            if isinstance(col, np.ndarray):
                inside &= (col >= r[0]) & (col <= r[1])
            else:
                arr, t = col
                lo, hi = pa.scalar(r[0], type=t), pa.scalar(r[1], type=t)
                inside &= pc.and_(pc.greater_equal(arr, lo), pc.less_equal(arr, hi)).to_numpy(zero_copy_only=False)
        return inside
