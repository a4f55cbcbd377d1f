"""Multi-table transactions: several tables change together or not at all, with no server.

A two-phase commit over the tables' own logs (``mvtable.lineage.transactions`` holds the
pure rules): a prepared, invisible lineage entry in every table, one decision object
written put-if-absent at the coordinator table, then a finalize commit per table.

* ``transaction.Transaction`` runs it (``mvtable.transaction()``, ``connector.multi_table``;
  with Spark, ``connector.spark.transaction_writes.SparkTransaction``);
* ``consistent.consistent_versions`` picks versions that show every transaction whole
  (``connector.spark.transaction_views.create_views`` makes SQL views at them);
* ``rollback.rollback_transaction`` reverts a committed one as one decided step;
* ``collect`` is vacuum's part: decided transactions finished, unneeded decisions removed.

The decision object and the recovery that finishes or aborts a transaction whose owner
stopped live in ``connector.recovery`` (``transaction_decisions``, ``transactions``): every
writer runs that recovery before it writes, so it may import no writer.
"""

from __future__ import annotations

from ..recovery.transaction_decisions import Decision, read_decision
from ..recovery.transactions import Stores, recover_table
from .consistent import consistent_versions
from .rollback import rollback_transaction
from .transaction import Transaction

__all__ = [
    "Decision",
    "Stores",
    "Transaction",
    "consistent_versions",
    "read_decision",
    "recover_table",
    "rollback_transaction",
]
