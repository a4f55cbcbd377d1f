"""The Spark writer: executors write segments, the driver makes one commit."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from mvtable.errors import InvalidOptionError, TableAlreadyExistsError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import open_file_io

from .. import recovery, writes
from ..keys.validate import parse_primary_key
from ..options import WriteOptions
from ..partitions.sql_predicate import parse_replace_where
from ..post_commit import open_log
from ..schema import schema_from_json
from ..scoped_push import ScopeRequest
from ..upsert import require_key
from .arrow_types import write_schema
from .delete_writer import make_delete_writer
from .keyed_writer import KeyedWriter, keep_rewritten

logger = logging.getLogger("mvtable.connector")


@dataclass
class SegmentsWritten(WriterCommitMessage):
    segments: list[SegmentFile] = field(default_factory=list)


class MvTableWriter(DataSourceArrowWriter):
    def __init__(self, plan: writes.WritePlan) -> None:
        self.plan = plan
        self.kept: list[SegmentFile] = []  # a scoped push's copy-on-write, written on the driver

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SegmentsWritten:
        return SegmentsWritten(writes.write_data(self.plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.kept = keep_rewritten(self.plan)
        writes.finish_write(self.plan, [*written_segments(messages), *self.kept])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        writes.abort_write(self.plan, [*written_segments(messages), *self.kept])


def written_segments(messages: list[WriterCommitMessage | None]) -> list[SegmentFile]:
    return [s for m in messages if isinstance(m, SegmentsWritten) for s in m.segments]


class IgnoredWrite(DataSourceArrowWriter):
    """Spark's save mode Ignore where a table exists: the rows are dropped, nothing is written."""

    def __init__(self, path: str, version: int) -> None:
        self.path = path
        self.version = version

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SegmentsWritten:
        for _ in iterator:  # Spark sends the rows all the same; take them so its side ends cleanly
            pass
        return SegmentsWritten()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        logger.info("save mode ignore: a table exists at %s (version %s); nothing was written", self.path, self.version)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


def _scope_request(opts: WriteOptions, incoming: pa.Schema, *, snapshot: Snapshot | None) -> ScopeRequest | None:
    """The scoped push ``replaceWhere`` or ``partitionOverwriteMode=dynamic`` ask for (None: none).

    The SQL predicate is read on the driver, against the table's columns (the data's for a
    table this write creates).

    Raises:
        InvalidOptionError: the predicate cannot be read, or both options are given."""
    return scope_request(
        opts.replace_where,
        dynamic=opts.partition_overwrite_mode == "dynamic",
        incoming=incoming,
        snapshot=lambda: (
            snapshot if snapshot is not None else writes.load_snapshot(open_log(open_file_io(opts.path, opts.storage_options)))
        ),
    )


def scope_request(
    replace_where: str | None, *, dynamic: bool, incoming: pa.Schema, snapshot: Callable[[], Snapshot]
) -> ScopeRequest | None:
    """The scoped push a Spark write's ``replaceWhere`` (SQL) or dynamic partition overwrite asks for (None: none).

    Shared by a single Spark write and a transaction's ``tx.write``. ``snapshot`` reads the
    table, only when the predicate needs its columns.

    Raises:
        InvalidOptionError: the predicate cannot be read, or both options are given."""
    if replace_where is None and not dynamic:
        return None
    if replace_where is not None and dynamic:
        raise InvalidOptionError("replaceWhere and partitionOverwriteMode=dynamic both say what a push replaces: give one")
    if dynamic:
        return ScopeRequest(dynamic=True)
    read = snapshot()
    columns = schema_from_json(read.table_schema) if read.exists else incoming
    return ScopeRequest(predicate=parse_replace_where(replace_where or "", columns), predicate_text=replace_where)


def make_writer(opts: WriteOptions, schema: StructType, *, overwrite: bool) -> DataSourceArrowWriter:
    """The writer of one DataFrame write.

    ``opts.save_mode`` is Spark's ErrorIfExists or Ignore, which Spark 4.3 never hands a
    Python source itself (``mvtable.spark_save`` passes it as an option and asks Spark for
    an append): a table that exists is refused or left alone, and where none exists the
    append creates it, refusing at commit a table created meanwhile. A delete or upsert
    acts on an existing table whatever the save mode says.

    Raises:
        TableAlreadyExistsError: The table exists and the save mode is ErrorIfExists.
        InvalidOptionError: The options conflict (an upsert not in append mode, say)."""
    snapshot = None
    if opts.save_mode is not None and opts.operation == "write" and not overwrite:
        snapshot = writes.load_snapshot(open_log(open_file_io(opts.path, opts.storage_options)))
        if snapshot.exists and opts.save_mode == "ignore":
            return IgnoredWrite(opts.path, snapshot.version)
        if snapshot.exists:
            raise TableAlreadyExistsError(writes.table_exists_message(opts.path, snapshot.version))
    if opts.operation == "delete":
        return make_delete_writer(opts, schema, overwrite=overwrite)
    if opts.operation == "upsert" and overwrite:
        raise InvalidOptionError("operation=upsert changes rows of the table: use mode('append')")
    incoming = write_schema(schema)
    scope = _scope_request(opts, incoming, snapshot=snapshot)
    if opts.operation == "upsert":
        require_key(writes.load_snapshot(open_log(open_file_io(opts.path, opts.storage_options))), uri=opts.path, what="upsert")
    plan = writes.begin_write(
        opts.path,
        storage_options=opts.storage_options,
        incoming=incoming,
        mode=writes.OVERWRITE if overwrite else writes.APPEND,
        consistent_push=opts.consistent_push,
        publish=opts.publish,
        properties=opts.properties,
        primary_key=parse_primary_key(opts.primary_key),
        # this planner worker exits once the plan is made: the push and the write intent belong to the driver JVM
        owner=recovery.spark_driver_owner(),
        snapshot=snapshot,
        merge_schema=opts.merge_schema,
        overwrite_schema=opts.overwrite_schema,
        scope=scope,
        partition_by=opts.partition_by,
    )
    if snapshot is not None and opts.save_mode == "errorifexists":
        plan = replace(plan, create_only=True)
    if plan.primary_key:
        return KeyedWriter(plan, upsert=opts.operation == "upsert")
    return MvTableWriter(plan)
