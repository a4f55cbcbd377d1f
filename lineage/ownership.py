"""Who owns a consistent push, and whether a push that blocks a new one may be cleaned up.

Pure: the connector gathers the facts with I/O (``mvtable.connector.recovery``: the lease
file, whether the owner's process still runs) and hands them in as ``Liveness`` values;
this module only decides. The rules (Pinot's ``forceCleanup``, made safe):

* a **staged** entry (a ``publish=False`` push whose data has landed) waits for a person:
  never reverted automatically (``StagedPushError``);
* an entry whose owner **provably died** (same machine, and its process is gone or is
  another process with the same pid), whose **writer gave up** on it (it could not write
  the push's abort and said so, ``recovery.leases.give_up``) or whose **lease expired** is
  reverted, in the same commit that starts the new push, with the reason recorded in the
  revert;
* otherwise the owner is alive: ``PushInProgressError`` names the entry, its owner and the
  end of its lease. Never a silent wait, never two live pushes over one base.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mvtable.errors import PushInProgressError, StagedPushError

from .actions import LineageRevert, PushOwner
from .enums import LineageState, _Name
from .push_scopes import PushScope, describe_scope, scopes_overlap, shared_partitions
from .snapshot import LineageEntry, Snapshot

# the id prefix of a multi-table transaction's entries (``lineage.transactions``, which builds on this module)
TRANSACTION_ENTRY_PREFIX = "txn-"

__all__ = ["Liveness", "Verdict", "VerdictKind", "PushClaim", "verdict", "blocking_entries", "recover_blocked"]


class VerdictKind(_Name):
    """What a new push (or vacuum) may do with an IN_PROGRESS entry in its way."""

    DEAD = "dead"  # its owner provably died: clean it up
    EXPIRED = "expired"  # its lease ran out: clean it up
    ALIVE = "alive"  # its owner runs (or cannot be checked) and its lease holds: refuse
    STAGED = "staged"  # finished writing, waits for a person: refuse, never clean up


DEAD, EXPIRED, ALIVE, STAGED = VerdictKind.DEAD, VerdictKind.EXPIRED, VerdictKind.ALIVE, VerdictKind.STAGED


@dataclass(frozen=True)
class Liveness:
    """What the connector found out about one IN_PROGRESS entry's owner."""

    process_gone: bool  # same machine, and the owner's process no longer runs
    detail: str  # for people: what was checked
    lease_expires_ms: int | None  # the newest lease known (start action or lease file)
    writer_gave_up: bool = False  # its writer stopped for good and could not revert it


@dataclass(frozen=True)
class Verdict:
    kind: VerdictKind
    reason: str
    lease_expires_ms: int | None

    @property
    def recoverable(self) -> bool:
        return self.kind in (DEAD, EXPIRED)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="seconds")


def lease_end(entry: LineageEntry, facts: Liveness | None, *, default_lease_ms: int) -> int:
    """When the entry's lease ends.

    That is the newest lease the facts know, else the one its start recorded, else (entries
    written before leases existed) its start plus the default."""
    if facts is not None and facts.lease_expires_ms is not None:
        return facts.lease_expires_ms
    if entry.lease_expires_ms is not None:
        return entry.lease_expires_ms
    return entry.timestamp_ms + default_lease_ms


def verdict(entry: LineageEntry, facts: Liveness | None, *, now_ms: int, default_lease_ms: int) -> Verdict:
    if entry.staged:
        return Verdict(STAGED, "staged (publish=False): waiting to be published or rolled back", None)
    expires = lease_end(entry, facts, default_lease_ms=default_lease_ms)
    if facts is not None and facts.writer_gave_up:
        return Verdict(DEAD, f"its writer gave up on it (could not write its abort): {facts.detail}", expires)
    if facts is not None and facts.process_gone:
        return Verdict(DEAD, f"owner died: {facts.detail}", expires)
    if expires <= now_ms:
        return Verdict(EXPIRED, f"lease expired at {_iso(expires)}", expires)
    return Verdict(ALIVE, f"owner alive: {facts.detail}" if facts else "owner not checked", expires)


