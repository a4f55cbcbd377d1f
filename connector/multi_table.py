"""``mvtable.transaction()``: the front door of multi-table transactions, with or without Spark.

It sits beside ``transactions`` (the protocol, which imports no Spark) and ``spark`` (whose
``SparkTransaction`` adds DataFrame writes), so neither needs the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

from .transactions.transaction import Transaction

if TYPE_CHECKING:
    from .spark.transaction_writes import SparkTransaction

__all__ = ["transaction"]


@overload
def transaction(*, storage_options: Mapping[str, Any] | None = None, spark: None = None) -> Transaction: ...


@overload
def transaction(*, storage_options: Mapping[str, Any] | None = None, spark: Any) -> SparkTransaction: ...


def transaction(*, storage_options: Mapping[str, Any] | None = None, spark: Any = None) -> Transaction:
    """A new multi-table transaction: ``with mvtable.transaction() as tx: tx.append(t1, …); tx.overwrite(t2, …)``.

    ``storage_options`` serve the tables given as URIs (a ``Table`` brings its own). All the
    writes land together when the block ends, or none does. With ``spark`` (a
    ``SparkSession``), ``tx.write(df, path, mode=…)`` writes DataFrames on the cluster too.

    Raises:
        TransactionConflictError: On leaving the block: a table conflicted; nothing landed.
        TransactionAbortedError: On leaving the block: another writer aborted it; nothing landed.
    """
    if spark is None:
        return Transaction(storage_options=storage_options)
    from .spark.transaction_writes import SparkTransaction

    return SparkTransaction(spark, storage_options=storage_options)
