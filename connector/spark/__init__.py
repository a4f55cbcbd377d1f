"""The Spark side of mvtable: the data source (reader, writer) and its registration."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .native import read_native

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSource

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
        _register_python_source(spark, MvTableDataSource)


def attach_native_scan(spark: Any) -> bool:
    """Add mvtable's jar to ``spark`` (built on first use); ``False`` when it cannot be added.

    With the jar, batch reads through ``format("mvtable")`` and ``USING mvtable`` run on
    Spark's own Parquet scan (``native_plan``). The Python source must be registered first:
    with the jar loaded, Spark's registration check finds ``mvtable.DefaultSource`` and
    refuses the name. On ``False`` (the reason logged once) reads go through the Python source."""
    from .native_plan import attach_jar

    return attach_jar(spark)


def _register_python_source(spark: Any, source: type[DataSource]) -> None:
    """Register the Python source as ``spark.dataSource.register(source)`` does.

    Where the jar came with the session (``spark.jars``, ``--jars``), Spark's name check finds
    ``mvtable.DefaultSource`` and raises DATA_SOURCE_ALREADY_EXISTS. A classic session then
    gets the source straight into its DataSourceManager, as that call does after its check; a
    Spark Connect client, with no JVM handle, registers it under its second name
    (``MvTableDataSourceAlias``), which ``DefaultSource`` runs where ``mvtable`` is missing."""
    try:
        spark.dataSource.register(source)
    except Exception as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        if getattr(spark, "_jsparkSession", None) is None:  # Spark Connect
            from .source import MvTableDataSourceAlias

            spark.dataSource.register(MvTableDataSourceAlias)
            return
        from pyspark.sql.udf import _wrap_function

        sc = spark.sparkContext
        udds = getattr(sc._jvm, "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource")
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        manager.registerDataSource(source.name(), udds(_wrap_function(sc, source)))


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
