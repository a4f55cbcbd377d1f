"""``TableScan``: a planned, pinned read of one version, and the ways to consume it.

Arrow tables and batches, a streaming ``RecordBatchReader``, a DuckDB relation. It holds storage and
a plan, never a ``Table``."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.errors import InvalidOptionError
from mvtable.storage import FileIO

from .arrow_reader import dictionary_schema, record_batch_reader, split_tasks
from .duckdb_scan import duckdb_relation
from .expressions import referenced_columns
from .parallel import default_workers, ordered_map
from .pinning import PinnedSnapshot
from .scan import ScanPlan, ScanTask, read_task
from .schema import schema_from_json
from .segments import DEFAULT_READ_ROWS, check_footers

if TYPE_CHECKING:
    import duckdb

# Rows per piece of a ``TableScan.to_reader`` stream: one default row group.
READER_CHUNK_ROWS = 1 << 18
# Rows per unit of work of a threaded ``to_tables``/``to_arrow``: half a read call. Per
# segment, one large compacted segment was read on one thread while its deletion filter
# and string casts left the other core idle.
PIECE_ROWS = DEFAULT_READ_ROWS // 2


class TableScan:
    """A planned read of one version. Nothing is read until ``to_arrow``/``to_batches``.

    ``use_threads`` (default on): segments are read in pieces of at most ``PIECE_ROWS``
    rows (``arrow_reader.split_tasks``), each piece decoded in one call on pyarrow's
    threads, by one reader thread per core plus one: a reader waits while pyarrow decodes
    and then filters deleted rows and casts strings on its own, so with one per core a
    core sat idle in those serial steps. Off, the scan reads
    like a Spark task: one row group at a time on the calling thread."""

    def __init__(
        self, io: FileIO, plan: ScanPlan, filter: pc.Expression | None, *, pinned: PinnedSnapshot, use_threads: bool = True
    ) -> None:
        self.io = io
        self.plan = plan
        self.filter = filter
        self.pinned = pinned  # held from planning until a read of the scan ends
        self.use_threads = use_threads
        self._table_schema = schema_from_json(pinned.snapshot.table_schema)  # columns resolve by its field ids
        self._columns = _read_columns(plan, filter, self._table_schema)

    def to_tables(self) -> Iterator[pa.Table]:
        """The rows, a table at a time.

        The version stays pinned until the iteration ends (or is abandoned and garbage-collected);
        reading the scan again pins it again.

        Raises:
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded; the
                message names it.
            VersionNotFoundError: The scan is read again after its pin was released, and the
                version is no longer in the log.
            DeletionVectorNotFoundError: The scan is read again after its pin was released, and the
                version's deletion vectors were collected meanwhile.
            StorageError: The store refused or failed a read (permissions, network).
        """
        if self.pinned.released:
            self.pinned.renew()
        try:
            tasks = list(split_tasks(self.plan.tasks, chunk_rows=PIECE_ROWS)) if self.use_threads else self.plan.tasks
            workers = min(default_workers() + 1, len(tasks)) if self.use_threads else 1
            for tables in ordered_map(self._read, tasks, workers=workers):
                yield from tables
        finally:
            self.release()

    def _read(
        self, task: ScanTask, *, schema: pa.Schema | None = None, keep_dictionary: frozenset[str] = frozenset()
    ) -> list[pa.Table]:
        """One task's output tables (runs on a reader thread when ``use_threads``), cast to ``schema`` (default: the plan's)."""
        schema = self.plan.schema if schema is None else schema
        out = []
        tables = read_task(
            self.io,
            task,
            columns=self._columns,
            predicates=self.plan.predicates,  # pruning skipped row groups; these filter the rows
            row_address=self.plan.row_address,
            use_threads=self.use_threads,
            read_rows=DEFAULT_READ_ROWS if self.use_threads else None,
            keep_dictionary=keep_dictionary,
            schema=self._table_schema,
        )
        for t in tables:
            if self.filter is not None:
                t = t.filter(self.filter)
                if self.plan.columns is not None:
                    t = t.select(schema.names)
            if t.num_rows:
                out.append(t.cast(schema) if t.schema != schema else t)
        return out

    def release(self) -> None:
        """Drop the reader pin now (it also expires by itself after ``pinTtl``).

        Raises:
            StorageError: The store refused or failed to delete the pin file; the pin still
                expires by itself.
        """
        self.pinned.release()

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, a record batch at a time (``to_tables`` split into batches).

        Raises:
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded; the
                message names it.
            VersionNotFoundError: The scan is read again after its pin was released, and the
                version is no longer in the log.
            DeletionVectorNotFoundError: The scan is read again after its pin was released, and the
                version's deletion vectors were collected meanwhile.
            StorageError: The store refused or failed a read (permissions, network).
        """
        for t in self.to_tables():
            yield from t.to_batches()

    def to_arrow(self) -> pa.Table:
        """Every row in one Arrow table.

        Raises:
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded; the
                message names it.
            VersionNotFoundError: The scan is read again after its pin was released, and the
                version is no longer in the log.
            DeletionVectorNotFoundError: The scan is read again after its pin was released, and the
                version's deletion vectors were collected meanwhile.
            StorageError: The store refused or failed a read (permissions, network).
        """
        tables = list(self.to_tables())
        return pa.concat_tables(tables) if tables else self.plan.schema.empty_table()

    def count(self) -> int:
        """How many rows the scan reads (deleted rows and rows ``filter`` drops not counted).

        Raises:
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded; the
                message names it.
            VersionNotFoundError: The scan is read again after its pin was released, and the
                version is no longer in the log.
            DeletionVectorNotFoundError: The scan is read again after its pin was released, and the
                version's deletion vectors were collected meanwhile.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return sum(t.num_rows for t in self.to_tables())

    def to_reader(self, *, chunk_rows: int = READER_CHUNK_ROWS, dictionary_strings: bool = False) -> pa.RecordBatchReader:
        """The scan as a streaming ``pyarrow.RecordBatchReader`` for DuckDB, Polars or any Arrow consumer, deletes applied.

        Memory stays bounded: segments are read in pieces of at most ``chunk_rows`` rows (whole row
        groups), a few pieces at a time.

        ``dictionary_strings=True`` hands the low-cardinality string columns (those the
        segments store dictionary-encoded, e.g. flags and modes) over as
        ``dictionary<int32, string>`` instead of ``string``: the same values, without
        expanding every row's string, and DuckDB ingests a dictionary as its own
        dictionary vector instead of copying strings. Query results are unchanged; the
        Arrow type of those columns is what differs.

        Raises:
            InvalidOptionError: ``chunk_rows`` is not a positive integer or ``dictionary_strings`` not a bool.
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded; the
                message names it.
            VersionNotFoundError: The scan is read again after its pin was released, and the
                version is no longer in the log.
            DeletionVectorNotFoundError: The scan is read again after its pin was released, and the
                version's deletion vectors were collected meanwhile.
            StorageError: The store refused or failed a read (permissions, network).
        """
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise InvalidOptionError(f"chunk_rows must be a positive integer, not {chunk_rows!r}")
        if not isinstance(dictionary_strings, bool):
            raise InvalidOptionError(f"dictionary_strings must be True or False, not {dictionary_strings!r}")
        if self.pinned.released:
            self.pinned.renew()
        workers = default_workers() if self.use_threads else 1
        schema, keep = self.plan.schema, frozenset[str]()
        if dictionary_strings:
            try:
                schema, keep = dictionary_schema(self.io, self.plan.schema, self.plan.tasks, self._columns)
            except BaseException:
                self.release()
                raise
        read = functools.partial(self._read, schema=schema, keep_dictionary=keep)
        return record_batch_reader(schema, self.plan.tasks, read, chunk_rows=chunk_rows, workers=workers, on_close=self.release)

    def to_duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        """The scan as a lazy DuckDB relation of ``con`` that DuckDB reads with its own Parquet reader, deletes applied.

        DuckDB reads the segment files itself (``duckdb_scan``): for DuckDB the fast route, where
        ``to_reader`` pays a pyarrow decode before DuckDB's ingest. Local tables, scans without
        ``filter``/``predicates``/row addresses. The version stays pinned until ``release()`` (or
        the pin's TTL).

        Raises:
            InvalidOptionError: The scan has a ``filter``, ``predicates`` or row addresses, or the table
                is not local (use ``to_reader``).
            CorruptSegmentError: a segment's footer is not the one the log recorded (DuckDB
                verifies no checksums itself, so the footers are checked here, once).
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            StorageError: The store refused or failed a read (permissions, network).
        """
        if self.filter is not None:
            raise InvalidOptionError("to_duckdb takes no filter: put the condition in the query's WHERE")
        if self.pinned.released:
            self.pinned.renew()
        try:
            # DuckDB's reader checks no page CRCs and trusts the footers: the footers are
            # checked against the log here, once (``segment_checks``)
            check_footers(self.io, list({t.segment.id: t.segment for t in self.plan.tasks}.values()))
            return duckdb_relation(con, self.io, self.plan, schema=self._table_schema)
        except BaseException:
            self.release()
            raise


def _read_columns(plan: ScanPlan, filter: pc.Expression | None, schema: pa.Schema) -> list[str] | None:
    """The columns a scan decodes.

    Its projection plus what the filter reads (all of them when the filter refers to a column by
    position)."""
    if plan.columns is None:
        return None
    if filter is None:
        return list(plan.columns)
    needed = referenced_columns(filter, schema)
    if needed is None:
        return None
    return list(plan.columns) + [c for c in needed if c not in plan.columns]
