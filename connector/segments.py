"""Segment I/O: writing Parquet segments with per-row-group statistics, and reading row groups with deletion masks applied.

A writer buffers incoming batches until a full row group is there, so Spark's small Arrow
batches (10k rows) do not become tiny row groups. Files are named by a fresh UUID, which
makes every task attempt's files unique; a failed attempt's files are orphans that no
commit names and vacuum removes.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mvtable.errors import CorruptSegmentError, FilesMissingError
from mvtable.lineage.actions import RowGroupInfo, SegmentFile
from mvtable.paths import DATA_DIR
from mvtable.storage import FileIO, LocalFileIO
from mvtable.storage.oserror import translated

from . import page_checks, segment_checks
from .key_index import IndexBuilder, index_path
from .parallel import default_workers, ordered_map
from .schema_evolution.projection import ReadProjection, resolve
from .segment_checks import corrupt_segment, footer_crc32, is_decode_error, read_footer
from .segment_encoding import (
    SMALL_SEGMENT_COMPRESSION,
    FooterStats,
    dictionary_columns_for,
    is_small_segment,
    parquet_writer_options,
)
from .write_intents import WriteIntent, new_id

ROW_ADDRESS_SEGMENT = "_mv_segment"
ROW_ADDRESS_ROW = "_mv_row"


def new_segment_id(intent: WriteIntent | None = None, *, marker: str = "") -> str:
    """A fresh segment id, named after its write intent when there is one.

    The intent's id comes first (vacuum leaves files under a live intent alone, and a
    streaming commit finds the intents by the names); ``marker`` follows it, so that a
    streaming query can recognise its own files (``streaming.sink.is_marked``)."""
    stem = new_id(intent)
    if intent is None:
        return marker + stem
    head, _, tail = stem.partition("-")
    return f"{head}-{marker}{tail}"


class SegmentWriter:
    """Writes one segment. ``close()`` returns its descriptor, or ``None`` if no rows came."""

    def __init__(
        self,
        io: FileIO,
        schema: pa.Schema,
        *,
        row_group_rows: int,
        compression: str = "zstd",
        primary_key: Sequence[str] = (),
        total_rows: int | None = None,
        id_prefix: str = "",
        intent: WriteIntent | None = None,
    ) -> None:
        """``total_rows``: the segment's size when the caller knows it up front.

        It picks the codec (``segment_encoding.is_small_segment``); else the size is known only when
        the first flush is the last. ``intent``: the write intent the file is named after;
        ``id_prefix`` marks the segment's id (a streaming query marks its files so that its next
        start can find those of batches it never committed)."""
        self.io = io
        self.total_rows = total_rows
        self.schema = schema
        self.row_group_rows = row_group_rows
        self.compression = compression
        self.segment_id = new_segment_id(intent, marker=id_prefix)
        self.path = f"{DATA_DIR}/{self.segment_id}.parquet"
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._sink: Any = None  # pyarrow output stream, opened with the first rows
        self._row_groups: list[RowGroupInfo] = []
        self._stats = FooterStats(schema)  # row-group statistics, from the footer at close()
        self._rows = 0
        # a keyed table's segments get a key index beside them (``key_index``)
        self._index = IndexBuilder(primary_key) if primary_key else None

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if batch.schema != self.schema:
                batch = (
                    batch.cast(self.schema)
                    if batch.schema.names == self.schema.names
                    else pa.RecordBatch.from_arrays([batch.column(n) for n in self.schema.names], schema=self.schema)
                )
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
            while self._pending_rows >= self.row_group_rows:
                with translated("write", f"{self.io.uri}/{self.path}"):
                    self._flush(self.row_group_rows)

    def _flush(self, rows: int, *, last: bool = False) -> None:
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        head, rest = table.slice(0, rows), table.slice(rows)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows
        if self._writer is None:
            fs, base = self.io.arrow()
            fs.create_dir(f"{base}/{DATA_DIR}", recursive=True)
            self._sink = fs.open_output_stream(f"{base}/{self.path}")
            # the first flush is the last one: the whole segment is ``head``, its size known
            known = self.total_rows if self.total_rows is not None else head.num_rows if last else None
            small = is_small_segment(known)
            options = parquet_writer_options(
                compression=SMALL_SEGMENT_COMPRESSION if small else self.compression,
                use_dictionary=True if small else dictionary_columns_for(head),
                schema=self.schema,
            )
            self._writer = pq.ParquetWriter(self._sink, self.schema, **options)
        self._writer.write_table(head, row_group_size=head.num_rows)
        if self._index is not None:
            self._index.add(head)
        self._row_groups.append(
            RowGroupInfo(num_rows=head.num_rows, first_row=self._rows, total_byte_size=0, stats=self._stats.of_rows(head))
        )
        self._rows += head.num_rows

    def close(self) -> SegmentFile | None:
        with translated("write", f"{self.io.uri}/{self.path}"):
            if self._pending_rows:
                self._flush(self._pending_rows, last=True)
            if self._writer is None:
                return None
            self._writer.close()
            self._sink.close()
        md = self._writer.writer.metadata
        sizes = [
            sum(md.row_group(i).column(j).total_compressed_size for j in range(md.num_columns)) for i in range(md.num_row_groups)
        ]
        row_groups = tuple(
            rg.model_copy(update={"total_byte_size": size, "stats": self._stats.of_footer(md, i, rg.stats)})
            for i, (rg, size) in enumerate(zip(self._row_groups, sizes))
        )
        size_bytes = md.serialized_size + sum(sizes)
        if self._index is not None:
            self._index.write(self.io, self.path)
        return SegmentFile(
            id=self.segment_id,
            path=self.path,
            num_rows=self._rows,
            size_bytes=size_bytes,
            row_groups=row_groups,
            footer_crc32=footer_crc32(md),
        )

    def abort(self) -> None:
        """Remove what was written.

        Closing may fail the way the write did (a full disk): the file goes either way, and the
        caller sees the write's own error."""
        if self._sink is not None:  # the file exists, though its writer may not (it failed to start)
            try:
                if self._writer is not None:
                    self._writer.close()
                self._sink.close()
            except Exception:
                pass
            finally:
                self.io.delete([self.path, *([index_path(self.path)] if self._index is not None else [])])


