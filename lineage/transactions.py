"""Multi-table transactions as pure rules: a two-phase commit over the tables' own logs.

A transaction ``txn-…`` runs in three steps, each a commit or one put-if-absent object:

1. **prepared** — each participant table gets a staged lineage entry with the transaction's
   id (``prepare``): its new segments (and, for deletes, clones of the touched segments
   with their new deletion vectors) are invisible, the segments it replaces are held, and a
   ``TransactionPrepare`` action names the peers and the decision's location;
2. **decided** — one decision object, written put-if-absent at the coordinator table, says
   COMMITTED or ABORTED; it is the only point of atomicity. A later rollback of the whole
   transaction is decided the same way (a second object, ROLLED_BACK);
3. **finalized** — each participant gets its finalize commit (``finalize``): the entry
   becomes COMPLETED (visible) or REVERTED.

What a reader or writer does on finding each state (``target_state``, ``step``): a prepared
entry without a decision is invisible and, if its owner is provably dead or its lease ran
out, is aborted (decision ABORTED written put-if-absent, which settles any race with a live
committer); a decided entry is finalized by whoever finds it. A consistent multi-table read
(``mismatched``) accepts a set of versions only when every transaction is visible in all of
them or in none.

No I/O here: the connector (``mvtable.connector.transactions``) reads the decision and
liveness facts and hands them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import ConcurrentLineageError, ConcurrentReplaceError, NothingToCommit

from .actions import (
    Action,
    AddSegment,
    LineageEnd,
    LineageRevert,
    LineageStage,
    LineageStart,
    MetadataAction,
    PushOwner,
    SegmentFile,
    SetDeletionVector,
    TransactionPrepare,
)
from .enums import LineageState, _Name
from .operations import create_or_check, require_visible
from .ownership import TRANSACTION_ENTRY_PREFIX, blocking_entries
from .push_scopes import PushScope, describe_scope
from .snapshot import LineageEntry, Snapshot

__all__ = [
    "TRANSACTION_PREFIX",
    "Outcome",
    "Step",
    "finalize",
    "has_prepared",
    "is_transaction",
    "mismatched",
    "prepare",
    "step",
    "target_state",
    "transaction_entries",
    "visible_in",
]

TRANSACTION_PREFIX = TRANSACTION_ENTRY_PREFIX


class Outcome(_Name):
    """What a decision object says."""

    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    ROLLED_BACK = "ROLLED_BACK"  # a committed transaction, rolled back as one afterwards


class Step(str, Enum):
    """What whoever finds a participant's entry must do with it."""

    NONE = "none"  # it is where the decisions say it belongs (or undecided: leave it)
    PUBLISH = "publish"  # decided COMMITTED, still prepared: finalize it visible
    REVERT = "revert"  # decided ABORTED (or rolled back), still prepared or visible: revert it


def is_transaction(entry_id: str) -> bool:
    """Whether a lineage entry id is a multi-table transaction's (its id is the transaction id)."""
    return entry_id.startswith(TRANSACTION_PREFIX)


def transaction_entries(snapshot: Snapshot) -> list[LineageEntry]:
    """The transactions' lineage entries of a snapshot, oldest first."""
    return sorted((e for e in snapshot.lineage.values() if is_transaction(e.id)), key=lambda e: e.started_version)


def has_prepared(snapshot: Snapshot) -> bool:
    """Whether a snapshot holds a transaction's prepared (not yet finalized) entry: what makes a finder look further."""
    return any(is_transaction(e.id) and e.state == LineageState.IN_PROGRESS for e in snapshot.lineage.values())


def target_state(decision: Outcome | None, *, rolled_back: bool = False) -> LineageState | None:
    """The state every participant's entry must reach; None while the transaction is undecided."""
    if rolled_back or decision in (Outcome.ABORTED, Outcome.ROLLED_BACK):
        return LineageState.REVERTED
    if decision == Outcome.COMMITTED:
        return LineageState.COMPLETED
    return None


def step(entry: LineageEntry | None, target: LineageState | None) -> Step:
    """What to do with a participant's entry (None: purged or never prepared there) given the decisions."""
    if entry is None or target is None or entry.state == target or entry.state == LineageState.REVERTED:
        return Step.NONE
    if target == LineageState.COMPLETED:
        return Step.PUBLISH if entry.state == LineageState.IN_PROGRESS else Step.NONE
    return Step.REVERT


