"""Rolling back a consistent push, restoring a version, publishing a staged push.

Each is one commit and idempotent: asked twice (a retried Spark task runs a UDTF again),
the second call sees that the table already looks as asked and commits nothing, and says
so in its result."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap64

from mvtable import checks
from mvtable.dvref import DeletionVectorRef
from mvtable.errors import FilesMissingError, InvalidLineageTransitionError, NothingToCommit, VersionNotFoundError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, MetadataAction
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import Builder, CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.transactions import is_transaction
from mvtable.visibility import encode_dv

from . import write_intents
from .keys.publish import commit_publish
from .keys.rollback import commit_rollback
from .segments import new_segment_id

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionResult:
    """What a lifecycle call did.

    ``changed`` is False when the table already was as asked (``version`` is then the version that
    made it so, or the current one)."""

    operation: Operation
    version: int
    changed: bool
    message: str


def _entry(commit_log: CommitLog, entry_id: str):
    snapshot = commit_log.snapshot()
    entry = snapshot.lineage.get(entry_id)
    if entry is None:
        known = ", ".join(sorted(snapshot.lineage)[-5:]) or "none"
        raise InvalidLineageTransitionError(f"no lineage entry {entry_id!r} in {commit_log.io.uri} (recent entries: {known})")
    return snapshot, entry


def _transition(
    commit_log: CommitLog,
    entry_id: str,
    *,
    operation: Operation,
    target: LineageState,
    allowed: tuple[LineageState, ...],
    build_actions,
    commit: Callable[[Snapshot, Builder], CommitResult] | None = None,
) -> ActionResult:
    """Move one lineage entry to ``target`` in one commit, or report that it is there already.

    Also when a concurrent or retried call got there first. ``commit(snapshot, build)`` lands the
    commit when plain ``CommitLog.commit`` is not enough."""
    if is_transaction(entry_id):  # one table's part alone would break the transaction's all-or-nothing
        raise InvalidLineageTransitionError(
            f"lineage entry {entry_id} is a multi-table transaction's part; roll the transaction back as one "
            f"(mvtable.rollback_transaction({entry_id!r}, tables=…) / mvtable rollback --transaction {entry_id})"
        )
    snapshot, entry = _entry(commit_log, entry_id)
    if entry.state == target:
        return ActionResult(operation, entry.state_version, False, f"lineage entry {entry_id} is already {target}")
    if entry.state not in allowed:
        raise InvalidLineageTransitionError(
            f"lineage entry {entry_id} is {entry.state}; {operation.lower()} needs it to be {' or '.join(allowed)}"
        )

    def build(cur):
        now = cur.lineage.get(entry_id)
        if now is not None and now.state == target:
            raise NothingToCommit(f"lineage entry {entry_id} is already {target}")
        return build_actions(cur, entry_id)

    try:
        if commit is None:
            result = commit_log.commit(read=snapshot, operation=operation, parameters={"entry": entry_id}, build=build)
        else:
            result = commit(snapshot, build)
    except NothingToCommit as done:
        return ActionResult(operation, commit_log.snapshot().lineage[entry_id].state_version, False, str(done))
    return ActionResult(operation, result.commit.version, True, f"lineage entry {entry_id}: {entry.state} → {target}")


def rollback_entry(commit_log: CommitLog, entry_id: str) -> ActionResult:
    """Roll back lineage entry ``entry_id``, as Pinot's ``revertReplaceSegments`` does.

    The entry becomes REVERTED and readers flip back to the snapshot it replaced (with that
    snapshot's deletes, untouched meanwhile). On a keyed table the rows that come back are first
    checked against what was committed since the push (``keys.rollback``).

    A push that replaced the schema (``overwrite_schema``) is rolled back with it: the schema
    before the push comes back in the same commit, so the old rows read as they were.

    Raises:
        DuplicateKeyError: A key would be in the table twice; nothing was committed."""
    io = commit_log.io
    before = _schema_before(commit_log, entry_id)

    def commit(snapshot: Snapshot, build: Builder) -> CommitResult:
        return commit_rollback(io, commit_log, snapshot, entry_id, build=build, parameters={"entry": entry_id})

    def revert(cur: Snapshot, eid: str) -> list[Action]:
        actions: list[Action] = list(ops.revert(cur, eid))
        if before is not None and cur.table_schema != before:
            actions.append(
                MetadataAction(
                    table_id=cur.table_id,
                    table_schema=before,
                    properties=dict(cur.properties),
                    schema_id=cur.schema_id + 1,
                    last_field_id=cur.last_field_id,
                )
            )
        return actions

    return _transition(
        commit_log,
        entry_id,
        operation=Operation.ROLLBACK,
        target=LineageState.REVERTED,
        allowed=(LineageState.IN_PROGRESS, LineageState.COMPLETED),
        build_actions=revert,
        commit=commit,
    )


def _schema_before(commit_log: CommitLog, entry_id: str) -> dict[str, Any] | None:
    """The schema the table had before push ``entry_id`` replaced it, or None when its publishing commit changed no schema.

    None too when GC has removed the log around the push (past ``versionRetentionPeriod``):
    the rows still roll back, under the current schema (old segments read by field id), and
    a warning says the schema was kept."""
    entry = commit_log.snapshot().lineage.get(entry_id)
    if entry is None or entry.state != LineageState.COMPLETED:
        return None  # a push changes the schema only as it publishes
    try:
        published = commit_log.read_commit(entry.state_version)
        if not any(isinstance(a, MetadataAction) for a in published.actions):
            return None
        return commit_log.snapshot(entry.state_version - 1).table_schema
    except VersionNotFoundError:
        logger.warning(
            "rollback of push %s: the log around version %s was garbage-collected, so whether the push changed the "
            "schema is unknown; the rows roll back under the current schema",
            entry_id,
            entry.state_version,
        )
        return None


def publish_entry(commit_log: CommitLog, entry_id: str) -> ActionResult:
    """Complete a staged (``publish=false``) consistent push.

    On a keyed table the push's keys are first checked against what was committed since it was
    staged (``keys.publish``).

    Raises:
        DuplicateKeyError: A key would be in the table twice; the push stays staged."""
    io = commit_log.io

    def commit(snapshot: Snapshot, build: Builder) -> CommitResult:
        return commit_publish(io, commit_log, snapshot, entry_id, build=build, parameters={"entry": entry_id})

    return _transition(
        commit_log,
        entry_id,
        operation=Operation.PUBLISH,
        target=LineageState.COMPLETED,
        allowed=(LineageState.IN_PROGRESS,),
        build_actions=ops.publish,
        commit=commit,
    )


def _commit_restore(
    commit_log: CommitLog, current: Snapshot, target: Snapshot, version: int, needed: set[str]
) -> CommitResult | None:
    """The restore commit (``None``: an identical restore landed first)."""
    missing = sorted(p for p in needed if not commit_log.io.exists(p))
    if missing:
        raise FilesMissingError(
            f"cannot restore version {version}: vacuum already removed {len(missing)} file(s) it needs "
            f"(first: {missing[0]}); pick a version inside the retention window"
        )
    new_ids = {sid: new_segment_id() for sid in target.visible_segment_ids()}
    empty = _empty_dv()

    def build(cur: Snapshot) -> list[Action]:
        if ops.same_view(cur, target):  # an identical restore landed first
            raise NothingToCommit(f"the table already shows version {version}")
        return ops.restore(cur, target, new_ids=new_ids, empty_dv=empty)

    try:
        return commit_log.commit(read=current, operation=Operation.RESTORE, parameters={"version": version}, build=build)
    except NothingToCommit:
        return None


def _empty_dv() -> DeletionVectorRef:
    return DeletionVectorRef(cardinality=0, inline=base64.b64encode(encode_dv(BitMap64())).decode())


def restore_version(commit_log: CommitLog, version: int) -> ActionResult:
    """Restore ``version``, as Delta's ``RESTORE`` and Iceberg's ``rollback_to_snapshot`` do.

    One new commit whose visible segments and deletion vectors equal ``version``'s. History stays,
    so a restore can itself be undone by restoring the version before it."""
    version = checks.version(version)
    target = commit_log.snapshot(version)
    current = commit_log.snapshot()
    if ops.same_view(current, target):
        return ActionResult(Operation.RESTORE, current.version, False, f"the table already shows version {version}")
    needed = {seg.file.path for seg in target.visible_segments()}
    needed |= {ref.path for sid, ref in target.dvs.items() if ref.path and sid in set(target.visible_segment_ids())}
    # an intent naming the files before they are checked: vacuum keeps them until the commit
    intent = write_intents.take(commit_log.io, operation="restore", paths=sorted(needed))
    try:
        with write_intents.IntentKeeper(commit_log.io, intent, renew_first=False):
            result = _commit_restore(commit_log, current, target, version, needed)
    finally:
        write_intents.release(commit_log.io, intent)
    if result is None:
        return ActionResult(Operation.RESTORE, commit_log.latest_version(), False, f"the table already shows version {version}")
    return ActionResult(Operation.RESTORE, result.commit.version, True, f"restored the table as of version {version}")
