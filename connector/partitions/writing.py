"""Splitting rows by partition before they are written, so that every segment holds one partition.

The Python writer splits a whole table (``split_by_partition``, then ``write_partitioned``);
a Spark task splits each Arrow batch it receives and keeps one open ``SegmentWriter`` per
partition it meets (``PartitionedWriter``). The log then records each segment's spec id and
partition tuple (``SegmentFile.spec_id``/``partition``), which is what pruning, scoped pushes
and ``Table.partitions`` read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import PartitionSpecError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.partitioning import PartitionSpec, PartitionValue
from mvtable.storage import FileIO

from ..key_index import index_path
from ..parallel import default_workers, ordered_map
from ..segments import SegmentWriter, write_segments
from ..write_intents import WriteIntent
from .spec import spec_columns
from .values import encode_value

__all__ = ["PartitionedWriter", "split_by_partition", "with_partition", "write_partitioned"]

Partition = tuple[PartitionValue, ...]


def partition_index(
    data: pa.Table | pa.RecordBatch, spec: PartitionSpec, table_schema: dict[str, Any]
) -> tuple[np.ndarray, list[Partition]]:
    """(each row's partition number, the partitions by number as the log stores them), numbered in order of first row.

    Vectorised: each field's values are transformed and dictionary-encoded once, and only one
    row per partition is turned into the log's form. Nulls form a partition of their own.

    Raises:
        PartitionSpecError: a spec field's column is no longer in the table."""
    n = data.num_rows
    codes = np.zeros(n, dtype=np.int64)
    fields: list[tuple[pa.Array, np.ndarray, Any, pa.DataType]] = []
    for field, column, transform in spec_columns(spec, table_schema):
        if column is None:
            raise PartitionSpecError(f"partition field {field.name!r}: its column (field id {field.source_id}) is gone")
        source = data.schema.field(column).type
        encoded = pc.dictionary_encode(transform.apply(data.column(column)), null_encoding="encode")
        indices = np.asarray(encoded.indices, dtype=np.int64)
        size = len(encoded.dictionary)
        if n and int(codes.max()) + 1 > (1 << 62) // max(size, 1):  # keep the combined code in range: renumber first
            codes = np.unique(codes, return_inverse=True)[1].reshape(-1).astype(np.int64)
        codes = codes * size + indices
        fields.append((encoded.dictionary, indices, transform, source))
    if not n:
        return np.zeros(0, dtype=np.int64), []
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")  # number the partitions in order of their first row
    renumber = np.empty(len(first), dtype=np.int64)
    renumber[by_first] = np.arange(len(first))
    return renumber[inverse.reshape(-1)], [_partition(fields, int(first[g])) for g in by_first]


def split_by_partition(
    data: pa.Table | pa.RecordBatch, spec: PartitionSpec, table_schema: dict[str, Any]
) -> list[tuple[Partition, pa.Table]]:
    """``data``'s rows grouped by partition: (the partition tuple as the log stores it, its rows in their order).

    Partitions come in order of their first row. ``data`` has the table's columns
    (``writes.align``); nulls form a partition of their own (a null value).

    Raises:
        PartitionSpecError: a spec field's column is no longer in the table."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    if not table.num_rows:
        return []
    numbers, partitions = partition_index(table, spec, table_schema)
    if len(partitions) == 1:
        return [(partitions[0], table)]
    order = np.argsort(numbers, kind="stable")
    bounds = np.searchsorted(numbers[order], np.arange(len(partitions) + 1))
    # one take of the whole table into partition order, then zero-copy slices: a take per
    # partition would walk the whole table once per partition
    grouped = table.take(pa.array(order)).combine_chunks()
    return [(part, grouped.slice(int(bounds[g]), int(bounds[g + 1] - bounds[g]))) for g, part in enumerate(partitions)]


def _partition(fields: list[tuple[pa.Array, np.ndarray, Any, pa.DataType]], row: int) -> Partition:
    """The partition tuple of row ``row``, as the log stores it."""
    return tuple(
        encode_value(dictionary[int(indices[row])].as_py(), transform, source)
        for dictionary, indices, transform, source in fields
    )


def with_partition(segment: SegmentFile, spec: PartitionSpec, partition: Partition) -> SegmentFile:
    """``segment`` recording that it holds rows of ``partition`` under ``spec``."""
    return segment.model_copy(update={"spec_id": spec.spec_id, "partition": partition})


def write_partitioned(
    io: FileIO,
    data: pa.Table,
    *,
    spec: PartitionSpec | None,
    table_schema: dict[str, Any],
    row_group_rows: int,
    primary_key: Sequence[str] = (),
    intent: WriteIntent | None = None,
) -> list[SegmentFile]:
    """``segments.write_segments`` for a table whose spec is ``spec``: at least one segment per partition.

    Partitions are written in parallel, each as ``write_segments`` would (a large partition
    becomes several segments); unpartitioned (``spec`` None or without fields) it is
    ``write_segments`` itself. If any write fails, every file written so far is removed.

    Raises:
        PartitionSpecError: a spec field's column is no longer in the table."""
    if spec is None or not spec.partitioned:
        return write_segments(io, data, row_group_rows=row_group_rows, primary_key=primary_key, intent=intent)
    groups = split_by_partition(data, spec, table_schema)
    if len(groups) == 1:
        part, rows = groups[0]
        segments = write_segments(io, rows, row_group_rows=row_group_rows, primary_key=primary_key, intent=intent)
        return [with_partition(s, spec, part) for s in segments]
    written: list[SegmentFile] = []
    lock = threading.Lock()

    def write_one(group: tuple[Partition, pa.Table]) -> list[SegmentFile]:
        part, rows = group
        segments = write_segments(io, rows, row_group_rows=row_group_rows, primary_key=primary_key, intent=intent, workers=1)
        with lock:
            written.extend(segments)
        return [with_partition(s, spec, part) for s in segments]

    try:
        done = list(ordered_map(write_one, groups, workers=min(default_workers(), len(groups))))
    except BaseException:
        _remove(io, written, keyed=bool(primary_key))
        raise
    return [s for segments in done for s in segments]


def _remove(io: FileIO, segments: Sequence[SegmentFile], *, keyed: bool) -> None:
    try:
        io.delete([p for s in segments for p in (s.path, *([index_path(s.path)] if keyed else []))])
    except Exception:
        pass  # the write's own error matters; vacuum collects orphans


class PartitionedWriter:
    """A Spark task's writer: one ``SegmentWriter`` per partition the task meets.

    Each batch is split by partition and every part goes to its partition's writer, so a
    segment holds one partition. Memory stays bounded per partition (each writer buffers at
    most one row group), so a task holds one open writer, and up to one row group of rows,
    for every distinct partition among its rows: a task over data sorted or clustered by the
    partition columns meets few. ``make_writer`` opens a writer (the task's settings)."""

    def __init__(self, spec: PartitionSpec, table_schema: dict[str, Any], make_writer: Callable[[], SegmentWriter]) -> None:
        self.spec = spec
        self.table_schema = table_schema
        self.make_writer = make_writer
        self.writers: dict[Partition, SegmentWriter] = {}

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        for part, rows in split_by_partition(batch, self.spec, self.table_schema):
            writer = self.writers.get(part)
            if writer is None:
                writer = self.writers[part] = self.make_writer()
            writer.write(rows)

    def close(self) -> list[SegmentFile]:
        """Close every writer: the segments, one or more per partition met."""
        out: list[SegmentFile] = []
        for part, writer in self.writers.items():
            segment = writer.close()
            if segment is not None:
                out.append(with_partition(segment, self.spec, part))
        return out

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()
