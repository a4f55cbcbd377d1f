"""Planning a scan (which row groups of which segments, with which deletion vector) and
executing one piece of it. Shared by ``Table.scan`` and the Spark reader: the plan is made
once on the driver, and every ``ScanTask`` carries all an executor needs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from mvtable.lineage.actions import DeletionVectorRef, SegmentFile
from mvtable.lineage.io import FileIO
from mvtable.lineage.snapshot import COMPLETED, REVERTED, SegmentState, Snapshot
from mvtable.conf import connector_settings, parse_period
from mvtable.visibility import keep_mask, load_dv_positions, pins, process_cache

from .errors import InvalidOptionError
from .schema import project, schema_from_json
from .segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT, iter_segment
from .stats import Predicate, row_groups_to_read


@dataclass(frozen=True)
class ScanTask:
    segment: SegmentFile
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
) -> ScanPlan:
    table_schema = schema_from_json(snapshot.table_schema)
    out = output_schema(table_schema, columns, row_address=row_address)
    tasks: list[ScanTask] = []
    pruned = 0
    for seg in staged_segments(snapshot, lineage_entry) if lineage_entry else snapshot.visible_segments():
        groups = row_groups_to_read(seg.file.row_groups, predicates, table_schema)
        pruned += len(seg.file.row_groups) - len(groups)
        if groups:
            tasks.append(ScanTask(segment=seg.file, row_groups=tuple(groups), dv=snapshot.dvs.get(seg.id)))
    names = tuple(table_schema.field(c).name for c in project(table_schema, columns).names) if columns is not None else None
    return ScanPlan(
        version=snapshot.version,
        schema=out,
        columns=names,
        tasks=tuple(tasks),
        predicates=tuple(predicates),
        row_address=row_address,
        pruned_row_groups=pruned,
    )


def staged_segments(snapshot: Snapshot, entry_id: str) -> list[SegmentState]:
    """What readers will see once ``entry_id`` is published: write-audit-publish reads the
    staged snapshot of an IN_PROGRESS entry before anyone else can."""
    entry = snapshot.lineage.get(entry_id)
    if entry is None:
        raise InvalidOptionError(f"lineageEntry: no lineage entry {entry_id!r} in this table")
    if entry.state == REVERTED:
        raise InvalidOptionError(f"lineageEntry: entry {entry_id} is REVERTED; its snapshot is gone")
    if entry.state == COMPLETED:
        return snapshot.visible_segments()
    replaced = set(entry.segments_from)
    ids = [sid for sid in snapshot.visible_segment_ids() if sid not in replaced]
    ids += [sid for sid in entry.segments_to if snapshot.segments[sid].removed_version is None]
    return [snapshot.segments[sid] for sid in ids]


def pin_version(io: FileIO, version: int, *, ttl: str | None = None) -> str:
    """Pin ``version`` while a read plans and runs, so visibility GC keeps what it needs.
    Pins expire (``pinTtl``), so a reader that dies never blocks GC for long."""
    ttl_s = parse_period(ttl or connector_settings().pinTtl, name="pinTtl")
    return pins.pin(io, version, ttl_s=ttl_s, owner=f"reader pid {os.getpid()}")


def split_tasks(tasks: Sequence[ScanTask], *, max_bytes: int) -> list[list[ScanTask]]:
    """Pack row groups into partitions of at most ``max_bytes`` (a larger row group gets one
    of its own), keeping each segment's row groups in order."""
    parts: list[list[ScanTask]] = []
    current: list[ScanTask] = []
    size = 0
    for task in tasks:
        groups: list[int] = []
        for i in task.row_groups:
            rg_bytes = task.segment.row_groups[i].total_byte_size
            if size + rg_bytes > max_bytes and (current or groups):
                if groups:
                    current.append(ScanTask(task.segment, tuple(groups), task.dv))
                    groups = []
                parts.append(current)
                current, size = [], 0
            groups.append(i)
            size += rg_bytes
        if groups:
            current.append(ScanTask(task.segment, tuple(groups), task.dv))
    if current:
        parts.append(current)
    return parts


class _Mask:
    def __init__(self, positions: np.ndarray) -> None:
        self.positions = positions

    def keep_mask(self, start: int, count: int) -> np.ndarray | None:
        return keep_mask(self.positions, start, count)


def read_task(
    io: FileIO,
    task: ScanTask,
    *,
    columns: Sequence[str] | None,
    predicates: Sequence[Predicate] = (),
    row_address: bool = False,
) -> Iterator[pa.Table]:
    """The live rows of one task, deletion vector applied; ``predicates`` are applied
    exactly (they are what the Spark reader claimed to Spark)."""
    masks = _Mask(load_dv_positions(io, task.dv, cache=process_cache())) if task.dv is not None else None
    read_cols = list(columns) if columns is not None else None
    if read_cols is not None and predicates:
        read_cols += [p.column for p in predicates if p.column not in read_cols]
    for table in iter_segment(io, task.segment, task.row_groups, read_cols, masks=masks, row_address=row_address):
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
