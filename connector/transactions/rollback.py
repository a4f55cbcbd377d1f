"""Rolling a committed multi-table transaction back as one.

Every participant's part is checked first with the rules of a single push rollback
(``lineage.snapshot.revert_blocker``: its output must still be what readers see, what it
replaced must still exist). Then one rollback decision (``<id>.rollback.json``,
put-if-absent) makes the rollback happen, and each participant gets its revert commit.
A rollback that dies after its decision is finished by whoever looks next (the next
``rollback_transaction``, ``consistent_versions``): the decision says every part must go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mvtable import faults
from mvtable.errors import InvalidOptionError, TransactionNotFoundError, TransactionRollbackError
from mvtable.lineage import operations as ops
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot, revert_blocker
from mvtable.lineage.transactions import Outcome, is_transaction

from ..keys.commit import live_segment_keys, present_keys
from ..keys.validate import describe_keys
from ..post_commit import open_log
from ..recovery.transaction_decisions import decide, read_decision
from ..recovery.transactions import PreparedPart, finalize_part, prepared_part, settle
from ..results import TransactionResult
from .consistent import open_tables
from .tables import TableRef

__all__ = ["rollback_transaction"]


def _key_blocker(commit_log: CommitLog, snapshot: Snapshot, transaction_id: str) -> str | None:
    """Why reverting the transaction's part of a keyed table would show a key twice, or None.

    The rows it brings back (what it replaced or deleted) must hold no key that a row
    committed since holds, as for a single push's rollback (``keys.rollback``)."""
    if not snapshot.primary_key:
        return None
    returning, staying = ops.revert_effect(snapshot, transaction_id)
    if not returning:
        return None
    rows = live_segment_keys(commit_log.io, snapshot, returning, snapshot.primary_key)
    hidden = set(snapshot.lineage[transaction_id].segments_to) | set(returning)
    dup = present_keys(commit_log.io, snapshot, rows, segment_ids=[sid for sid in staying if sid not in hidden])
    if dup is None:
        return None
    return (
        f"{dup.num_rows} key(s) of the rows it would bring back were committed after it ({describe_keys(dup)}); "
        "delete those rows (delete by key) and roll back again"
    )


def rollback_transaction(
    transaction_id: str, *, tables: Sequence[TableRef | str], storage_options: Mapping[str, Any] | None = None
) -> TransactionResult:
    """Revert every table a committed transaction wrote, as one decided step; each table's revert version.

    ``tables`` must hold at least one participant (its prepare record names the others,
    opened with the options of the given tables). Asked again after it finished, it reverts
    nothing more and reports each table's current state.

    Raises:
        InvalidOptionError: ``transaction_id`` is no transaction id, or ``tables`` is empty.
        TransactionNotFoundError: No given table holds an entry of the transaction.
        TransactionRollbackError: It did not commit, or a table's part cannot be reverted
            (replaced since by another push, or past retention); nothing was rolled back.
        StorageError: The store refused a read or a commit (run it again: it resumes).
    """
    if not isinstance(transaction_id, str) or not is_transaction(transaction_id):
        raise InvalidOptionError(f"{transaction_id!r} is no transaction id (they start with 'txn-'; see mvtable lineage)")
    opened, stores = open_tables(tables, storage_options)
    part: PreparedPart | None = None
    for _, _, commit_log in opened:
        entry = commit_log.snapshot().lineage.get(transaction_id)
        if entry is not None:
            part = prepared_part(commit_log, entry)
            break
    if part is None:
        raise TransactionNotFoundError(
            f"none of the tables {[uri for _, uri, _ in opened]} holds an entry of transaction {transaction_id}"
        )
    coordinator = stores.io(part.decision_uri)
    decision = read_decision(coordinator, transaction_id)
    decided = read_decision(coordinator, transaction_id, rollback=True) is not None
    if decision is None or decision.outcome != Outcome.COMMITTED:
        state = "undecided" if decision is None else str(decision.outcome)
        raise TransactionRollbackError(
            f"transaction {transaction_id} is {state}; only a committed transaction can be rolled back"
        )
    logs = [open_log(stores.io(uri)) for uri in part.participants]
    if not decided:
        for uri, commit_log in zip(part.participants, logs):
            snapshot = commit_log.snapshot()
            entry = snapshot.lineage.get(transaction_id)
            if entry is None:
                raise TransactionRollbackError(f"transaction {transaction_id} in {uri} is past retention: its entry was purged")
            if entry.state == LineageState.IN_PROGRESS:
                settle(commit_log, entry, stores=stores)  # committed: publish it first, then revert it with the rest
                snapshot = commit_log.catch_up(snapshot)
                entry = snapshot.lineage[transaction_id]
            if entry.state == LineageState.COMPLETED:
                blocker = revert_blocker(snapshot, entry) or _key_blocker(commit_log, snapshot, transaction_id)
                if blocker:
                    raise TransactionRollbackError(f"transaction {transaction_id} cannot be rolled back in {uri}: {blocker}")
        decide(coordinator, transaction_id, Outcome.ROLLED_BACK, participants=part.participants)
        faults.point("transaction.rollback.after_decision")
    versions: list[tuple[str, int | None]] = []
    changed: list[str] = []
    for i, (uri, commit_log) in enumerate(zip(part.participants, logs), start=1):
        version = finalize_part(
            commit_log,
            transaction_id,
            LineageState.REVERTED,
            reason=f"transaction {transaction_id} rolled back",
            operation=Operation.TXN_ROLLBACK,
        )
        versions.append((uri, version if version is not None else commit_log.latest_version()))
        if version is not None:
            changed.append(uri)
        faults.point(f"transaction.rollback.after_revert.{i}")
    return TransactionResult(transaction_id, tuple(versions), str(Outcome.ROLLED_BACK), tuple(changed))
