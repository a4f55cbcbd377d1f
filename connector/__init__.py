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


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, filter_pushdown: bool = True) -> None:
    """Register the ``mvtable`` data source and the SQL procedures with ``spark``.

    Also turns on Spark's filter pushdown for Python data sources (``PUSHDOWN_CONF``, off by
    default in Spark 4.3) for this session, and logs that it did: without it the reader
    cannot skip row groups by the log's statistics, nor claim the filters it applies
    exactly. ``filter_pushdown=False`` leaves the setting alone."""
    import logging

    from .spark import ensure_registered
    from .spark.procedures import register_procedures

    ensure_registered(spark)
    register_procedures(spark)
    if filter_pushdown and str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() != "true":
        spark.conf.set(PUSHDOWN_CONF, "true")
        logging.getLogger("mvtable.connector").info(
            "mvtable.register: set %s=true for this session (filter pushdown into mvtable scans)", PUSHDOWN_CONF
        )
