"""Multi-table transactions: several tables change together or not at all, with no server.

A two-phase commit over the tables' own logs (``mvtable.lineage.transactions`` holds the
rules): a prepared, invisible lineage entry in every table, one decision object written
put-if-absent at the coordinator table (``decision``), then a finalize commit per table.
``Transaction`` runs it (``mvtable.transaction()``, in ``connector.multi_table``); ``recovery`` finishes or aborts a transaction whose owner stopped;
``consistent_versions`` picks versions that show every transaction whole;
``rollback_transaction`` reverts a committed one as one step.
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
