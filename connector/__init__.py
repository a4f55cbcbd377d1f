"""mvtable's user-facing side: the ``Table`` API, segment I/O, the Spark data source.

``delete`` and ``register`` import pyspark only when called, so ``Table`` works on a
machine without a JVM."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .table import HistoryEntry, LineageView, Table, TableScan

__all__ = ["HistoryEntry", "LineageView", "Table", "TableScan", "delete", "register"]


def delete(spark: Any, path: str, condition: str, *, storage_options: Mapping[str, str] | None = None) -> int:
    """Distributed delete through Spark; returns the number of rows deleted
    (see ``mvtable.connector.spark.delete_where``)."""
    from .spark.delete_where import delete as _delete

    return _delete(spark, path, condition, storage_options=storage_options)


def register(spark: Any) -> None:
    """Register the ``mvtable`` data source and the SQL procedures with ``spark``."""
    from .spark import ensure_registered
    from .spark.procedures import register_procedures

    ensure_registered(spark)
    register_procedures(spark)
