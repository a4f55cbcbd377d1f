"""Vacuum's part in transactions: finish the ones found, and collect the decision objects nobody needs.

A decision object must outlive every participant's entry of its transaction: a writer or a
consistent read that finds a prepared entry reads the decision to finish it, and a
rollback reads it to know the transaction committed. Lineage retention purges the entries
once they are finalized and past their retention period
(``lineageEntryCleanupRetentionPeriod`` / ``replacedSegmentsRetentionPeriod``); from then
on the decision (and a rollback decision) only takes space, so vacuum of the coordinator
table removes it once no participant holds an entry of it any more and it is older than
the orphan grace period. A participant that cannot be read keeps it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from mvtable.errors import MvTableError
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.transactions import is_transaction

from ..recovery.transaction_decisions import DECISION_DIR, read_decision, rollback_path
from ..recovery.transactions import Stores, recover_table

logger = logging.getLogger("mvtable.connector")

__all__ = ["collectable_decisions", "finish_found", "stores_of"]


def stores_of(commit_log: CommitLog) -> Stores:
    """The stores a table's maintenance opens its transactions' other participants with: the table's own options."""
    stores = Stores(commit_log.io.spec().get("options") or {})
    stores.add(commit_log.io, stores.default)
    return stores


def finish_found(commit_log: CommitLog, snapshot: Snapshot) -> Snapshot:
    """``snapshot`` after finishing the transactions prepared in it that are decided or whose owner died.

    Raises:
        CorruptMetadataError: A decision object or prepare record is damaged.
        StorageError: The store refused a read or a finalize commit."""
    if recover_table(commit_log, snapshot, stores=stores_of(commit_log)):
        return commit_log.catch_up(snapshot)
    return snapshot


def collectable_decisions(
    commit_log: CommitLog, snapshot: Snapshot, *, now_ms: int, grace_s: float, open_log: Callable[..., CommitLog]
) -> list[str]:
    """The decision objects of this table (as coordinator) that no participant needs any more (table-relative paths).

    Raises:
        StorageError: The store refused the listing."""
    io = commit_log.io
    stores = stores_of(commit_log)
    out: list[str] = []
    for name in sorted(io.list_names(DECISION_DIR)):
        if not name.endswith(".json") or name.endswith(".rollback.json"):
            continue
        txn = name[: -len(".json")]
        if not is_transaction(txn) or txn in snapshot.lineage:
            continue
        try:
            decision = read_decision(io, txn)
            if decision is None or now_ms - decision.timestamp_ms < grace_s * 1000:
                continue
            if any(txn in open_log(stores.io(uri)).snapshot().lineage for uri in decision.participants if uri != io.uri):
                continue
        except MvTableError as exc:  # a damaged decision or an unreadable participant: keep it
            logger.warning("vacuum keeps the decision of transaction %s in %s: %s", txn, io.uri, exc)
            continue
        out.append(f"{DECISION_DIR}/{name}")
        if io.exists(rollback_path(txn)):
            out.append(rollback_path(txn))
    return out
