"""A diagnostic Python data source: the same lineitem rows from a memory-mapped,
uncompressed Arrow IPC file, in balanced partitions of 131072-row batches — no Parquet
decode, no deletes, no planning. Its time is Spark's own cost of ingesting Arrow batches
from *any* Python data source, i.e. the floor under mvtable's Spark numbers.

``spark.read.format("mvbench_floor").option("columns", "a,b").load(ipc_path)``."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

BATCH_ROWS = 131072


class _Part(InputPartition):
    def __init__(self, pieces: list[tuple[int, int, int]]) -> None:
        self.pieces = pieces  # (record batch index, offset, length)


def _columns(options) -> list[str] | None:
    text = options.get("columns")
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mvbench_floor"

    def schema(self) -> StructType:
        with pa.memory_map(self.options["path"]) as src:
            schema = pa.ipc.open_file(src).schema
        cols = _columns(self.options)
        if cols:
            schema = pa.schema([schema.field(c) for c in cols])
        return from_arrow_schema(schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(self.options, schema)


class FloorReader(DataSourceReader):
    def __init__(self, options, schema: StructType) -> None:
        self.path = options["path"]
        self.parts = int(options.get("partitions", "2"))
        self.columns = _columns(options)
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        with pa.memory_map(self.path) as src:
            f = pa.ipc.open_file(src)
            sizes = [f.get_batch(i).num_rows for i in range(f.num_record_batches)]
        total = sum(sizes)
        bounds = [total * i // self.parts for i in range(self.parts + 1)]
        parts: list[list[tuple[int, int, int]]] = [[] for _ in range(self.parts)]
        start = 0
        for i, n in enumerate(sizes):
            for p in range(self.parts):
                lo, hi = max(start, bounds[p]), min(start + n, bounds[p + 1])
                if hi > lo:
                    parts[p].append((i, lo - start, hi - lo))
            start += n
        return [_Part(p) for p in parts]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Part)
        target = to_arrow_schema(self.schema, timezone="UTC")
        with pa.memory_map(self.path) as src:
            f = pa.ipc.open_file(src)
            for i, off, length in partition.pieces:
                batch = f.get_batch(i).slice(off, length)
                if self.columns:
                    batch = batch.select(self.columns)
                for o in range(0, batch.num_rows, BATCH_ROWS):
                    piece = batch.slice(o, BATCH_ROWS)
                    yield pa.RecordBatch.from_arrays(piece.columns, schema=target)
