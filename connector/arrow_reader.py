"""A scan as a ``pyarrow.RecordBatchReader``, the way any Arrow consumer reads an mvtable snapshot.

DuckDB, Polars and the rest read it with deletes applied, without the whole table in memory.

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

from mvtable.storage import FileIO

from .parallel import ordered_map
from .scan import ScanTask
from .segments import open_parquet

__all__ = ["dictionary_schema", "record_batch_reader", "split_tasks"]


def split_tasks(tasks: Sequence[ScanTask], *, chunk_rows: int) -> Iterator[ScanTask]:
    """``tasks`` as pieces of consecutive row groups with at most ``chunk_rows`` rows each.

    A single larger row group stays whole. Each piece keeps its segment's DV: the DV holds file
    positions, so it applies to any subset of row groups."""
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


def dictionary_schema(
    io: FileIO, schema: pa.Schema, tasks: Sequence[ScanTask], columns: Sequence[str] | None
) -> tuple[pa.Schema, frozenset[str]]:
    """The reader's schema when low-cardinality strings stay dictionaries, and those columns.

    The string/binary columns of ``schema`` that the first task's segment stores dictionary-encoded
    (``segments.dictionary_columns``) become ``dictionary<int32, …>``. The schema is fixed before
    the first batch, so a later piece whose segment stores such a column plain is dictionary-encoded
    by the reader's final cast: every batch has one schema, whichever segments the pieces come from."""
    if not tasks:
        return schema, frozenset()
    first = tasks[0]
    pf = open_parquet(
        io, first.segment.path, row_groups=first.row_groups, columns=columns, footer_crc32=first.segment.footer_crc32
    )
    as_dictionary: frozenset[str] = getattr(pf, "as_dictionary", frozenset())
    keep = frozenset(
        f.name for f in schema if f.name in as_dictionary and (pa.types.is_string(f.type) or pa.types.is_binary(f.type))
    )
    fields = [f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in keep else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata), keep


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

    ``on_close`` runs once the stream is exhausted, fails or is closed (it releases the scan's
    reader pin)."""

    nested = [i for i, f in enumerate(schema) if _nests_struct(f.type)]

    def batches() -> Iterator[pa.RecordBatch]:
        empty = True
        try:
            for tables in ordered_map(read, split_tasks(tasks, chunk_rows=chunk_rows), workers=workers):
                for table in tables:
                    for batch in table.to_batches():
                        empty = False
                        yield _unsliced(batch, nested) if nested else batch
            if empty:  # polars' from_arrow refuses a stream of no batches ("at least one RecordBatch")
                yield pa.RecordBatch.from_pylist([], schema=schema)
        finally:
            on_close()

    return pa.RecordBatchReader.from_batches(schema, batches())


def _nests_struct(t: pa.DataType, *, in_struct: bool = False) -> bool:
    """Whether ``t`` has a struct inside a struct (at any depth, through lists and maps)."""
    if pa.types.is_struct(t):
        return in_struct or any(_nests_struct(t.field(i).type, in_struct=True) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _nests_struct(t.value_type, in_struct=in_struct)
    if pa.types.is_map(t):
        return _nests_struct(t.key_type, in_struct=in_struct) or _nests_struct(t.item_type, in_struct=in_struct)
    return False


def _unsliced(batch: pa.RecordBatch, columns: Sequence[int]) -> pa.RecordBatch:
    """``batch`` with its ``columns`` copied to offset 0 where they are slices.

    DuckDB (2.0) refuses a struct below a struct in a batch with a non-zero offset (its conversion
    would drop the offset and read the wrong rows), and the reader's batches are slices of the
    pieces it reads. Only such columns are copied: a flat schema's batches pass as they are."""
    arrays = batch.columns
    if not any(arrays[i].offset for i in columns):
        return batch
    for i in columns:
        if arrays[i].offset:
            arrays[i] = pa.concat_arrays([arrays[i]])
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
