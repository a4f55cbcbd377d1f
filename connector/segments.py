"""Segment I/O: writing Parquet segments with per-row-group statistics, and reading row
groups with deletion masks applied.

A writer buffers incoming batches until a full row group is there, so Spark's small Arrow
batches (10k rows) do not become tiny row groups. Files are named by a fresh UUID, which
makes every task attempt's files unique; a failed attempt's files are orphans that no
commit names and vacuum removes.
"""

from __future__ import annotations

import uuid
from typing import Protocol
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mvtable.lineage.actions import RowGroupInfo, SegmentFile
from mvtable.lineage.io import FileIO

from .errors import FilesMissingError
from .stats import column_stats

DATA_DIR = "data"
ROW_ADDRESS_SEGMENT = "_mv_segment"
ROW_ADDRESS_ROW = "_mv_row"


def new_segment_id() -> str:
    return uuid.uuid4().hex


class SegmentWriter:
    """Writes one segment. ``close()`` returns its descriptor, or ``None`` if no rows came."""

    def __init__(self, io: FileIO, schema: pa.Schema, *, row_group_rows: int, compression: str = "zstd") -> None:
        self.io = io
        self.schema = schema
        self.row_group_rows = row_group_rows
        self.compression = compression
        self.segment_id = new_segment_id()
        self.path = f"{DATA_DIR}/{self.segment_id}.parquet"
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._sink = None
        self._row_groups: list[RowGroupInfo] = []
        self._rows = 0

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if batch.schema != self.schema:
                batch = batch.cast(self.schema) if batch.schema.names == self.schema.names else pa.RecordBatch.from_arrays(
                    [batch.column(n) for n in self.schema.names], schema=self.schema
                )
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
            while self._pending_rows >= self.row_group_rows:
                self._flush(self.row_group_rows)

    def _flush(self, rows: int) -> None:
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        head, rest = table.slice(0, rows), table.slice(rows)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows
        if self._writer is None:
            fs, base = self.io.arrow()
            fs.create_dir(f"{base}/{DATA_DIR}", recursive=True)
            self._sink = fs.open_output_stream(f"{base}/{self.path}")
            self._writer = pq.ParquetWriter(self._sink, self.schema, compression=self.compression, write_statistics=True)
        self._writer.write_table(head, row_group_size=head.num_rows)
        self._row_groups.append(
            RowGroupInfo(num_rows=head.num_rows, first_row=self._rows, total_byte_size=0, stats=column_stats(head))
        )
        self._rows += head.num_rows

    def close(self) -> SegmentFile | None:
        if self._pending_rows:
            self._flush(self._pending_rows)
        if self._writer is None:
            return None
        self._writer.close()
        self._sink.close()
        md = self._writer.writer.metadata
        sizes = [sum(md.row_group(i).column(j).total_compressed_size for j in range(md.num_columns)) for i in range(md.num_row_groups)]
        row_groups = tuple(rg.model_copy(update={"total_byte_size": size}) for rg, size in zip(self._row_groups, sizes))
        size_bytes = md.serialized_size + sum(sizes)
        return SegmentFile(id=self.segment_id, path=self.path, num_rows=self._rows, size_bytes=size_bytes, row_groups=row_groups)

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()
            finally:
                self.io.delete([self.path])


def write_segments(io: FileIO, data: pa.Table, *, row_group_rows: int, max_rows_per_segment: int | None = None) -> list[SegmentFile]:
    """Write ``data`` as one segment (or several of at most ``max_rows_per_segment``)."""
    out: list[SegmentFile] = []
    step = max_rows_per_segment or max(data.num_rows, 1)
    for start in range(0, data.num_rows, step):
        writer = SegmentWriter(io, data.schema, row_group_rows=row_group_rows)
        try:
            writer.write(data.slice(start, step))
            seg = writer.close()
        except BaseException:
            writer.abort()
            raise
        if seg is not None:
            out.append(seg)
    return out


def open_parquet(io: FileIO, path: str) -> pq.ParquetFile:
    fs, base = io.arrow()
    try:
        return pq.ParquetFile(fs.open_input_file(f"{base}/{path}"), pre_buffer=True)
    except FileNotFoundError:
        raise FilesMissingError(
            f"segment file {path} of {io.uri} is gone: vacuum removed it (the version is older than the retention "
            "window) or it was deleted by hand"
        ) from None


def read_row_group(
    pf: pq.ParquetFile,
    segment: SegmentFile,
    index: int,
    columns: Sequence[str] | None,
    *,
    keep: np.ndarray | None,
    row_address: bool = False,
) -> pa.Table:
    """One row group with deleted rows dropped (``keep`` is the mask, None = keep all).
    With ``row_address`` two columns name each row's physical address for deletes."""
    rg = segment.row_groups[index]
    table = pf.read_row_group(index, columns=list(columns) if columns is not None else None, use_threads=False)
    if table.num_rows != rg.num_rows:
        raise ValueError(f"{segment.path}: row group {index} has {table.num_rows} rows, the log says {rg.num_rows}")
    if row_address:
        positions = np.arange(rg.first_row, rg.first_row + rg.num_rows, dtype=np.int64)
        ids = pa.array([segment.id], pa.string()).take(pa.array(np.zeros(rg.num_rows, dtype=np.int32)))
        table = table.append_column(ROW_ADDRESS_SEGMENT, ids)
        table = table.append_column(ROW_ADDRESS_ROW, pa.array(positions))
    if keep is not None:
        table = table.filter(pa.array(keep))
    return table


def iter_segment(
    io: FileIO, segment: SegmentFile, row_groups: Sequence[int], columns: Sequence[str] | None, *, masks: "MaskSource | None" = None, row_address: bool = False
) -> Iterator[pa.Table]:
    pf = open_parquet(io, segment.path)
    for i in row_groups:
        rg = segment.row_groups[i]
        keep = masks.keep_mask(rg.first_row, rg.num_rows) if masks is not None else None
        if keep is not None and not keep.any():
            continue
        yield read_row_group(pf, segment, i, columns, keep=keep, row_address=row_address)


class MaskSource(Protocol):
    """What ``iter_segment`` needs from a deletion vector: the rows of one range to keep,
    or ``None`` when none of them is deleted."""

    def keep_mask(self, start: int, count: int) -> np.ndarray | None: ...
