"""Spark's side of streaming and the change feed: thin classes over ``connector.streaming``.

What Spark 4.3 does with them (checked in pyspark's workers and the JVM classes):

* The stream reader lives in one long-lived driver process per query, which calls
  ``initialOffset``/``latestOffset``/``partitions``/``commit`` in turn, so the
  ``StreamSource`` it holds (the walked log, the pin) persists between micro-batches.
  Another instance is made and pickled for the executors' ``read``: the constructor only
  keeps options, and the source is built on first use.
* When the query ends (finished, stopped, failed) ``stop()`` releases the source's pin. The
  JVM ends the runner process with SIGTERM rather than asking it to stop, so the reader
  turns that signal into the exit that runs PySpark's ``finally: reader.stop()``
  (``RunnerExit``).
* ``latestOffset(start, limit)`` gets ``ReadAllAvailable`` for ``Trigger.Once`` and our
  own default limit otherwise; ``ReadMaxRows`` names its field ``max_rows``. The limits
  are taken from the options, so ``maxRowsPerTrigger`` and ``maxBytesPerTrigger`` apply
  together.
* The stream writer is created anew in every process of every batch (planning, then a
  fresh worker for ``commit(messages, batchId)``): creating one has no side effects, and
  the query's id is read at commit time from ``<checkpointLocation>/metadata``.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from mvtable.errors import InvalidOptionError, MvTableError, VersionNotFoundError
from mvtable.lineage.log import CommitLog
from mvtable.storage import open_file_io

from .. import writes
from ..options import ReadOptions, StreamWriteOptions
from ..pinning import pin_version
from ..post_commit import open_log
from ..schema import schema_from_json, schema_to_json
from ..streaming import (
    ChangeUnit,
    Position,
    SourceOptions,
    StreamSource,
    commit_batch,
    plan_batch,
    query_app_id,
    read_unit,
)
from ..streaming.changes import plan_changes, schema_key
from ..streaming.sink import abort_batch, check_app_id, query_segment_prefix, remove_unfinished_batches
from ..streaming.source import parse_offset
from ..streaming.walker import first_version_since
from ..timeparse import parse_timestamp_ms
from .arrow_types import write_schema
from .reader import conform_batch, is_placeholder, unbound_read_columns
from .writer import SegmentsWritten, written_segments


@dataclass
class ChangePartition(InputPartition):
    units: list[ChangeUnit]
    columns: list[str]  # the table columns to read, as the table names them
    table_schema: dict[str, Any] | None  # the schema read under: segments resolve columns by its field ids
    primary_key: tuple[str, ...]  # the key under that schema (an old upsert may name a renamed key)

    def __init__(
        self,
        units: list[ChangeUnit],
        *,
        columns: list[str],
        table_schema: dict[str, Any] | None = None,
        primary_key: tuple[str, ...] = (),
    ) -> None:
        self.units = units
        self.columns = columns
        self.table_schema = table_schema
        self.primary_key = primary_key


def pack(
    units: Sequence[ChangeUnit],
    *,
    max_bytes: int,
    columns: list[str],
    table_schema: dict[str, Any] | None = None,
    primary_key: tuple[str, ...] = (),
) -> list[ChangePartition]:
    """Consecutive units into partitions of at most ``max_bytes`` (one unit alone may be more)."""
    parts: list[list[ChangeUnit]] = []
    size = 0
    for unit in units:
        if not parts or (parts[-1] and size + unit.bytes > max_bytes):
            parts.append([])
            size = 0
        parts[-1].append(unit)
        size += unit.bytes
    return [ChangePartition(p, columns=columns, table_schema=table_schema, primary_key=primary_key) for p in parts]


def read_partition(opts: ReadOptions, schema: StructType, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Executor side of every change/stream read: the partition's units as Arrow batches of the Spark schema."""
    if is_placeholder(partition):  # no version in the range changed a row
        return
    if not isinstance(partition, ChangePartition):
        raise TypeError(f"the mvtable change reader was handed a {type(partition).__name__}, not a partition it planned")
    target = to_arrow_schema(schema, timezone="UTC")
    io = open_file_io(opts.path, opts.storage_options)
    by_id = schema_from_json(partition.table_schema) if partition.table_schema is not None else None
    for unit in partition.units:
        for table in read_unit(
            io,
            unit,
            columns=partition.columns,
            with_meta=opts.read_change_feed,
            schema=by_id,
            primary_key=partition.primary_key,
        ):
            if table.column_names != target.names:
                # a .schema() may name a few change columns, in any order: by name, not position
                at = {n.lower(): i for i, n in enumerate(table.column_names)}
                table = table.select([at[n.lower()] for n in target.names])
            for batch in table.to_batches():
                yield conform_batch(batch, target)


