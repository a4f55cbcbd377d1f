"""Planning a scan (which row groups of which segments, with which deletion vector) and executing one piece of it.

Shared by ``Table.scan`` and the Spark reader: the plan is made once on the driver, and every
``ScanTask`` carries all an executor needs."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import InvalidOptionError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.descriptors import SegmentDescriptor, paused_gc
from mvtable.lineage.enums import LineageState
from mvtable.lineage.snapshot import SegmentState, Snapshot
from mvtable.storage import FileIO
from mvtable.visibility import keep_mask, load_dv_positions, process_cache

from .partitions.pruning import prune_segments
from .predicates import check_predicates
from .schema import project, schema_from_json
from .segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT, iter_segment
from .stats import Predicate, row_groups_to_read


@dataclass(frozen=True)
class ScanTask:
    segment: SegmentDescriptor | SegmentFile  # a snapshot's descriptor; anything with the same attributes
    row_groups: tuple[int, ...]
    dv: DeletionVectorRef | None

    @property
    def bytes(self) -> int:
        return sum(self.segment.row_groups[i].total_byte_size for i in self.row_groups)

    @property
    def rows(self) -> int:
        return sum(self.segment.row_groups[i].num_rows for i in self.row_groups)


@dataclass(frozen=True)
class ScanPlan:
    version: int
    schema: pa.Schema  # of the output (projected, plus row address columns if asked)
    columns: tuple[str, ...] | None
    tasks: tuple[ScanTask, ...]
    predicates: tuple[Predicate, ...] = ()
    row_address: bool = False
    pruned_row_groups: int = 0
    pruned_segments: int = 0  # dropped by their partition, before any statistic was read


def output_schema(table_schema: pa.Schema, columns: Sequence[str] | None, *, row_address: bool) -> pa.Schema:
    schema = project(table_schema, columns)
    if row_address:
        schema = schema.append(pa.field(ROW_ADDRESS_SEGMENT, pa.string(), nullable=False))
        schema = schema.append(pa.field(ROW_ADDRESS_ROW, pa.int64(), nullable=False))
    return schema


def plan_scan(
    snapshot: Snapshot,
    *,
    columns: Sequence[str] | None = None,
    predicates: Sequence[Predicate] = (),
    row_address: bool = False,
    lineage_entry: str | None = None,
    filter: pc.Expression | None = None,
) -> ScanPlan:
    """Which row groups of which segments a read of ``snapshot`` needs.

    ``predicates`` are checked against the table's schema here (``InvalidFilterError`` before
    anything is read), prune row groups by statistics, and are kept in the plan for the readers to
    apply exactly. On a partitioned table, segments whose partition cannot match ``predicates``
    or ``filter`` (a checked ``pyarrow.compute`` expression, which the caller applies to the rows)
    are dropped first, from the log alone (``partitions.pruning``; ``ScanPlan.pruned_segments``)."""
    table_schema = schema_from_json(snapshot.table_schema)
    predicates = check_predicates(predicates, table_schema)
    out = output_schema(table_schema, columns, row_address=row_address)
    tasks: list[ScanTask] = []
    pruned = 0
    dvs = snapshot.dvs
    segments = staged_segments(snapshot, lineage_entry) if lineage_entry else snapshot.visible_segments()
    pruned_segments = 0
    if predicates or filter is not None:
        segments, pruned_segments = prune_segments(
            segments,
            specs=snapshot.partition_specs,
            table_schema=snapshot.table_schema,
            arrow=table_schema,
            predicates=predicates,
            filter=filter,
        )
    if not predicates:
        # Nothing to prune: no statistics are looked at (they stay unparsed, see
        # lineage.descriptors), and one task per segment with all its row groups.
        all_groups: dict[int, tuple[int, ...]] = {}
        with paused_gc():  # one object per segment, no cycles (see paused_gc)
            for seg in segments:
                f = seg.file
                n = len(f.row_groups)
                if n:
                    groups = all_groups.get(n) or all_groups.setdefault(n, tuple(range(n)))
                    tasks.append(ScanTask(f, groups, dvs.get(f.id)))
    else:
        for seg in segments:
            picked = (
                row_groups_to_read(seg.file.row_groups, predicates, table_schema)
                if stats_apply(snapshot, seg)
                else list(range(len(seg.file.row_groups)))
            )
            pruned += len(seg.file.row_groups) - len(picked)
            if picked:
                tasks.append(ScanTask(segment=seg.file, row_groups=tuple(picked), dv=dvs.get(seg.id)))
    names = tuple(table_schema.field(c).name for c in project(table_schema, columns).names) if columns is not None else None
    return ScanPlan(
        version=snapshot.version,
        schema=out,
        columns=names,
        tasks=tuple(tasks),
        predicates=predicates,
        row_address=row_address,
        pruned_row_groups=pruned,
        pruned_segments=pruned_segments,
    )


def stats_apply(snapshot: Snapshot, seg: SegmentState) -> bool:
    """Whether ``seg``'s statistics may prune row groups under ``snapshot``'s schema.

    Statistics are keyed by the column names a segment was written with: after a rename, drop or
    type change (``Snapshot.schema_break_version``) a name may mean another column, so older
    segments are read whole (their rows are still filtered exactly). Writes that read an older
    schema than such a change cannot land after it (``lineage.schema_ids.schema_race``)."""
    return seg.added_version > snapshot.schema_break_version


def staged_segments(snapshot: Snapshot, entry_id: str) -> list[SegmentState]:
    """What readers will see once ``entry_id`` is published.

    Write-audit-publish reads the staged snapshot of an IN_PROGRESS entry before anyone else can.

    Raises:
        InvalidOptionError: There is no such entry, or it is REVERTED."""
    entry = snapshot.lineage.get(entry_id)
    if entry is None:
        raise InvalidOptionError(f"lineageEntry: no lineage entry {entry_id!r} in this table")
    if entry.state == LineageState.REVERTED:
        raise InvalidOptionError(f"lineageEntry: entry {entry_id} is REVERTED; its snapshot is gone")
    if entry.state == LineageState.COMPLETED:
        return snapshot.visible_segments()
    replaced = set(entry.segments_from)
    ids = [sid for sid in snapshot.visible_segment_ids() if sid not in replaced]
    ids += [sid for sid in entry.segments_to if snapshot.segments[sid].removed_version is None]
    return [snapshot.segments[sid] for sid in ids]


OPEN_COST_BYTES = 4 * 1024 * 1024  # Spark's spark.sql.files.openCostInBytes default


def split_tasks(
    tasks: Sequence[ScanTask],
    *,
    max_bytes: int,
    parallelism: int = 1,
    open_cost: int = OPEN_COST_BYTES,
) -> list[list[ScanTask]]:
    """Cut the planned row groups into balanced partitions, keeping each segment's row groups in order.

    The partition size mirrors Spark's ``FilePartition.maxSplitBytes``:
    ``min(max_bytes, max(open_cost, total / parallelism))`` where ``total`` charges
    ``open_cost`` per segment, so a table smaller than ``max_bytes`` still spreads over
    every core (filling up to ``max_bytes`` left one core doing most of the work of a table
    just above it) while a small table stays one partition. Spark packs whole
    files next-fit; here the ``n`` cuts fall where the running cost crosses
    ``k * total / n``, so partitions differ by about one row group at most. No partition
    holds more than ``max_bytes`` of row groups unless one row group alone is larger."""
    if not tasks:
        return []
    open_cost = max(open_cost, 0)
    total = sum(t.bytes + open_cost for t in tasks)
    # ceiling, so that ``count`` below never exceeds ``parallelism`` (a floor made 3 cores
    # 4 partitions whenever the total was not a multiple of 3 and nothing paid an open cost)
    split = max(1, min(max_bytes, max(open_cost, -(-total // max(parallelism, 1)))))
    count = max(1, -(-(total - open_cost) // split))
    target = total / count
    parts: list[list[ScanTask]] = []
    current: list[ScanTask] = []
    data = 0  # bytes of the current partition
    seen = 0.0  # cost of everything placed so far; a segment's open cost counts once
    for task in tasks:
        groups: list[int] = []
        for i in task.row_groups:
            rg_bytes = task.segment.row_groups[i].total_byte_size
            cost = rg_bytes + (0 if groups or i != task.row_groups[0] else open_cost)
            over = data + rg_bytes > max_bytes
            past = len(parts) < count - 1 and seen + cost / 2 > target * (len(parts) + 1)
            if (current or groups) and (over or past):
                if groups:
                    current.append(ScanTask(task.segment, tuple(groups), task.dv))
                    groups = []
                parts.append(current)
                current, data = [], 0
            groups.append(i)
            data += rg_bytes
            seen += cost
        if groups:
            current.append(ScanTask(task.segment, tuple(groups), task.dv))
    if current:
        parts.append(current)
    return parts


class _Mask:
    """A task's DV as the sorted positions array.

    A row group's mask is two binary searches and a slice (see ``visibility.masks``)."""

    def __init__(self, positions: np.ndarray) -> None:
        self.positions = positions

    def keep_mask(self, start: int, count: int) -> np.ndarray | None:
        return keep_mask(self.positions, start, count)


