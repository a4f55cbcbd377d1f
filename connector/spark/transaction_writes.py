"""A transaction's Spark writes: each DataFrame's tasks write segments on the executors, the driver keeps their descriptors.

``SparkTransaction`` is the ``Transaction`` that ``mvtable.transaction(spark=…)`` returns:
``tx.write(df, path, mode=…)`` plans on the driver (``writes.begin_write``, with the write
intent that protects the files until the transaction's prepare names them); each task
writes its partition as one segment (``writes.write_data``, which renews the intent while
it writes) and returns the segment's descriptor as JSON. Nothing is committed here: the
transaction prepares the collected segments with its other writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from mvtable.errors import InvalidOptionError
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.snapshot import Snapshot

from .. import writes
from ..keys.commit import check_absent, segment_keys
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
        self, df: Any, path: TableRef | str, *, mode: str = writes.APPEND, storage_options: Mapping[str, Any] | None = None
    ) -> int:
        """Write a Spark DataFrame to ``path`` when the transaction commits (``mode``: append or overwrite); the rows written.

        The DataFrame's tasks write the files on the cluster, now; the transaction commits
        them with its other writes. Executors must reach the table, as for any Spark write.

        Raises:
            InvalidOptionError: An unknown mode, or the transaction ended.
            DuplicateKeyError: On a keyed table, a key repeats, is in the table already (an
                append), or this transaction wrote it already.
            SchemaMismatchError: The DataFrame does not fit the table's schema.
            UnsupportedTypeError: A column has a type mvtable does not store (Spark's variant).
            StorageError: The store refused a write.
        """
        if mode not in (writes.APPEND, writes.OVERWRITE):
            raise InvalidOptionError(f"unknown write mode {mode!r}; use 'append' or 'overwrite'")
        part = self._part(path, storage_options)
        plans: list[writes.WritePlan] = []

        def begin(schema: pa.Schema) -> writes.WritePlan:
            plans.append(self._begin(part, schema, mode=mode))
            return plans[-1]

        segments = write_frame(begin, df)
        if part.key and segments:  # keyed: checked like a keyed Spark write, on the keys the tasks wrote
            read = plans[-1].read_snapshot or Snapshot()
            try:
                rows = segment_keys(part.io, segments, part.key)
                if mode == writes.APPEND:
                    check_absent(part.io, read, rows)
                self._add_keys(part, rows, read, upsert=False)
            except BaseException:
                self._drop_files(part, segments)
                raise
        return self._written(part, segments, mode=mode)
