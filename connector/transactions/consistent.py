"""One version per table such that every multi-table transaction is in all of them or in none.

A plain reader of two tables can open the first just before a transaction's finalize
commit lands there and the second just after: it sees half the transaction.
``consistent_versions`` reads every table, finishes what the decisions say is finished
(``recovery.settle``), and re-reads the tables whose versions disagree about a transaction
until none does (``lineage.transactions.mismatched``). Versions only move forward, so it
ends as soon as no transaction finalizes under its feet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from mvtable.conf import TableProperties
from mvtable.errors import InvalidOptionError, TooManyRetriesError
from mvtable.lineage import transactions as protocol
from mvtable.lineage.enums import LineageState
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import LocalFileIO, open_file_io

from ..parallel import ordered_map
from ..post_commit import open_log
from ..recovery.leases import now_ms as wall_ms
from ..recovery.transaction_decisions import read_decision
from ..recovery.transactions import PreparedPart, Stores, prepared_part, recover_table, settle
from .tables import TableRef, resolve

__all__ = ["consistent_versions", "open_tables"]

_MAX_ROUNDS = 32


def open_tables(
    tables: Sequence[TableRef | str], storage_options: Mapping[str, Any] | None
) -> tuple[list[tuple[str, str, CommitLog]], Stores]:
    """(given name, canonical URI, commit log) per table, and the stores that open the others a transaction names.

    Raises:
        InvalidOptionError: ``tables`` is empty or holds something other than tables and URIs."""
    if isinstance(tables, (str, TableRef)) or not isinstance(tables, Sequence) or not tables:
        raise InvalidOptionError("pass a list of tables (Table objects or URIs)")
    opened: list[tuple[str, str, CommitLog]] = []
    stores = Stores(storage_options)
    for t in tables:
        name, options = resolve(t, storage_options)
        commit_log = getattr(t, "commit_log", None)  # a Table's own log: not a second one of the same table
        if not isinstance(commit_log, CommitLog):
            commit_log = open_log(open_file_io(name, options))
        stores.add(commit_log.io, options)
        if not stores.default:
            stores.default = dict(options)
        opened.append((name, commit_log.io.uri, commit_log))
    return opened, stores


def _purged(newest: Snapshot, record: PreparedPart | None, stores: Stores) -> bool:
    """Whether a participant that holds no entry of a transaction at its newest version lost it to lineage retention.

    Retention purges an entry no sooner than the table's retention periods after it was
    finalized, and vacuum collects the decision only once every entry is gone; so while the
    decision is younger than those periods, the entry must still be there, and its absence
    means the store does not show the prepare yet (object stores may answer a new key with a
    404 for a moment)."""
    if record is None:
        return True
    decision = read_decision(stores.io(record.decision_uri), record.transaction_id)
    if decision is None:
        return True
    props, _ = TableProperties.tolerant(newest.properties)
    keep_s = min(props.replaced_segments_retention_s, props.lineage_entry_retention_s)
    return wall_ms() - decision.timestamp_ms >= keep_s * 1000


def _holders(snapshots: Mapping[str, Snapshot]) -> dict[str, tuple[tuple[str, ...], int]]:
    """Each transaction the snapshots hold: (the tables holding an entry of it, how many of them show it)."""
    held: dict[str, list[str]] = {}
    shown: dict[str, int] = {}
    for uri, snapshot in snapshots.items():
        for txn, entry in snapshot.lineage.items():
            if txn.startswith(protocol.TRANSACTION_PREFIX):  # is_transaction, inline: this loop sees every entry
                held.setdefault(txn, []).append(uri)
                if entry.state == LineageState.COMPLETED:
                    shown[txn] = shown.get(txn, 0) + 1
    return {txn: (tuple(uris), shown.get(txn, 0)) for txn, uris in held.items()}


def consistent_versions(tables: Sequence[TableRef | str], *, storage_options: Mapping[str, Any] | None = None) -> dict[str, int]:
    """One version per table (keyed as given: a ``Table``'s ``uri`` or the URI string) showing every transaction whole.

    Read each table at its version (``Table.to_arrow(version=…)``, Spark's ``versionAsOf``):
    a transaction that wrote several of them is then in all of them or in none. Decided but
    unfinalized transactions are finalized on the way, and prepared ones whose owner died
    are aborted.

    Raises:
        InvalidOptionError: ``tables`` is empty or holds something other than tables and URIs.
        TableNotFoundError: A table does not exist.
        TooManyRetriesError: Transactions kept finalizing faster than the tables could be read.
        CorruptMetadataError: A log file, decision object or prepare record is damaged.
        StorageError: The store refused a read or a finalize commit.
    """
    opened, stores = open_tables(tables, storage_options)
    logs = {uri: commit_log for _, uri, commit_log in opened}

    def read(commit_log: CommitLog) -> Snapshot:
        # read only, never changed here: the cached checkpoint itself when nothing follows it
        snapshot = commit_log.snapshot(shared=True)
        if protocol.has_prepared(snapshot) and recover_table(commit_log, snapshot, stores=stores):
            snapshot = commit_log.catch_up(snapshot)
        return snapshot

    # an object store answers each table's reads after a round trip: read them side by side
    remote = any(not isinstance(commit_log.io, LocalFileIO) for commit_log in logs.values())
    snapshots = dict(zip(logs, ordered_map(read, logs.values(), workers=len(logs) if remote else 1)))
    purged: set[tuple[str, str]] = set()
    records: dict[str, PreparedPart] = {}
    for round_ in range(_MAX_ROUNDS):
        participants: dict[str, tuple[str, ...]] = {}
        for txn, (holders, shown) in _holders(snapshots).items():
            if not shown or (len(holders) == len(snapshots) and shown == len(holders)):
                continue  # none shows it, or every table does: whole, no prepare record to read
            if len(holders) == len(snapshots):
                participants[txn] = holders  # every table holds it: their entries say it all
                continue
            if txn not in records:
                records[txn] = prepared_part(logs[holders[0]], snapshots[holders[0]].lineage[txn])
            participants[txn] = tuple(p for p in records[txn].participants if (txn, p) not in purged)
        bad = protocol.mismatched(snapshots, participants)
        if not bad:
            return {name: snapshots[uri].version for name, uri, _ in opened}
        stale: set[str] = set()
        for txn, uris in bad.items():
            for uri in uris:
                found = snapshots[uri].lineage.get(txn)
                if found is not None:
                    settle(logs[uri], found, stores=stores)
                stale.add(uri)
        lagging = False
        for uri in stale:
            newest = logs[uri].catch_up(snapshots[uri])
            for txn, uris in bad.items():
                if uri in uris and txn not in newest.lineage and newest.version == snapshots[uri].version:
                    if _purged(newest, records.get(txn), stores):
                        purged.add((txn, uri))
                    else:
                        lagging = True
            snapshots[uri] = newest
        if lagging:  # the store does not show a participant's prepare yet: ask again shortly
            time.sleep(min(0.5, 0.02 * (round_ + 1)))
    raise TooManyRetriesError(f"transactions kept finalizing while {len(logs)} tables were read {_MAX_ROUNDS} times; try again")
