"""Spark's default save mode and ``partitionBy`` for ``df.write.format("mvtable")``.

Spark 4.3 decides both before a Python data source runs: ``DataFrameWriter.save`` refuses the
modes ErrorIfExists (Spark's default) and Ignore for every Python source
(``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``: a Python source can only be handed ``overwrite`` true or
false), and compares ``partitionBy`` columns with the partitioning of "the existing table",
which a Python source cannot declare, so a new path fails with a message about a table that
does not exist. Neither reaches mvtable's code (``tests/connector/test_spark_save_modes.py``
records what does).

So the decision is made where the mode is still known, in the driver's Python
``DataFrameWriter`` (classic and Spark Connect): :func:`install` wraps its ``save`` so that a
write to ``format("mvtable")`` in mode ErrorIfExists or Ignore asks Spark for an append and
passes the mode as the ``saveMode`` option (the data source then creates the table where none
exists, and refuses with ``TableAlreadyExistsError``, or writes nothing, where one does), and
takes ``partitionBy``'s columns back from Spark to pass them as the ``writerPartitionBy``
option, which the data source reads as identity fields of the partition spec, under the rules
of its ``partitionBy`` option (``saveAsTable`` raises ``CatalogTableNotSupportedError``).
``DataStreamWriter.start`` does the same with its ``partitionBy``, which Spark would otherwise
drop without a word for a Python sink. Other formats and modes pass through untouched. ``import mvtable`` installs it (now if pyspark is loaded, else when it is),
so it lives in the core package and imports nothing of mvtable's Spark code."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from types import ModuleType
from typing import Any

FORMAT = "mvtable"
# the option that carries partitionBy's columns to the data source (connector.options.WriteOptions)
PARTITION_COLUMNS_OPTION = "writerPartitionBy"
# Spark's names of the modes it refuses for a Python source
REFUSED_MODES = frozenset({"error", "errorifexists", "default", "ignore"})
# the modules whose DataFrameWriter (or DataStreamWriter) is wrapped: classic and Spark Connect
WRITER_MODULES = (
    "pyspark.sql.readwriter",
    "pyspark.sql.connect.readwriter",
    "pyspark.sql.streaming.readwriter",
    "pyspark.sql.connect.streaming.readwriter",
)
_MARK = "_mvtable_save_modes"


def install() -> None:
    """Wrap the DataFrameWriters that are loaded now, and the others when they load.

    Idempotent."""
    for name in WRITER_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _wrap(module)
    if not any(isinstance(f, _WrapOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport())


def installed(writer_class: type) -> bool:
    return bool(getattr(writer_class, _MARK, False))


def _wrap(module: ModuleType) -> None:
    cls = getattr(module, "DataFrameWriter", None)
    if cls is not None and not cls.__dict__.get(_MARK):
        cls.format = _recording(cls.format, "_mvtable_format")
        cls.mode = _recording(cls.mode, "_mvtable_mode")
        cls.partitionBy = _recording(cls.partitionBy, "_mvtable_partition_by")
        cls.save = _save(cls.save)
        cls.saveAsTable = _save_as_table(cls.saveAsTable)
        setattr(cls, _MARK, True)
    stream = getattr(module, "DataStreamWriter", None)
    if stream is not None and not stream.__dict__.get(_MARK):
        # Spark hands a Python streaming sink no partitioning at all: partitionBy would be dropped silently
        stream.format = _recording(stream.format, "_mvtable_format")
        stream.partitionBy = _recording(stream.partitionBy, "_mvtable_partition_by")
        stream.start = _start(stream.start)
        setattr(stream, _MARK, True)


def _recording(method: Callable[..., Any], attr: str) -> Callable[..., Any]:
    """``method`` that also remembers its argument on the writer.

    Classic pyspark hands it to the JVM at once, where Python cannot read it back."""

    @wraps(method)
    def call(self: Any, *args: Any) -> Any:
        value: Any = args[0] if len(args) == 1 else args
        if attr == "_mvtable_partition_by":
            value = list(value) if isinstance(value, (list, tuple)) else [value]
            value = list(value[0]) if len(value) == 1 and isinstance(value[0], (list, tuple)) else value
        if value is not None:
            self.__dict__[attr] = value
        return method(self, *args)

    return call


def _save(save: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(save)
    def call(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,
        **options: Any,
    ) -> Any:
        self.mode(mode).options(**options)
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        if str(self.__dict__.get("_mvtable_format", "")).lower() == FORMAT:
            # taken back from Spark, which would compare them with an "existing table" a Python
            # source cannot describe, and handed to the source, which makes them identity fields
            _hand_over_partition_by(self)
            chosen = str(self.__dict__.get("_mvtable_mode", "errorifexists")).lower()
            if chosen in REFUSED_MODES:
                self.mode("append").option("saveMode", chosen)
        return save(self, path)

    return call


def _hand_over_partition_by(writer: Any) -> None:
    """Move a writer's ``partitionBy`` columns from Spark to the ``writerPartitionBy`` option."""
    columns = writer.__dict__.get("_mvtable_partition_by")
    if columns:
        writer.partitionBy([])
        writer.option(PARTITION_COLUMNS_OPTION, json.dumps([str(c) for c in columns]))


def _start(start: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(start)
    def call(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: str | Sequence[str] | None = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        if partitionBy is not None:
            self.partitionBy(partitionBy)
        if format is not None:
            self.format(format)
        if str(self.__dict__.get("_mvtable_format", "")).lower() == FORMAT:
            _hand_over_partition_by(self)
        return start(self, path, outputMode=outputMode, queryName=queryName, **options)

    return call


def _save_as_table(save_as_table: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(save_as_table)
    def call(self: Any, name: str, format: str | None = None, *args: Any, **kwargs: Any) -> Any:
        chosen = format if format is not None else self.__dict__.get("_mvtable_format", "")
        if str(chosen).lower() == FORMAT:  # refused here: Spark would fail deep in its catalog
            from mvtable.errors import CatalogTableNotSupportedError

            raise CatalogTableNotSupportedError(
                f"saveAsTable({name!r}): catalog tables are not supported yet: mvtable tables live at a path, not in "
                "Spark's catalog. Write with .save(path) and query with mvtable.create_view(spark, name, path) or "
                "CREATE TEMPORARY VIEW name USING mvtable OPTIONS (path '…')"
            )
        return save_as_table(self, name, format, *args, **kwargs)

    return call


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps a DataFrameWriter module right after it is first imported."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in WRITER_MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _wrap(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
