"""Finishing multi-table transactions that someone else started: the I/O around ``lineage.transactions``.

Whoever finds a transaction's entry in a table — the transaction's own driver, the next
writer of the table, a consistent read, vacuum — reads the decision objects at the
coordinator and finalizes the entry the way they say (``settle``). A prepared entry with no
decision is left alone while its owner lives; once its owner provably died, its writer gave
up, or its lease ran out, the finder writes ABORTED put-if-absent (losing that race to a
live owner's COMMITTED is fine: both read back the one that stands) and reverts it.

The owner renews its lease in the coordinator's lease folder
(``_mvtable/leases/<transaction id>.json``, the file a consistent push renews), so one
file says for every participant whether the owner still works.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap64

from mvtable.conf import TableProperties
from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptMetadataError, NothingToCommit
from mvtable.lineage import transactions as protocol
from mvtable.lineage.actions import Action, TransactionPrepare
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.ownership import verdict
from mvtable.lineage.snapshot import LineageEntry, Snapshot
from mvtable.lineage.transactions import Outcome
from mvtable.paths import location_uri
from mvtable.storage import FileIO, open_file_io
from mvtable.visibility import load_dv, process_cache, write_dvs

from . import liveness_of
from .leases import now_ms as wall_ms
from .transaction_decisions import Decision, decide, read_decision

logger = logging.getLogger("mvtable.connector")

__all__ = ["PreparedPart", "Stores", "finalize_part", "prepared_part", "recover_table", "settle", "standing_target"]


@dataclass(frozen=True)
class PreparedPart:
    """What a participant's prepare commit recorded."""

    transaction_id: str
    participants: tuple[str, ...]
    decision_uri: str
    clones: dict[str, str]
    version: int


