"""Which segments a filter matches whole, decided from their partition alone.

Pruning asks "may a row of this partition match?"; a delete (and a scoped push) also asks
the strict question, "does every row match?". A partition guarantees something about its
source columns (a day partition: ``ts >= day start and ts < next day``; an identity one:
``region == 'eu'``), and when that guarantee leaves the filter no way to be false or null
for any row, every row of every segment of the partition matches: the segment can leave
the table whole, with no file read and no deletion vector written. Arrow's own
simplification decides it (the same one pruning uses), so any filter Arrow can reason
about qualifies and anything else falls back to the row-level path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from mvtable.lineage.partitioning import PartitionSpec, PartitionValue
from mvtable.lineage.snapshot import Snapshot, held_segments

from .pruning import ExpressionPruner

__all__ = ["covered_partitions", "covered_segments", "drop_candidates"]

Key = tuple[int, tuple[PartitionValue, ...]]


def covered_partitions(
    specs: dict[int, PartitionSpec], table_schema: dict[str, Any], arrow: pa.Schema, filter: pc.Expression, keys: Iterable[Key]
) -> set[Key]:
    """The ``(spec_id, partition)`` keys each of whose rows ``filter`` matches (is true for)."""
    pruner = ExpressionPruner(specs, table_schema, arrow, filter)
    guarantees: list[tuple[Key, pc.Expression]] = []
    for key in dict.fromkeys(keys):
        g = pruner.partition_guarantee(*key)
        if g is not None:
            guarantees.append((key, g))
    if not guarantees:
        return set()
    fmt, fs = ds.ParquetFileFormat(), pafs.LocalFileSystem()
    fragments = [fmt.make_fragment(f"/{i}", fs, partition_expression=g) for i, (_, g) in enumerate(guarantees)]
    dataset = ds.FileSystemDataset(fragments, arrow, fmt, fs)
    try:
        # a row the filter does not delete has it false or null: no partition may hold one
        escapes = {int(f.path[1:]) for f in dataset.get_fragments(filter=~filter | filter.is_null())}
    except (pa.ArrowException, TypeError, ValueError):
        return set()  # an expression Arrow cannot simplify: nothing is covered
    return {key for i, (key, _) in enumerate(guarantees) if i not in escapes}


def covered_segments(snapshot: Snapshot, segment_ids: Iterable[str], filter: pc.Expression, arrow: pa.Schema) -> set[str]:
    """The segments among ``segment_ids`` whose every row ``filter`` matches, by partition (see the module docstring)."""
    files = [snapshot.segments[sid].file for sid in segment_ids]
    keys = [(f.spec_id, f.partition) for f in files if f.spec_id is not None and f.partition is not None]
    if not keys:
        return set()
    covered = covered_partitions(snapshot.partition_specs, snapshot.table_schema, arrow, filter, keys)
    return {f.id for f in files if f.spec_id is not None and f.partition is not None and (f.spec_id, f.partition) in covered}


def drop_candidates(snapshot: Snapshot, planned: Mapping[str, int]) -> list[str]:
    """The planned segments a delete may remove whole: partitioned, every row group planned, held by no push.

    ``planned`` maps each segment a scan plan reads to how many of its row groups it reads.
    A running or staged push holds its segments: only it may remove them, so their rows are
    deleted by deletion vector, as in an unpartitioned table. So are the rows of a published
    push's segments: removing them would keep that push from ever being rolled back."""
    held = held_segments(snapshot) | {sid for e in snapshot.lineage.values() if e.live for sid in e.segments_to}
    out = []
    for sid, groups in planned.items():
        f = snapshot.segments[sid].file
        if f.partition is not None and sid not in held and groups == len(f.row_groups):
            out.append(sid)
    return out