def blocking_entries(current: Snapshot, replaced: Sequence[str], *, scope: PushScope | None = None) -> list[LineageEntry]:
    """IN_PROGRESS entries in the way of a push replacing ``replaced`` within ``scope`` (None: the whole table).

    One blocks when it holds a segment the push replaces, or when the two may replace the
    same rows: two whole-table pushes that both replace nothing (two pushes into an empty
    table), or scopes that overlap (``push_scopes.scopes_overlap``; a whole-table push
    overlaps every scoped one). Pushes on disjoint partitions pass each other by."""
    ours = set(replaced)
    out = []
    for entry in sorted(current.lineage.values(), key=lambda e: e.started_version):
        if entry.state != LineageState.IN_PROGRESS:
            continue
        theirs = set(entry.segments_from)
        if ours & theirs:
            out.append(entry)
        elif scope is None and entry.scope is None:
            if not ours and not theirs:
                out.append(entry)
        elif scopes_overlap(scope, entry.scope):
            out.append(entry)
    return out


def _what(entry: LineageEntry, scope: PushScope | None, replaced: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """What a blocking entry and a new push share, in words, and the shared partitions' labels."""
    if scope is None and entry.scope is None:
        return "the same segments", ()
    shared = shared_partitions(scope, entry.scope)
    if shared:
        return describe_scope(entry.scope, only=shared), tuple(shared)
    if entry.scope is None:
        return "the whole table", ()
    if scope is not None and scope.spec_id != entry.scope.spec_id:
        return f"{describe_scope(entry.scope)} of partition spec {entry.scope.spec_id} (this push uses spec {scope.spec_id})", ()
    if set(replaced) & set(entry.segments_from):
        return f"the same segments ({describe_scope(entry.scope)})", ()
    return describe_scope(entry.scope), ()


@dataclass(frozen=True)
class PushClaim:
    """What a new push brings to its start.

    Its owner and lease period, the liveness facts the connector gathered before committing
    (an entry they do not cover appeared since, and counts as alive), and the clock those
    facts were read at."""

    owner: PushOwner | None
    lease_ms: int
    now_ms: int
    liveness: Mapping[str, Liveness] = field(default_factory=dict)

    @property
    def lease_expires_ms(self) -> int:
        return self.now_ms + self.lease_ms


def recover_blocked(
    current: Snapshot, replaced: Sequence[str], claim: PushClaim, *, scope: PushScope | None = None
) -> list[LineageRevert]:
    """The reverts that clear the way for a push replacing ``replaced`` within ``scope``.

    Raises:
        PushInProgressError: A push over the same segments or partitions is alive (its owner
            runs, or its lease holds); the message names the partitions and the owner.
        StagedPushError: A staged push holds the same segments or partitions."""
    reverts: list[LineageRevert] = []
    for entry in blocking_entries(current, replaced, scope=scope):
        facts = claim.liveness.get(entry.id)
        v = verdict(entry, facts, now_ms=claim.now_ms, default_lease_ms=claim.lease_ms)
        if facts is None and v.kind != STAGED:  # it appeared after the facts were read: alive
            v = Verdict(ALIVE, "started after this push looked", v.lease_expires_ms)
        over, partitions = _what(entry, scope, replaced)
        if v.kind == STAGED and entry.id.startswith(TRANSACTION_ENTRY_PREFIX):
            raise PushInProgressError(
                f"lineage entry {entry.id} is a multi-table transaction prepared over {over}; it is "
                "finished by its decision, or aborted by the next writer once its owner is gone or its lease ends",
                entry_id=entry.id,
                owner=entry.owner.describe() if entry.owner is not None else "an unknown writer",
                lease_expires_ms=v.lease_expires_ms,
                partitions=partitions,
            )
        if v.kind == STAGED:
            raise StagedPushError(
                f"lineage entry {entry.id} is a staged push over {over}; publish or rollback it first "
                f"(mvtable publish … --entry {entry.id} / mvtable rollback … --entry {entry.id})",
                entry_id=entry.id,
            )
        if v.kind == ALIVE:
            owner = entry.owner.describe() if entry.owner is not None else "an unknown writer"
            raise PushInProgressError(
                f"lineage entry {entry.id} is a consistent push in progress over {over}, owned by {owner}; "
                f"its lease ends at {_iso(v.lease_expires_ms or 0)}. Wait for it, or roll it back if you know it is dead",
                entry_id=entry.id,
                owner=owner,
                lease_expires_ms=v.lease_expires_ms,
                partitions=partitions,
            )
        reverts.append(LineageRevert(entry_id=entry.id, reason=f"cleaned up by a new push: {v.reason}"))
    return reverts
