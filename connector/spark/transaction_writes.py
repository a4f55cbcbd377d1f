"""A transaction's Spark writes: each DataFrame's tasks write segments on the executors, the driver keeps their descriptors.

``SparkTransaction`` is the ``Transaction`` that ``mvtable.transaction(spark=…)`` returns:
``tx.write(df, path, mode=…)`` plans on the driver (``writes.begin_write``, with the write
intent that protects the files until the transaction's prepare names them); each task
writes its partition as one segment (``writes.write_data``, which renews the intent while
it writes) and returns the segment's descriptor as JSON. Nothing is committed here: the
transaction prepares the collected segments with its other writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from mvtable.errors import InvalidOptionError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from .. import scoped_push, writes
from ..keys.commit import check_absent, segment_keys
from ..partitions.scope_labels import default_spec, file_partition
from ..scoped_push import ScopedPlan, ScopeRequest
from ..transactions.tables import TableRef
from ..transactions.transaction import Transaction

__all__ = ["SparkTransaction", "write_frame"]

_OUT = pa.schema([("segment", pa.string())])


def write_frame(begin: Callable[[pa.Schema], writes.WritePlan], df: Any) -> list[SegmentFile]:
    """Write ``df`` as segments under the plan ``begin(arrow schema)`` makes; their descriptors.

    Raises:
        UnsupportedTypeError: A column has a type mvtable does not store (Spark's variant).
        SchemaMismatchError: The DataFrame does not fit the table's schema.
        StorageError: The store refused a write on an executor."""
    from .arrow_types import write_schema

    plan = begin(write_schema(df.schema))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        segments = writes.write_data(plan, batches)
        yield pa.RecordBatch.from_pydict({"segment": [s.model_dump_json() for s in segments]}, schema=_OUT)

    rows = df.mapInArrow(task, "segment string").collect()
    return [SegmentFile.model_validate_json(row.segment) for row in rows]


class SparkTransaction(Transaction):
    """A ``Transaction`` that also writes Spark DataFrames (``mvtable.transaction(spark=…)``).

    Raises:
        InvalidOptionError: A call after the transaction ended.
    """

    def __init__(self, spark: Any, *, storage_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(storage_options=storage_options)
        self.spark = spark

    def write(
        self,
        df: Any,
        path: TableRef | str,
        *,
        mode: str = writes.APPEND,
        replaceWhere: str | None = None,
        partitionOverwriteMode: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> int:
        """Write a Spark DataFrame to ``path`` when the transaction commits (``mode``: append or overwrite); the rows written.

        The DataFrame's tasks write the files on the cluster, now; the transaction commits
        them with its other writes. Executors must reach the table, as for any Spark write.

        ``replaceWhere`` (a SQL predicate, as the ``replaceWhere`` option) or
        ``partitionOverwriteMode="dynamic"`` make an overwrite a scoped push, as the options
        do for a single Spark write: the tasks check their rows against the predicate; a
        dynamic overwrite's partitions are those the tasks wrote, planned once they ran
        (before the transaction prepares) against the table as this call read it.

        Raises:
            InvalidOptionError: An unknown mode, a scope option without mode overwrite, both
                scope options, a predicate that cannot be read, or the transaction ended.
            ReplaceWhereViolationError: A row is outside ``replaceWhere`` (raised in a task:
                Spark reports it inside its own error); nothing of the call is kept.
            DuplicateKeyError: On a keyed table, a key repeats, is in the table already (an
                append, or a row a scoped overwrite keeps), or this transaction wrote it already.
            SchemaMismatchError: The DataFrame does not fit the table's schema.
            UnsupportedTypeError: A column has a type mvtable does not store (Spark's variant).
            StorageError: The store refused a write.
        """
        if mode not in (writes.APPEND, writes.OVERWRITE):
            raise InvalidOptionError(f"unknown write mode {mode!r}; use 'append' or 'overwrite'")
        dynamic = _dynamic(partitionOverwriteMode)
        scoped_push.check_options(
            mode=mode,
            consistent_push=True,
            replace_where=replaceWhere,
            partition_overwrite=scoped_push.DYNAMIC if dynamic else None,
        )
        part = self._part(path, storage_options)
        from .arrow_types import write_schema
        from .writer import scope_request

        scope = scope_request(
            replaceWhere,
            dynamic=dynamic,
            incoming=write_schema(df.schema),
            snapshot=lambda: writes.load_snapshot(part.commit_log),
        )
        plans: list[writes.WritePlan] = []

        def begin(schema: pa.Schema) -> writes.WritePlan:
            plans.append(self._begin(part, schema, mode=mode, scope=scope))
            return plans[-1]

        segments = write_frame(begin, df)
        read = plans[-1].read_snapshot or Snapshot()
        try:
            scoped = None
            if scope is not None:  # the partitions the tasks wrote are known now: the scope is planned with them
                scoped = _planned(part.io, read, plans[-1], scope, segments)
                self._scoped(part, scoped)
                segments += self._kept(part, dataclasses.replace(plans[-1], scoped=scoped), read)
            if part.key and segments:  # keyed: checked like a keyed Spark write, on the keys the tasks wrote
                rows = segment_keys(part.io, segments, part.key)
                if mode == writes.APPEND:
                    check_absent(part.io, read, rows)
                if scoped is not None:
                    rows = scoped_push.check_keys(part.io, read, scoped, rows, ())
                self._add_keys(part, rows, read, upsert=False)
        except BaseException:
            self._drop_files(part, segments)
            raise
        return self._written(part, segments, mode=mode)


def _dynamic(mode: str | None) -> bool:
    """Whether ``partitionOverwriteMode`` asks for a dynamic overwrite (``static``, Spark's default, is the whole table).

    Raises:
        InvalidOptionError: a mode Spark does not have."""
    text = None if mode is None else str(mode).strip().lower()
    if text not in (None, "static", "dynamic"):
        raise InvalidOptionError(
            f"{mode!r} is not a partition overwrite mode; use dynamic (the partitions the data holds) or static"
        )
    return text == "dynamic"


def _planned(io: FileIO, read: Snapshot, plan: writes.WritePlan, scope: ScopeRequest, segments: list[SegmentFile]) -> ScopedPlan:
    """The scope of a transaction's scoped Spark overwrite, with the partitions its tasks wrote.

    A dynamic overwrite replaces those partitions (as ``writes._commit_dynamic`` plans a
    single one, but at the read snapshot); a ``replaceWhere`` overwrite, planned before the
    tasks, adds them to its scope so that a push of a partition it writes waits for it."""
    written = tuple(dict.fromkeys(file_partition(s) for s in segments))
    if plan.scoped is None:
        return scoped_push.plan_scoped(io, read, ScopeRequest(dynamic=True, written=written))
    touched = [read.segments[sid] for sid in plan.scoped.segments_from]
    return dataclasses.replace(plan.scoped, scope=scoped_push.scope_of(read, default_spec(read), written, touched, scope))
