"""Lineage retention (Pinot's two retention periods), as pure functions of a snapshot and a clock.

* Segments a COMPLETED entry replaced are kept ``replacedSegmentsRetentionPeriod`` after
  the entry completed, so the push can be rolled back; then they are removed and the entry
  is purged (it can no longer be reverted).
* REVERTED entries are cleaned up ``lineageEntryCleanupRetentionPeriod`` after their last
  change: the segments they hide are removed and the entry purged. IN_PROGRESS entries of
  a dead writer (``ownership``: its process is gone or its lease ran out) are reverted,
  and cleaned up the same way once that old; staged ones are left to a person.
* Starting a push removes the snapshots older than the previous one, so storage holds at
  most two snapshots besides the one being pushed; per scope for a scoped push (the
  snapshots of other partitions stay, so their last push can still be rolled back).

Ages come from the commit times recorded in the log (``LineageEntry.timestamp_ms``), never
from file modification times. Removal is logical here; vacuum deletes the files later,
once no retained version needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .actions import Action, LineagePurge, LineageRevert, RemoveSegment
from .enums import LineageState
from .ownership import Verdict
from .push_scopes import PushScope, scopes_overlap
from .snapshot import LineageEntry, Snapshot


@dataclass(frozen=True)
class EntryCleanup:
    entry_id: str
    state: str
    reason: str
    actions: tuple[Action, ...]

    @property
    def removed_segments(self) -> int:
        return sum(isinstance(a, RemoveSegment) for a in self.actions)


def _remove_then_purge(s: Snapshot, entry: LineageEntry, hidden: tuple[str, ...]) -> list[Action]:
    actions: list[Action] = [
        RemoveSegment(segment_id=sid) for sid in hidden if sid in s.segments and s.segments[sid].removed_version is None
    ]
    actions.append(LineagePurge(entry_id=entry.id))
    return actions


def plan_entry_cleanup(
    s: Snapshot,
    *,
    now_ms: int,
    replaced_retention_s: float,
    entry_retention_s: float,
    verdicts: Mapping[str, Verdict] | None = None,
) -> list[EntryCleanup]:
    """Entries due for cleanup, oldest first, each with the actions that clean it up.

    IN_PROGRESS entries: a staged one is never touched (it waits for a person); otherwise
    ``verdicts`` (``ownership.verdict`` of each, gathered by the connector) decide: a dead
    or expired push is reverted with its reason, and once it is also older than the entry
    retention its segments go and the entry is purged in the same commit. Without
    verdicts, age alone decides (an entry older than the entry retention is stale)."""
    out: list[EntryCleanup] = []
    for entry in sorted(s.lineage.values(), key=lambda e: e.state_version):
        age_s = (now_ms - entry.timestamp_ms) / 1000
        if entry.state == LineageState.COMPLETED and age_s >= replaced_retention_s:
            out.append(
                EntryCleanup(
                    entry.id,
                    entry.state,
                    "replaced segments past retention",
                    tuple(_remove_then_purge(s, entry, entry.segments_from)),
                )
            )
        elif entry.state == LineageState.REVERTED and age_s >= entry_retention_s:
            out.append(
                EntryCleanup(
                    entry.id, entry.state, "reverted entry past retention", tuple(_remove_then_purge(s, entry, entry.segments_to))
                )
            )
        elif entry.state == LineageState.IN_PROGRESS and not entry.staged:
            verdict = verdicts.get(entry.id) if verdicts is not None else None
            if verdict is not None and not verdict.recoverable:
                continue
            if verdict is None and (verdicts is not None or age_s < entry_retention_s):
                continue
            reason = f"cleaned up by vacuum: {verdict.reason}" if verdict is not None else "cleaned up by vacuum: stale push"
            actions: list[Action] = [LineageRevert(entry_id=entry.id, reason=reason)]
            if age_s >= entry_retention_s:
                actions += _remove_then_purge(s, entry, entry.segments_to)
            out.append(EntryCleanup(entry.id, entry.state, reason, tuple(actions)))
    return out


def keep_two_snapshots(s: Snapshot, *, scope: PushScope | None = None) -> list[Action]:
    """Actions for the start of a new push within ``scope`` (None: the whole table): drop every COMPLETED entry of that scope but the newest.

    An entry is of the scope when the two overlap (``push_scopes.scopes_overlap``). Each
    dropped entry goes with the segments it replaced, so what remains of that scope is the
    snapshot before the previous one, while the last push of every other partition can
    still be rolled back."""
    completed = sorted(
        (e for e in s.lineage.values() if e.state == LineageState.COMPLETED and scopes_overlap(scope, e.scope)),
        key=lambda e: e.state_version,
    )
    actions: list[Action] = []
    for entry in completed[:-1]:
        actions.extend(_remove_then_purge(s, entry, entry.segments_from))
    return actions
