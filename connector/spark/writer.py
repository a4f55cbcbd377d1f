"""The Spark writer: executors write segments, the driver makes one commit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from mvtable.errors import InvalidOptionError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.log import CommitLog
from mvtable.storage import open_file_io

from .. import recovery, writes
from ..keys.upsert import require_key
from ..keys.validate import parse_primary_key
from ..options import WriteOptions
from .arrow_types import write_schema
from .delete_writer import make_delete_writer
from .keyed_writer import KeyedWriter


@dataclass
class SegmentsWritten(WriterCommitMessage):
    segments: list[SegmentFile] = field(default_factory=list)


class MvTableWriter(DataSourceArrowWriter):
    def __init__(self, plan: writes.WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SegmentsWritten:
        return SegmentsWritten(writes.write_data(self.plan, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        writes.finish_write(self.plan, written_segments(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        writes.abort_write(self.plan, written_segments(messages))


def written_segments(messages: list[WriterCommitMessage | None]) -> list[SegmentFile]:
    return [s for m in messages if isinstance(m, SegmentsWritten) for s in m.segments]


def make_writer(opts: WriteOptions, schema: StructType, *, overwrite: bool) -> DataSourceArrowWriter:
    if opts.operation == "delete":
        return make_delete_writer(opts, schema, overwrite=overwrite)
    if opts.operation == "upsert" and overwrite:
        raise InvalidOptionError("operation=upsert changes rows of the table: use mode('append')")
    incoming = write_schema(schema)
    if opts.operation == "upsert":
        require_key(writes.load_snapshot(CommitLog(open_file_io(opts.path, opts.storage_options))), uri=opts.path, what="upsert")
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
    )
    if plan.primary_key:
        return KeyedWriter(plan, upsert=opts.operation == "upsert")
    return MvTableWriter(plan)
