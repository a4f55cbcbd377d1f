"""mvtable: a multi-version table format with deletion vectors, consistent push and rollback, and a Spark data source.

The front door::

    import mvtable
    t = mvtable.Table.create("/data/t", schema=…)     # the Python API, no Spark needed
    mvtable.register(spark)                            # data source + SQL procedures
    mvtable.delete(spark, "/data/t", "id < 10")        # distributed delete
    mvtable.compact(spark, "/data/t")                  # distributed compaction (one task per bin)
    with mvtable.transaction() as tx: …               # several tables change together or not at all
    except mvtable.errors.MvTableError: …              # one root for every error

The package is four layers (each a folder of the source tree):

* ``mvtable`` itself (``core/``): what every layer shares — ``errors``, ``storage``
  (``FileIO`` and its backends), ``paths`` (table-relative path safety), ``ids``, and
  ``dvref`` (the deletion-vector descriptor the log stores and visibility loads);
* ``mvtable.lineage``: the commit log, pure replay into snapshots, the lineage state
  machine and conflict rules, checkpoints, retention planning;
* ``mvtable.visibility``: deletion vectors (format, files, masks, cache), reader pins, GC;
* ``mvtable.connector``: the ``Table`` API, segment I/O, Spark, SQL procedures, CLI.

``lineage`` and ``visibility`` import neither each other nor pyspark. The names below are
imported lazily, so ``import mvtable.errors`` from the lower layers never drags in the
connector. ``_EXPORTS`` is the one list of them: ``__all__`` and ``dir(mvtable)`` come from
it, and a test holds the imports that type checkers read (under ``TYPE_CHECKING``) to it.

What the calls return are frozen values named ``…Result`` (``WriteResult``,
``DeleteResult``, ``UpsertResult``, ``CompactionResult``, ``VacuumResult``, ``GCResult``,
``ActionResult``, ``ExportResult``, ``TransactionResult``); ``Table.snapshot()`` is a read-only ``Snapshot``.
Parameters are typed by ``WriteMode`` (or its name), ``Timestamp`` and ``Keys``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> (module, attribute; None for the module itself), resolved on first use (PEP 562)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "errors": ("mvtable.errors", None),
    # tables and Spark
    "Table": ("mvtable.connector.table", "Table"),
    "register": ("mvtable.connector", "register"),
    "delete": ("mvtable.connector", "delete"),
    "compact": ("mvtable.connector.spark.compaction", "compact"),
    "read_native": ("mvtable.connector.spark.native", "read_native"),
    "create_view": ("mvtable.connector.spark.views", "create_view"),
    "refresh_view": ("mvtable.connector.spark.views", "refresh_view"),
    "drop_view": ("mvtable.connector.spark.views", "drop_view"),
    "stop_stream": ("mvtable.connector.spark.stream_stop", "stop_stream"),
    # several tables at once
    "transaction": ("mvtable.connector.multi_table", "transaction"),
    "Transaction": ("mvtable.connector.transactions.transaction", "Transaction"),
    "consistent_versions": ("mvtable.connector.transactions.consistent", "consistent_versions"),
    "rollback_transaction": ("mvtable.connector.transactions.rollback", "rollback_transaction"),
    "create_views": ("mvtable.connector.spark.transaction_views", "create_views"),
    # what Table's calls return
    "Snapshot": ("mvtable.lineage.snapshot", "Snapshot"),
    "WriteResult": ("mvtable.connector.results", "WriteResult"),
    "DeleteResult": ("mvtable.connector.results", "DeleteResult"),
    "UpsertResult": ("mvtable.connector.results", "UpsertResult"),
    "CompactionResult": ("mvtable.connector.results", "CompactionResult"),
    "VacuumResult": ("mvtable.connector.results", "VacuumResult"),
    "GCResult": ("mvtable.connector.results", "GCResult"),
    "TransactionResult": ("mvtable.connector.results", "TransactionResult"),
    "ActionResult": ("mvtable.connector.lifecycle", "ActionResult"),
    "ExportResult": ("mvtable.connector.export.common", "ExportResult"),
    # what they take
    "WriteMode": ("mvtable.connector.parameters", "WriteMode"),
    "Timestamp": ("mvtable.connector.parameters", "Timestamp"),
    "Keys": ("mvtable.connector.parameters", "Keys"),
}

__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 (built from the one list; tools read the imports below)

if TYPE_CHECKING:  # what type checkers read; test_front_door holds it to _EXPORTS
    from mvtable import errors as errors
    from mvtable.connector import delete as delete
    from mvtable.connector import register as register
    from mvtable.connector.export.common import ExportResult as ExportResult
    from mvtable.connector.lifecycle import ActionResult as ActionResult
    from mvtable.connector.multi_table import transaction as transaction
    from mvtable.connector.parameters import Keys as Keys
    from mvtable.connector.parameters import Timestamp as Timestamp
    from mvtable.connector.parameters import WriteMode as WriteMode
    from mvtable.connector.results import CompactionResult as CompactionResult
    from mvtable.connector.results import DeleteResult as DeleteResult
    from mvtable.connector.results import GCResult as GCResult
    from mvtable.connector.results import TransactionResult as TransactionResult
    from mvtable.connector.results import UpsertResult as UpsertResult
    from mvtable.connector.results import VacuumResult as VacuumResult
    from mvtable.connector.results import WriteResult as WriteResult
    from mvtable.connector.spark.compaction import compact as compact
    from mvtable.connector.spark.native import read_native as read_native
    from mvtable.connector.spark.stream_stop import stop_stream as stop_stream
    from mvtable.connector.spark.transaction_views import create_views as create_views
    from mvtable.connector.spark.views import create_view as create_view
    from mvtable.connector.spark.views import drop_view as drop_view
    from mvtable.connector.spark.views import refresh_view as refresh_view
    from mvtable.connector.table import Table as Table
    from mvtable.connector.transactions.consistent import consistent_versions as consistent_versions
    from mvtable.connector.transactions.rollback import rollback_transaction as rollback_transaction
    from mvtable.connector.transactions.transaction import Transaction as Transaction
    from mvtable.lineage.snapshot import Snapshot as Snapshot


def __getattr__(name: str) -> Any:
    try:
        module, attr = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'mvtable' has no attribute {name!r}") from None
    value = import_module(module) if attr is None else getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # the public names only: not the helpers this module imports for itself
    return sorted(__all__)


# Spark's default save mode and partitionBy for format("mvtable"): see mvtable.spark_save
from mvtable import spark_save as _spark_save  # noqa: E402

_spark_save.install()
