"""The ``mvtable`` Spark data source (Spark 4.x Python Data Source API).

Spark runs ``schema()``, ``reader()``, ``partitions()`` and ``writer()`` in short-lived
driver-side Python workers, ``read()``/``write()`` in executors, and ``commit()``/``abort()``
in yet another worker: nothing is shared through memory, so every object here carries
what the next step needs and is picklable.

A read resolves and pins its snapshot once, in ``schema()``: Spark calls it when the
DataFrame is created and then pickles this instance (``pyspark/sql/worker/
create_data_source.py``), so the pin it set reaches ``reader()`` in the planning worker,
however many times the DataFrame is executed. A DataFrame is thereby bound to the version
it was created at (as Delta binds one to its snapshot): commits after ``load()`` never
change what it returns. Planning renews the pin, and so does every task of an execution
that runs once half of ``pinTtl`` has passed (Spark keeps the planned partitions and runs
them again on later actions without planning anew; see ``reader``). Spark has no hook for
"this DataFrame is no longer used", so the pin is never released: it expires ``pinTtl``
after the last renewal. That is the rule of this Python route only (Spark tells a Python
source nothing when a query ends); on Spark's Parquet scan (``native_plan``) the JVM hears
each query end and cuts the pin to ``pinIdleTtl`` once no running query reads it. With a user-given schema Spark skips ``schema()``; then
``reader()`` resolves and pins at each planning. A change feed or a stream reads versions
one after another and binds to none: ``streamReader()`` drops the pin ``schema()`` made."""

from __future__ import annotations

import sys
from collections.abc import MutableMapping
from types import FrameType
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter
from pyspark.sql.types import StructType

from mvtable.errors import InvalidOptionError, MvTableError
from mvtable.storage import open_file_io

from ..options import read_options, stream_write_options, write_options
from ..pinning import SnapshotPin, release
from . import native_plan
from .reader import MvTableReader, PushdownReader, newest_snapshot, pin_read, spark_schema, unbound_read_columns
from .stream import ChangeFeedReader, MvTableStreamReader, MvTableStreamWriter, RefusedStreamReader
from .writer import make_writer


def _called_for_pushdown() -> bool:
    """Whether Spark asked for this reader in its filter-pushdown worker.

    A reader class that overrides ``pushFilters`` makes every read fail while
    ``spark.sql.python.filterPushdown.enabled`` is false (Spark's default), and ``reader()``
    is not told the setting. Spark only calls ``reader()`` from its pushdown worker when
    the setting is on, so that call site is the signal."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        frame = frame.f_back
    return False


class MvTableDataSource(DataSource):
    pin: SnapshotPin | None = None  # the read's snapshot, set by schema(); pickled with the instance
    jvm = native_plan.JvmRequest()  # what mvtable's JVM classes asked schema() for besides the schema

    def __init__(self, options: MutableMapping[str, str]) -> None:
        options, self.jvm = native_plan.take_jvm_options(options)
        super().__init__(options)

    @classmethod
    def name(cls) -> str:
        return "mvtable"

    def schema(self) -> StructType:
        opts = read_options(self.options)
        if self.jvm.renew is not None:  # a native read's pin, while it is queried
            return native_plan.renewed(opts, self.jvm.renew)
        if self.jvm.idle is not None:  # a native read's pin, once no running query reads it
            return native_plan.idled(opts, self.jvm.idle)
        if opts.read_change_feed:  # reads versions one after another: nothing to bind to
            schema = spark_schema(newest_snapshot(opts), opts)
            return native_plan.with_plan(schema, opts, None) if self.jvm.plan else schema
        pinned = pin_read(opts)
        self.pin = pinned.pin
        schema = spark_schema(pinned.snapshot, opts)
        return native_plan.with_plan(schema, opts, pinned) if self.jvm.plan else schema

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = read_options(self.options).for_batch()
        if opts.read_change_feed:
            return ChangeFeedReader(opts, schema)
        pin = self.pin if self.pin is not None else pin_read(opts).pin
        cls = PushdownReader if _called_for_pushdown() else MvTableReader
        return cls(opts, schema, pin)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        return make_writer(write_options(self.options), schema, overwrite=overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            opts = read_options(self.options)
        except InvalidOptionError as exc:  # see RefusedStreamReader: raised here, PySpark adds an error of its own
            return RefusedStreamReader(exc)
        if self.pin is not None:  # schema() cannot tell a stream from a batch read: drop its pin
            release(open_file_io(opts.path, opts.storage_options), self.pin)
        try:
            opts = opts.for_stream()
            return MvTableStreamReader(opts, schema, columns=unbound_read_columns(schema, opts))
        except MvTableError as exc:  # bad options, a .schema() of other types, no table
            return RefusedStreamReader(exc)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return MvTableStreamWriter(stream_write_options(self.options), schema, complete=overwrite)


class MvTableDataSourceAlias(MvTableDataSource):
    """The same source under a second name, for a Spark Connect server started with mvtable's jar.

    Spark refuses to register a Python source under a name a class on its classpath holds,
    and the jar's ``mvtable.DefaultSource`` holds ``mvtable``. A classic driver registers the
    source past that check through its JVM handle; a Connect client has none, so
    ``mvtable.register`` registers this class instead, and ``DefaultSource`` runs it for
    ``format("mvtable")`` in a session where only this name is registered."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_ALIAS


PYTHON_ALIAS = "mvtable_python"  # DefaultSource.PYTHON_ALIAS