class Stores:
    """Opens the other tables a transaction names, with the storage options the caller brought.

    Options are never in the log (they may hold credentials): a URI the caller passed
    options for uses those, any other URI the options of the table being worked on (most
    transactions span one bucket or one disk)."""

    def __init__(self, default: Mapping[str, Any] | None = None, known: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.default = dict(default or {})
        self.known = {uri: dict(opts) for uri, opts in (known or {}).items()}
        self._open: dict[str, FileIO] = {}

    def add(self, io: FileIO, options: Mapping[str, Any]) -> None:
        self.known[io.uri] = dict(options)
        self._open[io.uri] = io

    def io(self, uri: str) -> FileIO:
        io = self._open.get(uri)
        if io is None:
            io = self._open[uri] = open_file_io(uri, self.known.get(uri, self.default))
        return io

    def options(self, uri: str) -> dict[str, Any]:
        return self.known.get(uri, self.default)


_PREPARED: dict[tuple[str, str, int], PreparedPart] = {}
_PREPARED_MAX = 4096


def _prepared(uri: str, transaction_id: str, version: int, commit_log: CommitLog) -> PreparedPart:
    key = (uri, transaction_id, version)
    found = _PREPARED.get(key)
    if found is None:
        if len(_PREPARED) >= _PREPARED_MAX:
            _PREPARED.clear()
        found = _PREPARED[key] = _read_prepared(uri, transaction_id, version, commit_log)
    return found


def _read_prepared(uri: str, transaction_id: str, version: int, commit_log: CommitLog) -> PreparedPart:
    commit = commit_log.read_commit(version)
    for action in commit.actions:
        if isinstance(action, TransactionPrepare) and action.transaction_id == transaction_id:
            return PreparedPart(
                transaction_id,
                tuple(action.participants),
                action.decision_uri,
                dict(action.clones),
                version,
            )
    raise CorruptMetadataError(
        f"{uri} log version {version}", f"starts transaction entry {transaction_id} but holds no transaction prepare"
    )


def prepared_part(commit_log: CommitLog, entry: LineageEntry) -> PreparedPart:
    """The prepare record of a transaction's entry (read once per process: commits never change).

    Raises:
        CorruptMetadataError: The entry's start commit holds no prepare record of it.
        VersionNotFoundError: The start commit is gone from the log (past log retention)."""
    return _prepared(commit_log.io.uri, entry.id, entry.started_version, commit_log)


def standing_target(io: FileIO, transaction_id: str) -> tuple[Decision | None, bool]:
    """(the decision, whether a rollback was decided) at the coordinator ``io``.

    Raises:
        CorruptMetadataError: A decision object is damaged."""
    return read_decision(io, transaction_id), read_decision(io, transaction_id, rollback=True) is not None


def _clone_dvs(
    io: FileIO, current: Snapshot, clones: Mapping[str, str], *, inline_max_bytes: int
) -> dict[str, DeletionVectorRef]:
    """Deletes committed to the segments a transaction's clones replace since its prepare, merged into the clones."""
    cache = process_cache()
    merged: dict[str, BitMap64] = {}
    for clone, original in clones.items():
        theirs, ours = current.dvs.get(original), current.dvs.get(clone)
        if theirs is None or clone not in current.segments:
            continue
        mine = load_dv(io, ours, cache=cache) if ours is not None else BitMap64()
        union = mine | load_dv(io, theirs, cache=cache)
        if len(union) != len(mine):
            merged[clone] = union
    if not merged:
        return {}
    files = {sid: location_uri(io.uri, current.segments[sid].file.path) for sid in merged}
    return write_dvs(io, merged, inline_max_bytes=inline_max_bytes, data_files=files)


def finalize_part(
    commit_log: CommitLog,
    transaction_id: str,
    target: LineageState,
    *,
    clones: Mapping[str, str] | None = None,
    reason: str | None = None,
    operation: Operation | None = None,
) -> int | None:
    """Commit one participant's finalize; the version it landed at, or None when the entry was there already.

    Raises:
        CommitConflictError: The finalize cannot be applied (a rolled-back part whose segments
            were replaced since: see ``TransactionRollbackError``).
        StorageError: The store refused the commit."""
    if operation is None:
        operation = Operation.TXN_COMMIT if target == LineageState.COMPLETED else Operation.TXN_ABORT
    current = commit_log.snapshot()

    def build(cur: Snapshot) -> list[Action]:
        dvs: dict[str, DeletionVectorRef] = {}
        if target == LineageState.COMPLETED and clones:
            inline = TableProperties.tolerant(cur.properties)[0].dv_inline_max_bytes
            dvs = _clone_dvs(commit_log.io, cur, clones, inline_max_bytes=inline)
        return protocol.finalize(cur, transaction_id, target=target, reason=reason, dvs=dvs)

    try:
        result = commit_log.commit(read=current, operation=operation, parameters={"transaction": transaction_id}, build=build)
    except NothingToCommit:
        return None
    return result.commit.version


def settle(commit_log: CommitLog, entry: LineageEntry, *, stores: Stores, now_ms: int | None = None) -> LineageState | None:
    """Bring one transaction entry of this table where the decisions say; the state they say, or None (undecided, owner alive).

    A prepared entry whose owner is gone (or whose lease ran out) gets the decision ABORTED
    first, put-if-absent.

    Raises:
        CorruptMetadataError: A decision object or the prepare record is damaged.
        StorageError: The store refused a read or the finalize commit."""
    part = prepared_part(commit_log, entry)
    coordinator = stores.io(part.decision_uri)
    decision, rolled_back = standing_target(coordinator, entry.id)
    if decision is None and not rolled_back and entry.state == LineageState.IN_PROGRESS:
        facts = liveness_of(coordinator, entry)
        snapshot_props = TableProperties.tolerant(commit_log.snapshot().properties)[0]
        now = wall_ms() if now_ms is None else now_ms
        v = verdict(dataclasses.replace(entry, staged=False), facts, now_ms=now, default_lease_ms=snapshot_props.push_lease_ms)
        if not v.recoverable:
            return None
        decision = decide(coordinator, entry.id, Outcome.ABORTED, participants=part.participants, reason=v.reason)
        logger.warning("transaction %s: decided %s (%s)", entry.id, decision.outcome, v.reason)
    target = protocol.target_state(decision.outcome if decision else None, rolled_back=rolled_back)
    if target is None:
        return None
    if protocol.step(entry, target) != protocol.Step.NONE:
        reason = f"transaction {entry.id} {'rolled back' if rolled_back else str(decision.outcome if decision else '')}"
        op = Operation.TXN_ROLLBACK if rolled_back else None
        finalize_part(commit_log, entry.id, target, clones=part.clones, reason=reason.lower(), operation=op)
    return target


def recover_table(commit_log: CommitLog, snapshot: Snapshot, *, stores: Stores) -> list[str]:
    """Settle every prepared transaction entry of a table; the ids of those finalized.

    What the next writer of a table runs before it writes: decided transactions are
    finalized, those of dead owners aborted, live ones left alone.

    Raises:
        CorruptMetadataError: A decision object or a prepare record is damaged.
        StorageError: The store refused a read or a finalize commit."""
    done: list[str] = []
    for entry in protocol.transaction_entries(snapshot):
        if entry.state == LineageState.IN_PROGRESS and settle(commit_log, entry, stores=stores) is not None:
            done.append(entry.id)
    return done
