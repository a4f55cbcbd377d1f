"""mvtable's user-facing side: the ``Table`` API, segment I/O, the Spark data source."""

from .table import HistoryEntry, LineageView, Table, TableScan

__all__ = ["HistoryEntry", "LineageView", "Table", "TableScan", "delete", "register"]


def delete(spark, path: str, condition: str, **kwargs):  # type: ignore[no-untyped-def]
    """Distributed delete through Spark (see ``mvtable.connector.spark.delete``)."""
    from .spark.delete import delete as _delete

    return _delete(spark, path, condition, **kwargs)


def register(spark) -> None:  # type: ignore[no-untyped-def]
    """Register the ``mvtable`` data source and the SQL procedures with ``spark``."""
    from .spark import ensure_registered
    from .spark.procedures import register_procedures

    ensure_registered(spark)
    register_procedures(spark)
