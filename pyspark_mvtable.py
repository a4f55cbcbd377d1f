"""Auto-discovery shim: Spark imports every top-level ``pyspark_*`` module and registers its
``DefaultSource``. It must stay tiny and import nothing fragile, because one module that
fails to import here hides every Python data source in the session."""

from mvtable.connector.spark.source import MvTableDataSource as DefaultSource

__all__ = ["DefaultSource"]