def task_masks(io: FileIO, task: ScanTask) -> _Mask | None:
    """The deletion masks of ``task`` (None when its segment has no DV), through the process-wide DV cache."""
    return _Mask(load_dv_positions(io, task.dv, cache=process_cache())) if task.dv is not None else None


def read_task(
    io: FileIO,
    task: ScanTask,
    *,
    columns: Sequence[str] | None,
    predicates: Sequence[Predicate] = (),
    row_address: bool = False,
    use_threads: bool = False,
    read_rows: int | None = None,
    keep_dictionary: Collection[str] = (),
    schema: pa.Schema | None = None,
) -> Iterator[pa.Table]:
    """The live rows of one task, deletion vector applied.

    ``predicates`` are applied exactly (they are what the Spark reader claimed to Spark).

    The defaults suit a Spark executor (one task per core): single-threaded decode, one
    row group per call. ``Table.scan`` passes ``use_threads=True`` and ``read_rows`` so
    that one call decodes many row groups on every core (see ``segments.iter_segment``).
    ``schema``: the table schema of the version read; columns resolve by its field ids."""
    masks = task_masks(io, task)
    read_cols = list(columns) if columns is not None else None
    if read_cols is not None and predicates:
        read_cols += [p.column for p in predicates if p.column not in read_cols]
    tables = iter_segment(
        io,
        task.segment,
        task.row_groups,
        read_cols,
        masks=masks,
        row_address=row_address,
        use_threads=use_threads,
        read_rows=read_rows,
        keep_dictionary=keep_dictionary,
        schema=schema,
    )
    for table in tables:
        if predicates:
            expr = predicates[0].expression()
            for p in predicates[1:]:
                expr = expr & p.expression()
            table = table.filter(expr)
            if columns is not None:
                keep = list(columns) + ([ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW] if row_address else [])
                table = table.select(keep)
        if table.num_rows:
            yield table
