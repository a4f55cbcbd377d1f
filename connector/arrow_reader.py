"""A scan as a ``pyarrow.RecordBatchReader``: how DuckDB, Polars and any Arrow consumer
read an mvtable snapshot, deletes applied, without the whole table in memory.

``TableScan.to_arrow`` reads whole segments on a few threads; a reader must instead stay
within a memory bound however large the segments are. So the plan's tasks are cut into
pieces of whole row groups holding at most ``chunk_rows`` rows (a row group larger than
that is one piece), the pieces are read in order on the bounded thread map of
``parallel.ordered_map``, and batches are handed out as each piece completes: at most
``workers + 1`` decoded pieces are alive at any time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from .parallel import ordered_map
from .scan import ScanTask

__all__ = ["record_batch_reader", "split_tasks"]


def split_tasks(tasks: Sequence[ScanTask], *, chunk_rows: int) -> Iterator[ScanTask]:
    """``tasks`` as pieces of consecutive row groups with at most ``chunk_rows`` rows each
    (a single larger row group stays whole). Each piece keeps its segment's DV: the DV
    holds file positions, so it applies to any subset of row groups."""
    for task in tasks:
        group: list[int] = []
        rows = 0
        for rg in task.row_groups:
            n = task.segment.row_groups[rg].num_rows
            if group and rows + n > chunk_rows:
                yield ScanTask(task.segment, tuple(group), task.dv)
                group, rows = [], 0
            group.append(rg)
            rows += n
        if group:
            yield ScanTask(task.segment, tuple(group), task.dv)


def record_batch_reader(
    schema: pa.Schema,
    tasks: Sequence[ScanTask],
    read: Callable[[ScanTask], list[pa.Table]],
    *,
    chunk_rows: int,
    workers: int,
    on_close: Callable[[], None],
) -> pa.RecordBatchReader:
    """A reader of ``read(piece)`` over the pieces of ``tasks``, in plan order.
    ``on_close`` runs once the stream is exhausted, fails or is closed (it releases the
    scan's reader pin)."""

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for tables in ordered_map(read, split_tasks(tasks, chunk_rows=chunk_rows), workers=workers):
                for table in tables:
                    yield from table.to_batches()
        finally:
            on_close()

    return pa.RecordBatchReader.from_batches(schema, batches())