PARALLEL_MIN_ROWS = 500_000  # below this a second file costs more (open, footer, plan) than it saves


def write_segments(
    io: FileIO,
    data: pa.Table,
    *,
    row_group_rows: int,
    workers: int | None = None,
    min_rows_per_segment: int | None = None,
    max_rows_per_segment: int | None = None,
    primary_key: Sequence[str] = (),
    intent: WriteIntent | None = None,
) -> list[SegmentFile]:
    """Write ``data`` as one segment per worker, encoded in parallel.

    With a ``primary_key``, each segment with its key index; files named after ``intent``.

    Parquet encoding and compression run in pyarrow with the GIL released, so ``workers``
    threads (default: one per core) each writing their own segment use every core; data is
    split only into parts of at least two row groups and ``min_rows_per_segment`` rows
    (default ``PARALLEL_MIN_ROWS``; small appends stay one segment, and one file). Rows
    keep their order: segment ``i`` holds slice ``i``. If any writer fails, every file
    written so far is removed before the error propagates."""
    n = data.num_rows
    if n == 0:
        return []
    min_rows = PARALLEL_MIN_ROWS if min_rows_per_segment is None else min_rows_per_segment
    parts = max(1, min(workers or default_workers(), n // max(2 * row_group_rows, min_rows, 1)))
    if max_rows_per_segment:
        parts = max(parts, -(-n // max_rows_per_segment))
    step = -(-n // parts)
    # Row-group aligned slices, so that a split adds no short row group.
    step = -(-step // row_group_rows) * row_group_rows if n > row_group_rows else step
    slices = [data.slice(start, step) for start in range(0, n, step)]
    writers = [
        SegmentWriter(
            io, data.schema, row_group_rows=row_group_rows, primary_key=primary_key, total_rows=part.num_rows, intent=intent
        )
        for part in slices
    ]

    def write_one(i: int) -> SegmentFile | None:
        writers[i].write(slices[i])
        return writers[i].close()

    try:
        done = list(ordered_map(write_one, range(len(slices)), workers=min(parts, len(slices))))
    except BaseException:
        for w in writers:
            w.abort()
        raise
    return [seg for seg in done if seg is not None]


def open_source(io: FileIO, path: str) -> tuple[Any, str]:
    """(the segment file ``path`` opened for random access, its full name for errors).

    Raises:
        FilesMissingError: the file is gone."""
    fs, base = io.arrow()
    try:
        with translated("read", f"{io.uri}/{path}"):
            source = fs.open_input_file(f"{base}/{path}")
    except FileNotFoundError:
        raise FilesMissingError(
            f"segment file {path} of {io.uri} is gone: vacuum removed it (the version is older than the retention "
            "window) or it was deleted by hand"
        ) from None
    return source, f"{io.uri}/{path}"


def open_parquet(
    io: FileIO,
    path: str,
    *,
    row_groups: Sequence[int] | None = None,
    columns: Sequence[str] | None = None,
    footer_crc32: int | None = None,
    schema: pa.Schema | None = None,
) -> SegmentParquetFile:
    """Open a segment for reading, its footer and every page it reads checked against their checksums.

    The footer is checked against ``footer_crc32`` (the descriptor's; None for a segment written
    without checksums), every page against its page checksum (``segment_checks``). With
    ``row_groups`` the low-cardinality string columns (see ``dictionary_columns``) among ``columns``
    (None = all) are read as dictionaries; ``read_row_groups`` turns them back into plain strings
    after the deletion filter.

    ``schema`` (the table schema being read, with its field ids) makes the file read by field id:
    ``columns`` then name table columns, and reads hand back the table's names and types
    (``schema_evolution.projection``). Without it, columns are the file's own.

    Raises:
        FilesMissingError: the file is gone.
        CorruptSegmentError: its footer is damaged (the message names the file).
    """
    source, where = open_source(io, path)
    metadata = read_footer(source, path=where, expected_crc32=footer_crc32)
    try:
        checked = footer_crc32 is not None and segment_checks.VERIFY
        remote = not isinstance(io, LocalFileIO)
        pf = SegmentParquetFile(source, metadata=metadata, as_dictionary=(), where=where, checked=checked, remote=remote)
        projection = resolve(pf.schema_arrow, schema) if schema is not None else None
        pf.projection = projection
        if row_groups is None:
            return pf
        physical = projection.physical_columns(columns) if projection is not None else columns
        as_dictionary = dictionary_columns(metadata, pf.schema_arrow, row_groups, physical)
        if not as_dictionary:
            return pf
        pf = SegmentParquetFile(
            source, metadata=metadata, as_dictionary=as_dictionary, where=where, checked=checked, remote=remote
        )
        pf.projection = projection
        return pf
    except Exception as exc:
        if is_decode_error(exc):
            raise corrupt_segment(where, exc) from None
        raise


# A string column chunk is read as a dictionary when its dictionary page is at most this
# many bytes and at most 1/_DICTIONARY_SHARE of the chunk: then (nearly) every data page
# is dictionary-encoded. A chunk whose dictionary overflowed (pyarrow falls back to plain
# pages past 1 MiB of dictionary, e.g. free text) has a large dictionary page and is read
# as plain strings: building a dictionary from plain pages would be several times slower.
_DICTIONARY_PAGE_BYTES = 64 * 1024
_DICTIONARY_SHARE = 16


def segment_projection(io: FileIO, segment: SegmentLike, schema: pa.Schema) -> ReadProjection | None:
    """How ``segment`` reads under table schema ``schema`` by field id; None when its file already has that schema.

    Reads the footer only (checked against the log's checksum). For readers that hand files to
    another engine (DuckDB, Spark's Parquet reader), which match columns by name.

    Raises:
        FilesMissingError: the file is gone.
        CorruptSegmentError: its footer is damaged."""
    pf = open_parquet(io, segment.path, footer_crc32=segment.footer_crc32)
    return resolve(pf.schema_arrow, schema)


def dictionary_columns(
    metadata: pq.FileMetaData, schema: pa.Schema, row_groups: Sequence[int], columns: Sequence[str] | None
) -> list[str]:
    """The ``string``/``binary`` columns worth decoding as dictionaries.

    Parquet's dictionary decoder for plain strings appends value by value (SF-1 lineitem:
    ~40 ns per value, the four flag/mode columns were 45% of ``pq.read_table`` on one
    core); decoding the indices and casting the dictionary array to strings is a gather,
    2.5x cheaper, and the deletion filter in between moves int32 indices instead of
    strings. Only top-level columns (nested ones keep their type)."""
    wanted = set(schema.names if columns is None else columns)
    out = []
    for j in range(metadata.num_columns):
        path = metadata.schema.column(j).path
        if path not in wanted or "." in path:
            continue
        idx = schema.get_field_index(path)
        if idx < 0 or not (pa.types.is_string(schema.field(idx).type) or pa.types.is_binary(schema.field(idx).type)):
            continue
        if all(_dictionary_encoded(metadata.row_group(i).column(j)) for i in row_groups):
            out.append(path)
    return out


def _dictionary_encoded(chunk: pq.ColumnChunkMetaData) -> bool:
    if not chunk.has_dictionary_page or chunk.dictionary_page_offset is None:
        return False
    dictionary_bytes = chunk.data_page_offset - chunk.dictionary_page_offset
    return 0 < dictionary_bytes <= min(_DICTIONARY_PAGE_BYTES, max(chunk.total_compressed_size // _DICTIONARY_SHARE, 4096))


# One read call covers at most this many rows when a caller asks for grouped reads: a
# whole SF-1 segment (1M rows) in one ``read_row_groups``/``filter`` pair, yet a bound on
# what one call holds in memory for segments of many millions of rows.
DEFAULT_READ_ROWS = 1 << 20


def read_row_groups(
    pf: pq.ParquetFile,
    segment: SegmentLike,
    indices: Sequence[int],
    columns: Sequence[str] | None,
    *,
    keep: np.ndarray | None,
    use_threads: bool = False,
    keep_dictionary: Collection[str] = (),
) -> pa.Table:
    """Several row groups of one segment decoded in one call, deleted rows dropped with one filter.

    ``keep`` covers the row groups laid end to end; None keeps all.

    ``use_threads`` decodes columns in parallel: right for the Python API, wrong on a Spark
    executor, which already runs one task per core. Columns in ``keep_dictionary`` that
    this file reads as dictionaries are handed back as dictionaries (no per-row string
    copy, for consumers such as DuckDB that ingest dictionaries cheaply).

    Raises:
        CorruptSegmentError: The row groups hold another number of rows than the log says."""
    where = getattr(pf, "where", segment.path)
    projection: ReadProjection | None = getattr(pf, "projection", None)
    physical = projection.physical_columns(columns) if projection is not None else columns
    table = pf.read_row_groups(list(indices), columns=list(physical) if physical is not None else None, use_threads=use_threads)
    expected = sum(segment.row_groups[i].num_rows for i in indices)
    if table.num_rows != expected:
        raise CorruptSegmentError(where, f"row groups {list(indices)} have {table.num_rows} rows, the log says {expected}")
    if keep is not None:
        table = table.filter(pa.array(keep, type=pa.bool_()))
    as_dictionary = getattr(pf, "as_dictionary", None)
    if as_dictionary and keep_dictionary:
        kept = {projection.physical_name(n) for n in keep_dictionary} if projection is not None else set(keep_dictionary)
        as_dictionary = as_dictionary.difference(kept)
    if as_dictionary:
        table = _decode_dictionaries(table, as_dictionary)
    return projection.conform(table, columns) if projection is not None else table


def _decode_dictionaries(table: pa.Table, as_dictionary: frozenset[str]) -> pa.Table:
    """Columns read as dictionaries (``open_parquet``) back to plain strings.

    A ``take`` of each chunk's dictionary by its indices, without the bounds check a ``cast`` makes
    on every index (the Parquet reader made them from the file's own dictionary page; the check was
    ~2% of a whole-table scan's CPU)."""
    for i, field in enumerate(table.schema):
        if field.name in as_dictionary and pa.types.is_dictionary(field.type):
            chunks = [pc.take(chunk.dictionary, chunk.indices, boundscheck=False) for chunk in table.column(i).chunks]
            plain = pa.chunked_array(chunks, type=field.type.value_type)
            table = table.set_column(i, field.with_type(field.type.value_type), plain)
    return table


class SegmentParquetFile(pq.ParquetFile):
    """A ``ParquetFile`` whose reads decode only bytes that passed their page checksums, in the table's own types.

    A segment written with checksums (``checked``) is not decoded from the file: each read
    takes the column chunks it needs into memory, checks every page's CRC-32
    (``page_checks.read_checked``), then decodes them from there. A segment written before
    checksums has none to check and is decoded from the file, as pyarrow reads any Parquet.

    It remembers where it is (``where``, for errors) and which plain string columns it reads as
    dictionaries, so that ``read_row_groups`` can hand back the table's own types."""

    def __init__(
        self,
        source: Any,
        *,
        metadata: pq.FileMetaData,
        as_dictionary: Sequence[str],
        where: str,
        checked: bool,
        remote: bool = False,
    ) -> None:
        super().__init__(
            source,
            pre_buffer=not checked,
            metadata=metadata,
            read_dictionary=list(as_dictionary) or None,
        )
        self.source = source
        self.checked = checked
        self.remote = remote
        self.as_dictionary = frozenset(as_dictionary)
        self.where = where
        self.projection: ReadProjection | None = None  # set by open_parquet when it reads by field id
        self._lock = threading.Lock()

    def _checked_bytes(self, row_groups: Iterable[int], columns: Sequence[str] | None) -> pq.ParquetFile | None:
        """What decodes a read of ``row_groups`` × ``columns`` from its checked bytes; None: the file itself."""
        if not self.checked:
            return None
        data = page_checks.read_checked(
            self.source, self.metadata, row_groups, columns, where=self.where, lock=self._lock, remote=self.remote
        )
        return pq.ParquetFile(
            pa.BufferReader(data), metadata=self.metadata, read_dictionary=list(self.as_dictionary) or None, pre_buffer=False
        )

    def read_row_groups(
        self, row_groups: Sequence[int], columns: Sequence[str] | None = None, use_threads: bool = True, **kwargs: Any
    ) -> pa.Table:
        """``ParquetFile.read_row_groups``; damaged bytes raise ``CorruptSegmentError``."""
        try:
            checked = self._checked_bytes(row_groups, columns)
            if checked is None:
                table = super().read_row_groups(row_groups, columns=columns, use_threads=use_threads, **kwargs)
            else:
                table = checked.read_row_groups(row_groups, columns=columns, use_threads=use_threads, **kwargs)
        except Exception as exc:
            if is_decode_error(exc):
                raise corrupt_segment(self.where, exc) from None
            raise
        if self.as_dictionary:
            self._check_indices(table)
        return table

    def _check_indices(self, table: pa.Table) -> None:
        """Every dictionary index within its dictionary.

        Parquet hands dictionary-read columns back without checking their indices against the
        dictionary page's size, which sits in the page header (outside the page checksum): a flipped
        bit there makes indices point past the dictionary, and the unchecked gather in
        ``_decode_dictionaries`` (or any consumer of the dictionaries) would read memory that is not
        the column's. One vectorised ``max`` per chunk rules it out.

        Raises:
            CorruptSegmentError: an index past its dictionary."""
        for name in self.as_dictionary:
            i = table.schema.get_field_index(name)
            if i < 0 or not pa.types.is_dictionary(table.schema.field(i).type):
                continue
            for chunk in table.column(i).chunks:
                top = pc.max(chunk.indices).as_py() if len(chunk) else None
                if top is not None and top >= len(chunk.dictionary):
                    raise CorruptSegmentError(
                        self.where,
                        f"the file is damaged: column {name!r} refers to dictionary entry {top} of {len(chunk.dictionary)}",
                    )

    def read(self, columns: Sequence[str] | None = None, use_threads: bool = True, **kwargs: Any) -> pa.Table:
        """``ParquetFile.read``; damaged bytes raise ``CorruptSegmentError``.

        Read by field id (``open_parquet(schema=…)``), ``columns`` names table columns."""
        try:
            physical = self.projection.physical_columns(columns) if self.projection is not None else columns
            checked = self._checked_bytes(range(self.metadata.num_row_groups), physical)
            if checked is None:
                table = super().read(columns=physical, use_threads=use_threads, **kwargs)
            else:
                table = checked.read(columns=physical, use_threads=use_threads, **kwargs)
            return self.projection.conform(table, columns) if self.projection is not None else table
        except Exception as exc:
            if is_decode_error(exc):
                raise corrupt_segment(self.where, exc) from None
            raise


def row_positions(segment: SegmentLike, indices: Sequence[int]) -> np.ndarray:
    """File positions (``int64``) of every row of the row groups, laid end to end."""
    total = sum(segment.row_groups[i].num_rows for i in indices)
    return positions_at(segment, indices, np.arange(total, dtype=np.int64))


def positions_at(segment: SegmentLike, indices: Sequence[int], offsets: np.ndarray) -> np.ndarray:
    """File positions of the rows at ``offsets`` (sorted, ``int64``) into the row groups laid end to end.

    No per-row array of positions for a handful of hits."""
    rgs = [segment.row_groups[i] for i in indices]
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(rgs) == 1 or all(b.first_row == a.first_row + a.num_rows for a, b in pairwise(rgs)):
        return offsets + rgs[0].first_row
    ends = np.cumsum([rg.num_rows for rg in rgs], dtype=np.int64)
    which = np.searchsorted(ends, offsets, side="right")
    starts = ends - np.array([rg.num_rows for rg in rgs], dtype=np.int64)
    firsts = np.array([rg.first_row for rg in rgs], dtype=np.int64)
    return offsets - starts[which] + firsts[which]


def repeated_string(value: str, count: int) -> pa.Array:
    """``value`` ``count`` times as a ``string`` array, built from its buffers.

    A ``take`` of a one-element array walks every row, this is one ``bytes`` repeat and an
    ``arange``."""
    data = value.encode("utf-8")
    if count == 0 or not data:
        return pa.array([value] * count, pa.string())
    if len(data) * count >= 2**31:  # int32 offsets: split into chunks that fit
        per = (2**31 - 1) // len(data)
        return pa.concat_arrays([repeated_string(value, min(per, count - s)) for s in range(0, count, per)])
    offsets = np.arange(0, (count + 1) * len(data), len(data), dtype=np.int32)
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data * count))


def with_row_address(table: pa.Table, segment: SegmentLike, indices: Sequence[int], keep: np.ndarray | None) -> pa.Table:
    """Append the address columns (segment id, file position) of the rows ``table`` kept.

    Built after the deletion filter, so deleted rows cost nothing here."""
    positions = row_positions(segment, indices)
    if keep is not None:
        positions = positions[keep]
    table = table.append_column(ROW_ADDRESS_SEGMENT, repeated_string(segment.id, len(positions)))
    return table.append_column(ROW_ADDRESS_ROW, pa.array(positions))


def iter_segment(
    io: FileIO,
    segment: SegmentLike,
    row_groups: Sequence[int],
    columns: Sequence[str] | None,
    *,
    masks: MaskSource | None = None,
    row_address: bool = False,
    use_threads: bool = False,
    read_rows: int | None = None,
    keep_dictionary: Collection[str] = (),
    schema: pa.Schema | None = None,
) -> Iterator[pa.Table]:
    """The live rows of ``row_groups``, one table per read call.

    By default one row group per call (a Spark task streams with little memory). With
    ``read_rows`` consecutive row groups of up to that many rows in all are decoded in one
    call and filtered with one mask: fewer, larger calls, and the decode of one call runs
    on all cores when ``use_threads`` is set. Row groups whose rows are all deleted are
    never read. ``schema``: the table schema read, by field id (see ``open_parquet``)."""
    pf = open_parquet(io, segment.path, row_groups=row_groups, columns=columns, footer_crc32=segment.footer_crc32, schema=schema)
    for run, keep in read_runs(segment, row_groups, masks, read_rows=read_rows):
        table = read_row_groups(pf, segment, run, columns, keep=keep, use_threads=use_threads, keep_dictionary=keep_dictionary)
        if row_address:
            table = with_row_address(table, segment, run, keep)
        yield table


def read_runs(
    segment: SegmentLike, row_groups: Sequence[int], masks: MaskSource | None, *, read_rows: int | None
) -> Iterator[tuple[list[int], np.ndarray | None]]:
    """Group the row groups to read into calls of at most ``read_rows`` rows, each with its keep-mask.

    A larger row group goes alone; ``read_rows`` None means one row group per call. The keep-mask
    covers the group's rows laid end to end (None = nothing deleted). Fully deleted row groups are
    left out."""
    run: list[int] = []
    parts: list[np.ndarray | None] = []
    rows = 0
    for i in row_groups:
        rg = segment.row_groups[i]
        keep = masks.keep_mask(rg.first_row, rg.num_rows) if masks is not None else None
        if keep is not None and not keep.any():
            continue  # every row deleted: not even read
        if run and (read_rows is None or rows + rg.num_rows > read_rows):
            yield run, _join_masks(run, parts, segment)
            run, parts, rows = [], [], 0
        run.append(i)
        parts.append(keep)
        rows += rg.num_rows
    if run:
        yield run, _join_masks(run, parts, segment)


def _join_masks(run: Sequence[int], parts: Sequence[np.ndarray | None], segment: SegmentLike) -> np.ndarray | None:
    if all(p is None for p in parts):
        return None
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(
        [p if p is not None else np.ones(segment.row_groups[i].num_rows, dtype=bool) for i, p in zip(run, parts)]
    )


class MaskSource(Protocol):
    """What ``iter_segment`` needs from a deletion vector.

    The rows of one range to keep, or ``None`` when none of them is deleted."""

    def keep_mask(self, start: int, count: int) -> np.ndarray | None: ...


class SegmentLike(Protocol):
    """What reading needs of a segment.

    A ``SegmentFile`` from a commit or a snapshot's ``SegmentDescriptor`` (row groups with
    ``first_row`` and ``num_rows``). Read-only members, so both (frozen, with their own row-group
    types) match."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def row_groups(self) -> Sequence[Any]: ...
    @property
    def footer_crc32(self) -> int | None: ...


def check_footers(io: FileIO, segments: Sequence[Any], *, workers: int = 8) -> None:
    """Check the footers of ``segments`` (descriptors with ``path`` and ``footer_crc32``) against the log, a few files at a time.

    For readers that decode the files themselves (Spark's Parquet reader behind
    ``read_native``/``create_view``): they verify page checksums but trust the footer,
    whose statistics skip row groups and whose column names bind columns, so a damaged
    footer would be read as a smaller table or a column of nulls. Checked when the
    DataFrame is made.

    Raises:
        CorruptSegmentError: a footer that is not the one the log recorded (naming the file).
        FilesMissingError: a file is gone.
    """
    checked = [seg for seg in segments if seg.footer_crc32 is not None]

    def one(seg: Any) -> None:
        source, where = open_source(io, seg.path)
        with source:
            segment_checks.read_footer(source, path=where, expected_crc32=seg.footer_crc32)

    for _ in ordered_map(one, checked, workers=min(workers, max(1, len(checked)))):
        pass
