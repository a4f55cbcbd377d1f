"""The Spark side of mvtable: the data source (reader, writer) and its registration."""

from __future__ import annotations

from typing import Any

from .native import read_native

__all__ = ["ensure_registered", "read_native"]


def ensure_registered(spark: Any) -> None:
    """Register the ``mvtable`` data source with this session, unless Spark knows it already.

    A wheel install needs no call (Spark discovers ``pyspark_mvtable``); an editable or
    source-tree install is invisible to that scan. Registering over the discovered source
    makes Spark warn that it "replaced a statically registered data source", so the source is
    registered only where it is missing. Also wraps the driver's ``DataFrameWriter`` for
    Spark's default save mode (``mvtable.spark_save``)."""
    from mvtable import spark_save

    from .source import MvTableDataSource

    spark_save.install()
    if not source_known(spark):
        spark.dataSource.register(MvTableDataSource)


def source_known(spark: Any) -> bool:
    """Whether ``format("mvtable")`` resolves in this session (discovered or registered)."""
    session = getattr(spark, "_jsparkSession", None)
    if session is not None:  # classic: ask Spark's DataSourceManager
        return bool(session.sessionState().dataSourceManager().dataSourceExists(MVTABLE))
    # Spark Connect has no JVM handle: a read without a path reaches mvtable's own check
    # (an mvtable error) only where the source is known
    try:
        spark.read.format(MVTABLE).load().schema  # noqa: B018 - the schema is what runs the source
    except Exception as exc:
        return "[MVTABLE_" in str(exc)
    return True


MVTABLE = "mvtable"
