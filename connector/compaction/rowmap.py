"""Where a row of a compacted segment went: the row map of a ``compact`` commit.

A compaction writes the live rows of each input, in file order, into one output. The log
records per input (``CompactedInput``) the deletion vector it had at the compaction's read
version (``dv``) and its first row in the output (``first_row``). Row ``p`` of the input,
unless ``dv`` deletes it, is row ``first_row + p - rank(dv, p)`` of the output, where
``rank(dv, p)`` counts the deleted positions ``<= p`` (pyroaring's ``BitMap64.rank``); a
deleted ``p`` has no image. Nothing per row is stored: the DVs are the map (Lance keeps its
row map this way; a hash map per row would be far larger).

``rank`` of many positions at once is a ``searchsorted`` over the DV's sorted positions
(what ``load_dv_positions`` caches), which equals ``BitMap64.rank`` element for element.

Two users: a delete that read before a compaction and commits after it moves its
positions onto the outputs (``CompactionMoves`` + ``follow``), and a compaction whose
inputs received deletes after its read version carries them onto its outputs
(``map_positions``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap64

from mvtable.dvref import DeletionVectorRef
from mvtable.lineage.actions import CompactSegments
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO
from mvtable.visibility import bitmap_from_array, load_dv_positions, positions_array, process_cache

__all__ = ["CompactionMoves", "Move", "follow", "map_positions", "relocate"]

_EMPTY = np.empty(0, dtype=np.uint64)


def map_positions(positions: np.ndarray, deleted: np.ndarray, first_row: int) -> np.ndarray:
    """The output rows (sorted ``uint64``) of the sorted input ``positions``.

    Those that ``deleted`` (the input's sorted DV positions at the compaction's read) covers have no
    image and are left out."""
    p = np.asarray(positions, dtype=np.uint64)
    d = np.asarray(deleted, dtype=np.uint64)
    if len(d) == 0:
        return p + np.uint64(first_row)
    rank = np.searchsorted(d, p, side="right")
    gone = rank > 0
    gone[gone] = d[rank[gone] - 1] == p[gone]
    keep = ~gone
    return p[keep] - rank[keep].astype(np.uint64) + np.uint64(first_row)


@dataclass(frozen=True)
class Move:
    """Where one compacted input went, and at which version."""

    output: str | None  # None: every row of the input was deleted
    first_row: int
    dv: DeletionVectorRef | None
    version: int


class CompactionMoves:
    """The inputs of the compactions committed after ``since`` (a reader's read version), read from the log on demand and kept.

    A retrying commit reads each version once."""

    def __init__(self, commit_log: CommitLog, since: int) -> None:
        self._log = commit_log
        self._scanned = since
        self._moves: dict[str, Move] = {}

    def upto(self, version: int) -> CompactionMoves:
        for v in range(self._scanned + 1, version + 1):
            for action in self._log.read_commit(v).actions:
                if isinstance(action, CompactSegments):
                    for inp in action.inputs:
                        self._moves[inp.segment_id] = Move(inp.output, inp.first_row, inp.dv, v)
        self._scanned = max(self._scanned, version)
        return self

    def get(self, segment_id: str) -> Move | None:
        return self._moves.get(segment_id)


def follow(
    io: FileIO, moves: CompactionMoves, segment_id: str, rows: BitMap64, *, visible: set[str]
) -> tuple[str | None, BitMap64] | None:
    """Move ``rows`` of ``segment_id`` through every compaction since the reader's version until they sit in a visible segment.

    ``(segment, rows)``; ``(None, empty)`` when a compaction found every row of it deleted already.
    ``None`` when the segment left the table another way (a push or overwrite replaced it: the
    caller's conflict)."""
    sid, bm = segment_id, rows
    while sid not in visible:
        move = moves.get(sid)
        if move is None:
            return None
        if move.output is None:
            return None, BitMap64()
        deleted = load_dv_positions(io, move.dv, cache=process_cache()) if move.dv is not None else _EMPTY
        bm = bitmap_from_array(map_positions(positions_array(bm), deleted, move.first_row))
        sid = move.output
    return sid, bm


def relocate(
    io: FileIO, moves: CompactionMoves, current: Snapshot, rows: Mapping[str, BitMap64]
) -> tuple[dict[str, BitMap64], int]:
    """``rows`` moved onto the segments that hold them at ``current``, and how many rows moved.

    ``rows`` maps segment → positions, as a delete read them. A segment that left the table other
    than by compaction is kept as it is, for the caller's visibility check to refuse."""
    visible = set(current.visible_segment_ids())
    if visible.issuperset(rows):
        return dict(rows), 0
    moves.upto(current.version)
    out: dict[str, BitMap64] = {}
    moved = 0
    for sid, bm in rows.items():
        found = follow(io, moves, sid, bm, visible=visible)
        target, positions = (sid, bm) if found is None else found
        if target != sid:
            moved += len(positions)
        if target is not None and len(positions):
            out[target] = out[target] | positions if target in out else positions
    return out, moved
