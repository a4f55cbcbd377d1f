"""The ``mvtable`` Spark data source (Spark 4.x Python Data Source API).

Spark runs ``schema()``, ``reader()``, ``partitions()`` and ``writer()`` in short-lived
driver-side Python workers, ``read()``/``write()`` in executors, and ``commit()``/``abort()``
in yet another worker: nothing is shared through memory, so every object here carries
what the next step needs and is picklable."""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.types import StructType

from ..options import read_options, stream_write_options, write_options
from .reader import MvTableReader, PushdownReader, spark_schema_for
from .stream import ChangeFeedReader, MvTableStreamReader, MvTableStreamWriter
from .writer import make_writer


def _called_for_pushdown() -> bool:
    """Whether Spark asked for this reader in its filter-pushdown worker.

    A reader class that overrides ``pushFilters`` makes every read fail while
    ``spark.sql.python.filterPushdown.enabled`` is false (Spark's default), and ``reader()``
    is not told the setting. Spark only calls ``reader()`` from its pushdown worker when
    the setting is on, so that call site is the signal."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        frame = frame.f_back
    return False


class MvTableDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mvtable"

    def schema(self) -> StructType:
        return spark_schema_for(read_options(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = read_options(self.options).for_batch()
        if opts.read_change_feed:
            return ChangeFeedReader(opts, schema)
        cls = PushdownReader if _called_for_pushdown() else MvTableReader
        return cls(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        return make_writer(write_options(self.options), schema, overwrite=overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MvTableStreamReader(read_options(self.options).for_stream(), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return MvTableStreamWriter(stream_write_options(self.options), schema, complete=overwrite)