def feed_start(commit_log: CommitLog, opts: ReadOptions) -> int:
    """The first version a batch change feed reads.

    That is ``startingVersion`` (checked by ``plan_changes``), or the first version
    committed at or after ``startingTimestamp`` whose changes can still be read. A timestamp
    after the range is refused naming the option, as Delta does ("The provided timestamp …
    is after the latest version available"), rather than as a range of versions the user
    never gave.

    Raises:
        InvalidOptionError: ``startingTimestamp`` is malformed, after the newest version, or after
            ``endingVersion``.
        VersionNotFoundError: No version at or after ``startingTimestamp`` can still be read."""
    if opts.starting_version_number is not None:
        return opts.starting_version_number
    given = opts.starting_timestamp
    since_ms = parse_timestamp_ms(given, option="startingTimestamp")
    listing = commit_log.listing()
    latest = commit_log.snapshot(listing=listing)
    start = first_version_since(listing, latest, since_ms)
    if start > latest.version and since_ms <= latest.timestamp_ms:
        raise VersionNotFoundError(
            f"startingTimestamp {given!r}: the changes of every version since were garbage-collected "
            f"(the log keeps only what version {latest.version} itself needs); the next commit's changes will be readable"
        )
    if start > latest.version:
        stamp = dt.datetime.fromtimestamp(latest.timestamp_ms / 1000, tz=dt.timezone.utc).isoformat()
        raise InvalidOptionError(
            f"startingTimestamp {given!r} is after the latest version available (version {latest.version}, "
            f"committed at {stamp}); give a timestamp at or before {stamp}"
        )
    if opts.ending_version is not None and start > opts.ending_version:
        raise InvalidOptionError(
            f"startingTimestamp {given!r} starts at version {start} (the first committed at or after it whose "
            f"changes can still be read), after endingVersion {opts.ending_version}; give an earlier timestamp "
            "or a later endingVersion"
        )
    return start


class ChangeFeedReader(DataSourceReader):
    """``spark.read.option("readChangeFeed", "true")``: the changes of a range of versions."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        columns = unbound_read_columns(self.schema, self.opts)
        io = open_file_io(self.opts.path, self.opts.storage_options)
        start = feed_start(open_log(io), self.opts)
        pin_version(io, max(start - 1, 0), owner="change feed")  # the first diff's base; expires by itself (pinTtl)
        full, units = plan_changes(io, start, self.opts.ending_version, names=("startingVersion", "endingVersion"))
        stored = schema_to_json(full.with_metadata(None))  # with its field ids
        return pack(
            units, max_bytes=self.opts.max_partition_bytes, columns=columns, table_schema=stored, primary_key=schema_key(full)
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, self.schema, partition)


class MvTableStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("mvtable")``: the rows new versions append, in version order.

    With ``readChangeFeed`` it reads every change instead."""

    def __init__(self, opts: ReadOptions, schema: StructType, *, columns: list[str]) -> None:
        self.opts = opts
        self.schema = schema
        self.columns = columns  # ``unbound_read_columns``
        self._source: StreamSource | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_source": None}

    @property
    def source(self) -> StreamSource:
        if self._source is None:
            o = self.opts
            self._source = StreamSource(
                open_file_io(o.path, o.storage_options),
                SourceOptions(
                    starting_version=o.starting_version_number,
                    starting_latest=o.starting_version == "latest",
                    starting_timestamp_ms=(
                        parse_timestamp_ms(o.starting_timestamp, option="startingTimestamp") if o.starting_timestamp else None
                    ),
                    max_rows=o.max_rows_per_trigger,
                    max_bytes=o.max_bytes_per_trigger,
                    skip_change_commits=o.skip_change_commits,
                    change_feed=o.read_change_feed,
                ),
            )
            RunnerExit.install()  # the source holds a pin from now on: stop() must run
        return self._source

    def _position(self, offset: dict) -> Position:
        return parse_offset(offset, table_id=self.source.table_id)

    def initialOffset(self) -> dict:
        return self.source.initial_position().to_offset(self.source.table_id)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_rows_per_trigger is not None:
            return ReadMaxRows(self.opts.max_rows_per_trigger)
        if self.opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        end = self.source.latest_position(self._position(start), limited=not isinstance(limit, ReadAllAvailable))
        return end.to_offset(self.source.table_id)

    def prepareForTriggerAvailableNow(self) -> None:
        self.source.prepare_available_now()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        units = self.source.units_between(self._position(start), self._position(end))
        return pack(
            units,
            max_bytes=self.opts.max_partition_bytes,
            columns=self.columns,
            table_schema=self.source.table_schema,
            primary_key=self.source.primary_key,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, self.schema, partition)

    def commit(self, end: dict) -> None:
        self.source.committed(self._position(end))

    def stop(self) -> None:
        """The query has terminated (finished, stopped or failed): release the stream's pin.

        GC and vacuum then need not wait ``pinTtl`` for it. PySpark calls this in the
        driver's stream runner, in a ``finally`` around the loop that serves the JVM's calls
        (see ``RunnerExit`` for how the end of a query gets there), so it also runs after an
        error and when the source was never built: nothing to release then, and nothing is
        built for it. Twice is fine."""
        RunnerExit.begin_stop()
        if self._source is not None:
            self._source.close()


