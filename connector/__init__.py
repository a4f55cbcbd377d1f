"""mvtable's user-facing side.

``Table`` (``table``) is a thin façade over modules that each hold one capability and take a
snapshot and storage, never a ``Table``: ``writes`` (the three-step write protocol: plan on the
driver, write segments on executors, one commit), ``segments`` (Parquet I/O with statistics),
``scan`` (planning and masked reads), ``pinning`` (the one way reads pin a version), ``deletes``,
``lifecycle`` (rollback, restore, publish), ``recovery`` (dead pushes), ``compaction``, ``keys``,
``streaming``, ``export`` (Iceberg/Delta metadata), ``vacuum`` and ``gc``, the ``cli`` and the Spark
data source in ``spark``. What ``Table``'s calls return lives in ``results`` (frozen values), what
they take in ``parameters``, and the read-only snapshots they hand out in ``snapshot_view``.

``delete`` and ``register`` import pyspark only when called, so ``Table`` works on a
machine without a JVM."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .table import HistoryEntry, LineageView, Table, TableScan

__all__ = ["HistoryEntry", "LineageView", "Table", "TableScan", "delete", "register"]


def delete(spark: Any, path: str, condition: str, *, storage_options: Mapping[str, str] | None = None) -> int:
    """Distributed delete through Spark; returns the number of rows deleted (see ``mvtable.connector.spark.delete_where``).

    A ``condition`` Spark cannot analyse fails with Spark's own ``AnalysisException`` before any
    scan. The commit runs in Spark's write of the found rows, so its errors reach the caller
    wrapped in a Spark exception: ``mvtable.errors.from_spark`` unwraps them.

    Raises:
        TableNotFoundError: There is no mvtable table at ``path``.
        StorageLocationError: ``path`` cannot hold a table (an empty path, a file, an unknown protocol).
        ConcurrentReplaceError: A concurrent commit replaced a segment with matching rows; nothing
            was deleted, run it again (wrapped by Spark).
        CommitConflictError: Another concurrent commit made this one invalid; nothing was
            deleted, run it again (wrapped by Spark).
        CommitStateUnknownError: The store never said whether the delete landed; look for it in
            the table's history before running it again (wrapped by Spark).
        CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
        StorageError: The store refused or failed a read or write (full, read-only, no permission).
    """
    from .spark.delete_where import delete as _delete

    return _delete(spark, path, condition, storage_options=storage_options)


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, *, filter_pushdown: bool = False) -> None:
    """Register the ``mvtable`` data source and the SQL procedures, and add mvtable's jar.

    With the jar, batch reads through ``format("mvtable")`` and ``USING mvtable`` run on
    Spark's own Parquet scan (``spark.native_plan``); where the jar cannot be built or added,
    the Python source serves them, and a log line says why.

    ``filter_pushdown=True`` also turns on Spark's filter pushdown for Python data sources
    (``PUSHDOWN_CONF``) for this session, and logs a warning that says why it is off by
    default: in Spark 4.3 a DataFrame that is queried again without a pushable filter
    reuses the partitions and read function planned for its previous, filtered query
    (``PythonScanBuilder`` keeps the pushdown result on the data source, and skips the
    Python call when no filter is pushable), so ``df.where(f).count()`` followed by
    ``df.count()`` returns the filtered count. With pushdown off every query plans afresh.

    It raises no mvtable error: what the session refuses (an unusable Spark) is Spark's own
    exception, and a jar that cannot be built or added is logged, not raised.
    """
    import logging

    from .spark import attach_native_scan, ensure_registered
    from .spark.procedures import register_procedures

    ensure_registered(spark)
    attach_native_scan(spark)  # after the Python source: see attach_native_scan
    register_procedures(spark)
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
        logging.getLogger("mvtable.connector").warning(
            "mvtable.register: set %s=true for this session. In Spark 4.3 a DataFrame queried again "
            "without a pushable filter reuses the rows planned for its previous filtered query: "
            "re-create the DataFrame for each query, or use mvtable.create_view",
            PUSHDOWN_CONF,
        )
