"""A transaction's Spark writes: the DataFrame's tasks write segments on the executors, the driver keeps their descriptors.

The plan (``writes.begin_write``) is made on the driver, with the write intent that
protects the files until the transaction's prepare names them; each task writes its
partition as one segment (``writes.write_data``, which renews the intent while it writes)
and returns the segment's descriptor as JSON. Nothing is committed here: the transaction
prepares the collected segments with its other writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from mvtable.lineage.actions import SegmentFile

from .. import writes

__all__ = ["write_frame"]


def write_frame(begin: Callable[[pa.Schema], writes.WritePlan], df: Any) -> list[SegmentFile]:
    """Write ``df`` as segments under the plan ``begin(arrow schema)`` makes; their descriptors.

    Raises:
        UnsupportedTypeError: A column has a type mvtable does not store (Spark's variant).
        SchemaMismatchError: The DataFrame does not fit the table's schema.
        StorageError: The store refused a write on an executor."""
    from ..spark.arrow_types import write_schema

    plan = begin(write_schema(df.schema))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        segments = writes.write_data(plan, batches)
        yield pa.RecordBatch.from_pydict({"segment": [s.model_dump_json() for s in segments]}, schema=_OUT)

    rows = df.mapInArrow(task, "segment string").collect()
    return [SegmentFile.model_validate_json(row.segment) for row in rows]


_OUT = pa.schema([("segment", pa.string())])