def prepare(
    current: Snapshot,
    *,
    transaction_id: str,
    participants: Sequence[str],
    decision_uri: str,
    replaced: Sequence[str],
    segments: Sequence[SegmentFile],
    clones: Mapping[str, tuple[SegmentFile, DeletionVectorRef]],
    owner: PushOwner,
    lease_expires_ms: int,
    metadata: MetadataAction | None,
    scope: PushScope | None = None,
    rewritten: Mapping[str, DeletionVectorRef | None] | None = None,
) -> list[Action]:
    """The prepare commit of one participant, checked against the newest snapshot.

    ``replaced`` are the segments an overwrite read (it replaces them), ``segments`` the new
    ones, ``clones`` the deletes: original segment id → (a clone naming its file, the
    clone's deletion vector). The entry holds every replaced and deleted-from segment, so no
    other replace, compaction or transaction can take them until the transaction is
    finalized; appends pass it by. ``scope`` makes the overwrite a scoped push's
    (``push_scopes``): the entry records it, so pushes of other partitions pass it by and
    pushes of the same ones wait; ``rewritten`` are the segments it copies on write (among
    ``replaced``) with their deletion vectors when read: a delete on one since would be lost.

    Raises:
        ConcurrentReplaceError: A segment the transaction replaces or deletes from was
            replaced or removed since it was read, or one it rewrites had rows deleted since.
        ConcurrentCompactionError: One was rewritten by a compaction since (run it again).
        ConcurrentLineageError: A live push or transaction holds one of them, or (scoped) one
            of the same partitions.
        ConcurrentMetadataError: The table was created concurrently with another schema."""
    held = list(dict.fromkeys([*replaced, *clones]))
    require_visible(current, held, what=f"transaction {transaction_id}")
    changed = [sid for sid, dv in (rewritten or {}).items() if current.dvs.get(sid) != dv]
    if changed:
        raise ConcurrentReplaceError(
            f"transaction {transaction_id}: rows of segment {changed[0]}, which it rewrites, were deleted by a concurrent "
            f"commit (table now at version {current.version}); run the transaction again"
        )
    wanted = set(held)
    if scope is not None:
        for entry in blocking_entries(current, held, scope=scope):
            raise ConcurrentLineageError(
                f"transaction {transaction_id}: lineage entry {entry.id} is in progress over "
                f"{describe_scope(entry.scope)}, which this transaction replaces too; "
                "wait for it to finish (or be recovered) and run the transaction again"
            )
    for entry in current.lineage.values():
        if entry.state == LineageState.IN_PROGRESS and wanted & set(entry.segments_from):
            raise ConcurrentLineageError(
                f"transaction {transaction_id}: lineage entry {entry.id} is in progress over the same segments; "
                "wait for it to finish (or be recovered) and run the transaction again"
            )
    return [
        *create_or_check(current, metadata),
        LineageStart(
            entry_id=transaction_id,
            segments_from=tuple(held),
            owner=owner,
            lease_expires_ms=lease_expires_ms,
            scope=scope,
        ),
        *(AddSegment(segment=s, lineage_entry=transaction_id) for s in segments),
        *(AddSegment(segment=clone, lineage_entry=transaction_id) for clone, _ in clones.values()),
        *(SetDeletionVector(segment_id=clone.id, dv=dv) for clone, dv in clones.values()),
        LineageStage(entry_id=transaction_id),
        TransactionPrepare(
            transaction_id=transaction_id,
            participants=tuple(participants),
            decision_uri=decision_uri,
            clones={clone.id: original for original, (clone, _) in clones.items()},
        ),
    ]


def finalize(
    current: Snapshot,
    transaction_id: str,
    *,
    target: LineageState,
    reason: str | None = None,
    dvs: Mapping[str, DeletionVectorRef] | None = None,
) -> list[Action]:
    """The finalize commit of one participant: its entry to ``target`` (COMPLETED or REVERTED).

    ``dvs`` (clone id → deletion vector) carry into the clones the deletes that concurrent
    commits made to the segments they replace since the prepare, so no delete is lost.

    Raises:
        NothingToCommit: The entry is there already (a concurrent finalize won) or was purged."""
    entry = current.lineage.get(transaction_id)
    what = step(entry, target)
    if what == Step.NONE:
        state = "purged" if entry is None else str(entry.state)
        raise NothingToCommit(f"transaction {transaction_id} is {state} in this table already")
    if what == Step.PUBLISH:
        return [
            *(SetDeletionVector(segment_id=sid, dv=dv) for sid, dv in (dvs or {}).items()),
            LineageEnd(entry_id=transaction_id),
        ]
    return [LineageRevert(entry_id=transaction_id, reason=reason)]


def visible_in(snapshot: Snapshot, transaction_id: str) -> bool | None:
    """Whether the transaction's writes show in ``snapshot`` (None: no entry of it there)."""
    entry = snapshot.lineage.get(transaction_id)
    return None if entry is None else entry.state == LineageState.COMPLETED


def mismatched(snapshots: Mapping[str, Snapshot], participants: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """The transactions a set of snapshots (table URI → snapshot) does not show whole, each with the tables to re-read.

    ``participants`` maps each transaction found in them to its participant URIs. A
    transaction is whole when it shows in every participant of the set or in none; a
    participant with no entry of it shows it only if the entry was purged after it
    completed, which only re-reading that table at its newest version can tell, so such
    tables are listed for a re-read whenever another participant shows the transaction.
    Every participant of the set is listed: the decisions say which side is behind."""
    out: dict[str, list[str]] = {}
    for txn, uris in participants.items():
        present = [u for u in uris if u in snapshots]
        states = {u: visible_in(snapshots[u], txn) for u in present}
        seen = {s for s in states.values() if s is not None}
        if len(seen) > 1 or (seen == {True} and any(s is None for s in states.values())):
            out[txn] = present
    return out
