"""The Spark reader: plans on the driver, reads row groups with masks on executors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from mvtable.errors import InvalidOptionError
from mvtable.lineage.log import CommitLog
from mvtable.storage import open_file_io

from ..options import ReadOptions
from ..parallel import default_workers
from ..scan import ScanTask, output_schema, pin_version, plan_scan, read_task, split_tasks
from ..schema import schema_from_json, schema_to_json
from ..segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT
from ..stats import Predicate
from ..streaming.changes import change_schema
from ..timeparse import parse_timestamp_ms
from .filters import to_predicate


def _snapshot(opts: ReadOptions):
    log = CommitLog(open_file_io(opts.path, opts.storage_options))
    version = opts.version_as_of
    if opts.timestamp_as_of is not None:
        version = log.version_at(parse_timestamp_ms(opts.timestamp_as_of))
    return log.snapshot(version)


def default_parallelism() -> int:
    """The cores to spread a scan over. ``partitions()`` runs in a Python worker that is not
    told the session's ``defaultParallelism`` (Spark sends planner workers a hand-picked
    few confs), so this takes the cores this process may run on: exact for ``local[*]``
    on a dedicated machine, a lower bound on a cluster: there the ``minPartitions`` read
    option (like Spark's ``spark.sql.files.minPartitionNum``) says how many to aim for."""
    return default_workers()


def spark_schema_for(opts: ReadOptions) -> StructType:
    snapshot = _snapshot(opts)
    schema = output_schema(schema_from_json(snapshot.table_schema), opts.columns, row_address=opts.with_row_address)
    if opts.read_change_feed:
        schema = change_schema(schema)
    return StructType.fromJson(schema_to_json(schema))


@dataclass
class MvTablePartition(InputPartition):
    tasks: list[ScanTask]

    def __init__(self, tasks: list[ScanTask]) -> None:
        self.tasks = tasks


class MvTableReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.predicates: list[Predicate] = []  # pruning only
        self.claimed: list[Predicate] = []  # applied exactly in read()
        # Everything read() needs is decided here: partitions() runs in another worker
        # whose changes to self never reach the executors.
        self.columns = tuple(f.name for f in schema.fields if f.name not in (ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW))

    def partitions(self) -> Sequence[InputPartition]:
        snapshot = _snapshot(self.opts)
        table_schema = schema_from_json(snapshot.table_schema)
        lower = {n.lower() for n in table_schema.names}
        unknown = [c for c in self.columns if c.lower() not in lower]
        if unknown:
            raise InvalidOptionError(f"columns {unknown} are not in the table (it has {table_schema.names})")
        pin_version(open_file_io(self.opts.path, self.opts.storage_options), snapshot.version)  # expires by itself
        plan = plan_scan(
            snapshot,
            columns=self.columns,
            predicates=self.predicates,
            row_address=self.opts.with_row_address,
            lineage_entry=self.opts.lineage_entry,
        )
        parallelism = max(default_parallelism(), self.opts.min_partitions or 1)
        parts = split_tasks(plan.tasks, max_bytes=self.opts.max_partition_bytes, parallelism=parallelism)
        return [MvTablePartition(tasks) for tasks in parts]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, MvTablePartition)
        target = to_arrow_schema(self.schema, timezone="UTC")
        io = open_file_io(self.opts.path, self.opts.storage_options)
        for task in partition.tasks:
            for table in read_task(
                io, task, columns=self.columns, predicates=self.claimed, row_address=self.opts.with_row_address
            ):
                for batch in table.to_batches():
                    yield conform_batch(batch, target)


class PushdownReader(MvTableReader):
    """Used only when Spark's filter pushdown is on (see source._called_for_pushdown)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        snapshot = _snapshot(self.opts)
        schema = schema_from_json(snapshot.table_schema)
        for f in filters:
            predicate, claim = to_predicate(f, schema)
            if predicate is not None:
                self.predicates.append(predicate)
            if predicate is not None and claim:
                self.claimed.append(predicate)
            else:
                yield f


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Spark checks the first batch's Arrow schema for equality, nullability included."""
    if batch.schema.equals(target):
        return batch
    arrays = [batch.column(i).cast(target.field(i).type) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
