"""The Spark reader: plans on the driver, reads row groups with masks on executors.

The snapshot was resolved and pinned once, when the DataFrame was created (see
``source``); the reader only ever reads that version. ``partitions()`` renews the pin when
a read is planned, and every partition carries the version, the pin and when it was
renewed: Spark keeps the planned partitions and runs them again on every action of the
DataFrame (or of a view over it) without planning anew, so each task renews the pin itself
once half of ``pinTtl`` has passed (``pinning.renew_when_due``), and an executor that finds
a file gone can say why."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from mvtable.errors import FilesMissingError, NotFoundError
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import open_file_io

from ..options import ReadOptions
from ..parallel import default_workers
from ..pinning import PinnedSnapshot, SnapshotPin, pin_snapshot, renew, renew_when_due
from ..post_commit import open_log
from ..scan import ScanTask, output_schema, plan_scan, read_task, split_tasks
from ..schema import schema_from_json, schema_to_json
from ..schema_evolution.field_ids import strip_ids
from ..segments import ROW_ADDRESS_ROW, ROW_ADDRESS_SEGMENT
from ..stats import Predicate
from ..streaming.changes import CHANGE_COLUMNS, change_schema
from .filters import pushdown_predicate
from .read_schema import check_requested_columns


def newest_snapshot(opts: ReadOptions) -> Snapshot:
    """The newest snapshot, unpinned.

    It gives the schema of a read that binds to no one version (a change feed, a stream)."""
    return open_log(open_file_io(opts.path, opts.storage_options)).snapshot()


def unbound_read_columns(schema: StructType, opts: ReadOptions) -> list[str]:
    """The table columns a change feed or stream read asks for, as the newest version names them.

    The schema Spark hands it (the user's, when ``.schema()`` was given) is checked against
    that version's, change columns included: the batch read's rule (``read_schema``), at the
    only version these reads can check at, since they bind to none."""
    expected = spark_schema(newest_snapshot(opts), opts)
    names = [f.name for f in schema.fields if f.name not in (ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW)]
    check_requested_columns(schema, expected, names)
    table_name = {n.lower(): n for n in expected.names}
    return [table_name[n.lower()] for n in names if n.lower() not in CHANGE_COLUMNS]


def pin_read(opts: ReadOptions) -> PinnedSnapshot:
    """Resolve the version a read asks for and pin it.

    The version is ``versionAsOf``, ``timestampAsOf``, else the newest."""
    io = open_file_io(opts.path, opts.storage_options)
    return pin_snapshot(io, open_log(io), version=opts.version_as_of, timestamp=opts.timestamp_as_of, owner="Spark read")


def default_parallelism() -> int:
    """The cores to spread a scan over.

    ``partitions()`` runs in a Python worker that is not told the session's
    ``defaultParallelism`` (Spark sends planner workers a hand-picked few confs), so this
    takes the cores this process may run on: exact for ``local[*]`` on a dedicated machine,
    a lower bound on a cluster: there the ``minPartitions`` read option (like Spark's
    ``spark.sql.files.minPartitionNum``) says how many to aim for."""
    return default_workers()


def spark_schema(snapshot: Snapshot, opts: ReadOptions) -> StructType:
    schema = output_schema(schema_from_json(snapshot.table_schema), opts.columns, row_address=opts.with_row_address)
    if opts.read_change_feed:
        schema = change_schema(schema)
    return StructType.fromJson(strip_ids(schema_to_json(schema)))  # ids stay inside mvtable


@dataclass
class MvTablePartition(InputPartition):
    tasks: list[ScanTask]
    pin: SnapshotPin  # the version every partition of one read reads
    renewed_at: float  # when the planner renewed the pin (epoch seconds)
    table_schema: dict[str, Any] | None  # the version's stored schema: segments resolve columns by its field ids

    def __init__(
        self, tasks: list[ScanTask], pin: SnapshotPin, *, renewed_at: float, table_schema: dict[str, Any] | None = None
    ) -> None:
        self.tasks = tasks
        self.pin = pin
        self.renewed_at = renewed_at
        self.table_schema = table_schema


class MvTableReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: StructType, pin: SnapshotPin) -> None:
        self.opts = opts
        self.schema = schema
        self.pin = pin
        self.predicates: list[Predicate] = []  # pruning only
        self.claimed: list[Predicate] = []  # applied exactly in read()
        # Everything read() needs is decided before partitions(): Spark pickles the reader
        # for the executors first (pyspark/sql/worker/plan_data_source_read.py), so what
        # partitions() sets on self never reaches read().
        self.columns = tuple(f.name for f in schema.fields if f.name not in (ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW))
        self._snapshot: Snapshot | None = None  # this worker's copy: pushFilters() and partitions() share it

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_snapshot": None}  # executors need the plan, not the snapshot

    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = open_log(open_file_io(self.opts.path, self.opts.storage_options)).snapshot(self.pin.version)
        return self._snapshot

    def partitions(self) -> Sequence[InputPartition]:
        io = open_file_io(self.opts.path, self.opts.storage_options)
        # pinTtl more for this execution; a pin that expired since the DataFrame was
        # created is made again if the version is still whole (else a NotFoundError)
        pin = renew(io, self.pin, commit_log=open_log(io), owner="Spark read")
        snapshot = self.snapshot()
        # a schema the user gave (spark.read.schema) reached no check before this
        table_schema = StructType.fromJson(strip_ids(schema_to_json(schema_from_json(snapshot.table_schema))))
        check_requested_columns(self.schema, table_schema, self.columns)
        plan = plan_scan(
            snapshot,
            columns=self.columns,
            predicates=self.predicates,
            row_address=self.opts.with_row_address,
            lineage_entry=self.opts.lineage_entry,
        )
        parallelism = max(default_parallelism(), self.opts.min_partitions or 1)
        parts = split_tasks(plan.tasks, max_bytes=self.opts.max_partition_bytes, parallelism=parallelism)
        renewed_at = time.time()
        stored = dict(snapshot.table_schema)
        return [MvTablePartition(tasks, pin, renewed_at=renewed_at, table_schema=stored) for tasks in parts]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if is_placeholder(partition):  # a table without row groups to read
            return
        if not isinstance(partition, MvTablePartition):
            raise TypeError(f"the mvtable reader was handed a {type(partition).__name__}, not a partition it planned")
        target = to_arrow_schema(self.schema, timezone="UTC")
        io = open_file_io(self.opts.path, self.opts.storage_options)
        # Spark runs these partitions again on every action of the DataFrame without
        # planning anew: the task keeps the version pinned itself
        pin = renew_when_due(io, partition.pin, renewed_at=partition.renewed_at, commit_log=open_log(io), owner="Spark task")
        by_id = schema_from_json(partition.table_schema) if partition.table_schema is not None else None
        try:
            for task in partition.tasks:
                for table in read_task(
                    io,
                    task,
                    columns=self.columns,
                    predicates=self.claimed,
                    row_address=self.opts.with_row_address,
                    schema=by_id,
                ):
                    for batch in table.to_batches():
                        yield conform_batch(batch, target)
        except NotFoundError as exc:
            raise FilesMissingError(
                f"version {pin.version} of {self.opts.path} lost a file it needs ({exc}): the read's pin "
                f"{pin.pin_id} expired (pinTtl) before this task ran and GC or vacuum collected the file, "
                "or it was deleted by hand. Read the table again."
            ) from exc


class PushdownReader(MvTableReader):
    """Used only when Spark's filter pushdown is on (see source._called_for_pushdown)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        schema = schema_from_json(self.snapshot().table_schema)
        for f in filters:
            predicate, claim = pushdown_predicate(f, schema)
            if predicate is not None:
                self.predicates.append(predicate)
            if predicate is not None and claim:
                self.claimed.append(predicate)
            else:
                yield f


def is_placeholder(partition: InputPartition) -> bool:
    """Whether ``partition`` is the one PySpark makes up when ``partitions()`` returned none.

    That is ``InputPartition(None)`` (pyspark/sql/worker/plan_data_source_read.py): it is
    still read, and must give no rows."""
    return type(partition) is InputPartition and partition.value is None


def conform_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """Spark checks the first batch's Arrow schema for equality, nullability included."""
    if batch.schema.equals(target):
        return batch
    arrays = [batch.column(i).cast(target.field(i).type) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
