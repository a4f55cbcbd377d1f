"""Recovery of consistent pushes whose writer died: a crashed writer never blocks the table.

A push records its owner and a first lease in its start (``lineage.actions.PushOwner``)
and renews the lease in ``_mvtable/leases/<entry>.json`` while it runs (``leases``). When a
new push (or vacuum) meets an IN_PROGRESS entry, this package gathers the facts with I/O —
the lease file, whether the owner's process still runs on this machine (``owner``), whether
its writer gave it up (``leases.give_up``) — and hands them as plain data to the pure
rules in ``mvtable.lineage.ownership``, which decide between reverting the dead entry in
the same commit, ``PushInProgressError`` and ``StagedPushError``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, LineageRevert, MetadataAction, PushOwner
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.lineage.ownership import TRANSACTION_ENTRY_PREFIX, Liveness, PushClaim, Verdict, verdict
from mvtable.lineage.push_scopes import PushScope
from mvtable.lineage.snapshot import LineageEntry, Snapshot
from mvtable.storage import FileIO

from .leases import LEASE_DIR, LeaseKeeper, drop, entry_of, gave_up, give_up, lease_path, now_ms, read_lease, renew
from .owner import machine_id, probe, process_owner, spark_driver_owner

logger = logging.getLogger("mvtable.connector")

__all__ = [
    "LEASE_DIR",
    "LeaseKeeper",
    "drop",
    "entry_of",
    "entry_verdicts",
    "gave_up",
    "give_up",
    "gather_liveness",
    "keep_lease",
    "lease_path",
    "liveness_of",
    "machine_id",
    "now_ms",
    "push_claim",
    "read_lease",
    "renew",
    "process_owner",
    "spark_driver_owner",
    "start_push",
]


def liveness_of(io: FileIO, entry: LineageEntry) -> Liveness:
    """The facts about one entry's owner.

    They are its process (same machine only), its lease (the later of the start's and the
    lease file's), and whether it gave the push up."""
    gone, detail = probe(entry.owner)
    leases = [x for x in (entry.lease_expires_ms, read_lease(io, entry.id)) if x is not None]
    return Liveness(
        process_gone=gone, detail=detail, lease_expires_ms=max(leases) if leases else None, writer_gave_up=gave_up(io, entry.id)
    )


def gather_liveness(io: FileIO, snapshot: Snapshot) -> dict[str, Liveness]:
    """Facts for every IN_PROGRESS entry that is not staged (staged ones are never cleaned)."""
    return {e.id: liveness_of(io, e) for e in snapshot.lineage.values() if e.state == LineageState.IN_PROGRESS and not e.staged}


def push_claim(io: FileIO, snapshot: Snapshot, *, owner: PushOwner, lease_ms: int) -> PushClaim:
    """What a new push brings to ``ops.push_start``.

    Its owner, lease and the facts about every push it might find in its way, read now."""
    return PushClaim(owner=owner, lease_ms=lease_ms, now_ms=now_ms(), liveness=gather_liveness(io, snapshot))


def entry_verdicts(io: FileIO, snapshot: Snapshot, *, default_lease_ms: int, at_ms: int | None = None) -> dict[str, Verdict]:
    """Each IN_PROGRESS entry's verdict at ``at_ms`` (now by default).

    This is vacuum's and ``mvtable lineage``'s view."""
    facts = gather_liveness(io, snapshot)
    now = now_ms() if at_ms is None else at_ms
    out = {
        e.id: verdict(e, facts.get(e.id), now_ms=now, default_lease_ms=default_lease_ms)
        for e in snapshot.lineage.values()
        if e.state == LineageState.IN_PROGRESS
    }
    for entry_id, v in out.items():
        if entry_id.startswith(TRANSACTION_ENTRY_PREFIX):  # its decision ends it, never a person alone
            out[entry_id] = Verdict(v.kind, "prepared part of a multi-table transaction: its decision finishes it", None)
    return out


def start_push(
    commit_log: CommitLog,
    snapshot: Snapshot,
    *,
    entry_id: str,
    owner: PushOwner,
    lease_ms: int,
    metadata: MetadataAction | None,
    replaced: Sequence[str] | None = None,
    scope: PushScope | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> CommitResult:
    """Commit the start of a consistent push, cleaning up dead pushes in its way in the same commit.

    ``replaced`` and ``scope`` make it a scoped push (``ops.push_start``); ``parameters``
    are added to the commit's. Its parameters record each entry cleaned up and why
    (``recovered``).

    Raises:
        PushInProgressError: A live push holds the same segments or partitions.
        StagedPushError: A staged push holds the same segments or partitions."""
    claim = push_claim(commit_log.io, snapshot, owner=owner, lease_ms=lease_ms)
    recovered: list[dict[str, str | None]] = []

    def build(current: Snapshot) -> list[Action]:
        actions = ops.push_start(snapshot, current, entry_id, claim=claim, metadata=metadata, replaced=replaced, scope=scope)
        recovered[:] = [{"entry": a.entry_id, "reason": a.reason} for a in actions if isinstance(a, LineageRevert)]
        return actions

    extra = dict(parameters or {})

    def commit_parameters() -> dict[str, Any]:
        return {"entry": entry_id, **extra, **({"recovered": list(recovered)} if recovered else {})}

    result = commit_log.commit(read=snapshot, operation=Operation.PUSH_START, parameters=commit_parameters, build=build)
    for item in recovered:
        logger.warning("consistent push %s reverted push %s: %s", entry_id, item["entry"], item["reason"])
        drop(commit_log.io, str(item["entry"]))
    return result


def keep_lease(io: FileIO, entry_id: str | None, *, lease_ms: int) -> AbstractContextManager[object]:
    """Renew the lease of push ``entry_id`` while the block runs (nothing for other writes)."""
    if entry_id is None or lease_ms <= 0:
        return nullcontext()
    return LeaseKeeper(io, entry_id, lease_ms=lease_ms, owner=process_owner().describe())