class RunnerExit:
    """Makes the end of a query reach ``stop()`` in PySpark's stream runner process.

    PySpark calls ``reader.stop()`` in a ``finally`` around the loop that serves the JVM
    (pyspark/sql/streaming/python_streaming_source_runner.py), but when the query ends the
    JVM does not tell that loop to end: ``PythonStreamingSourceRunner.stop()`` has the
    worker factory ``destroy()`` the process, a SIGTERM (two in quick succession, seen
    with strace), whose default action ends Python without running any ``finally``; the
    stream's pin would then block GC and vacuum for ``pinTtl``.

    So in that process alone (its ``__main__``), and only if nobody else handles SIGTERM
    there, the first SIGTERM becomes ``SystemExit``: the ``finally`` runs ``stop()`` and
    the process ends right after. Once stopping (by that signal, or by ``stop()`` after the
    JVM closed the socket) further SIGTERMs are ignored, so they cannot cut the pin's
    release short, and an alarm ends the process if stopping takes more than
    ``STOP_WITHIN_S`` (storage that hangs). Anywhere else (a user's process, a PySpark that
    runs the reader elsewhere) nothing changes, and a pin left behind expires by itself."""

    RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
    STOP_WITHIN_S = 30
    installed = False
    stopping = False

    @classmethod
    def install(cls) -> None:
        if cls.installed:
            return
        main = sys.modules.get("__main__")
        if getattr(getattr(main, "__spec__", None), "name", None) != cls.RUNNER:
            return
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works in the main thread only
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else's handler: theirs to run
        signal.signal(signal.SIGTERM, cls._on_sigterm)
        cls.installed = True

    @classmethod
    def _on_sigterm(cls, signum: int, frame: FrameType | None) -> None:
        if cls.stopping:
            return  # on the way out already
        cls.begin_stop()
        raise SystemExit(128 + signum)

    @classmethod
    def begin_stop(cls) -> None:
        """The process is about to stop the reader and exit: from now on SIGTERM waits.

        The alarm bounds how long. Nothing where ``install`` did not install."""
        if cls.installed and not cls.stopping:
            cls.stopping = True
            signal.alarm(cls.STOP_WITHIN_S)


class RefusedStreamReader(DataSourceStreamReader):
    """The reader of a stream whose options or schema are wrong: raises their error from the first method Spark calls.

    Raised by ``streamReader()`` itself, the error would be followed by PySpark's
    ``UnboundLocalError: … 'reader'``, because its stream runner calls ``reader.stop()`` in
    a ``finally`` around that call (pyspark/sql/streaming/python_streaming_source_runner.py)."""

    def __init__(self, error: MvTableError) -> None:
        self.error = error

    def initialOffset(self) -> dict:
        raise self.error

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        raise self.error

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self.error


class MvTableStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("mvtable")``: each micro-batch one commit, exactly once."""

    def __init__(self, opts: StreamWriteOptions, schema: StructType, *, complete: bool) -> None:
        self.opts = opts
        incoming = write_schema(schema)
        plan = plan_batch(
            opts.path,
            storage_options=opts.storage_options,
            incoming=incoming,
            complete=complete,
            properties=opts.properties,
            merge_schema=opts.merge_schema,
            partition_by=opts.partition_by,
        )
        # the query's files carry its prefix, so that a later commit can tell its own
        # uncommitted files (a batch that stop() interrupted) from another writer's
        prefix = query_segment_prefix(self._app_id()) if self._app_id_known() else ""
        self.plan = replace(plan, segment_prefix=prefix)

    def _app_id(self) -> str:
        if self.opts.txn_app_id is not None:
            return check_app_id(self.opts.txn_app_id)
        assert self.opts.checkpoint_location is not None
        return query_app_id(self.opts.checkpoint_location, self.opts.storage_options)

    def _app_id_known(self) -> bool:
        try:
            self._app_id()
        except InvalidOptionError:  # no checkpoint metadata yet: commit() says so, if it still has none
            return False
        return True

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SegmentsWritten:
        return SegmentsWritten(writes.write_data(self.plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.plan, written_segments(messages), app_id=self._app_id(), batch_id=batchId)
        # Spark runs this in a process of its own once the batch's tasks are done and before
        # the next batch starts: what the query wrote and no commit names is left over
        remove_unfinished_batches(open_file_io(self.opts.path, self.opts.storage_options), self.plan.segment_prefix)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_batch(self.plan, written_segments(messages))
