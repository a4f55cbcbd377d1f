"""``with mvtable.transaction() as tx:`` — writes to several tables that land all together or not at all.

Each call (``append``, ``overwrite``, ``delete``) writes its files at once, under a write
intent, and commits nothing. Leaving the block runs the two-phase commit of
``lineage.transactions``: one prepare commit per table (invisible, holding what it
replaces), one decision object at the coordinator (the first table touched), one finalize
commit per table. An exception inside the block, or a conflict in any table's prepare,
aborts every table: nothing becomes visible, the files are left for vacuum.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from mvtable import checks, faults
from mvtable.conf import TableProperties
from mvtable.dvref import DeletionVectorRef
from mvtable.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    InvalidLineageTransitionError,
    InvalidOptionError,
    TransactionAbortedError,
    TransactionConflictError,
)
from mvtable.ids import new_entry_id
from mvtable.lineage import transactions as protocol
from mvtable.lineage.actions import Action, MetadataAction, SegmentFile
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.transactions import Outcome
from mvtable.paths import location_uri
from mvtable.storage import FileIO
from mvtable.visibility import bitmap_from_array, load_dv, process_cache, write_dvs

from .. import recovery as push_recovery
from .. import scoped_push, write_intents, writes
from ..deletes import matching_positions
from ..expressions import check_filter, referenced_columns
from ..keys.commit import KeyedRows, check_absent, commit_keyed, keyed_rows, lookup, write_keyed
from ..keys.validate import check_unique
from ..parallel import ordered_map
from ..partitions.writing import write_partitioned
from ..recovery.transaction_decisions import Decision, decide, read_decision
from ..recovery.transactions import Stores, finalize_part, recover_table
from ..results import TransactionResult
from ..scan import plan_scan
from ..schema import schema_from_json
from ..scoped_push import ScopedPlan, ScopeRequest
from ..segments import new_segment_id
from ..upsert import require_key
from .tables import TableRef, resolve

logger = logging.getLogger("mvtable.connector")

__all__ = ["Transaction"]


@dataclass
class _Part:
    """One participant table: what the transaction's calls wrote to it so far."""

    uri: str
    options: dict[str, Any]
    io: FileIO
    commit_log: CommitLog
    create: MetadataAction | None = None
    replaced: list[str] = field(default_factory=list)
    segments: list[SegmentFile] = field(default_factory=list)
    deletes: dict[str, BitMap64] = field(default_factory=dict)  # segment id → rows this transaction deletes
    plans: list[writes.WritePlan] = field(default_factory=list)
    intents: list[write_intents.WriteIntent] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    clones: dict[str, tuple[SegmentFile, DeletionVectorRef]] = field(default_factory=dict)
    # the segment (and its deletion vector) each delete was found in, as the snapshot it was read from had them
    delete_bases: dict[str, tuple[SegmentDescriptor, DeletionVectorRef | None]] = field(default_factory=dict)
    cloned: dict[str, int] = field(default_factory=dict)  # segment id → rows its clone's DV was written with
    key: tuple[str, ...] = ()  # the table's primary key (its writes are checked like a keyed write's)
    rows: KeyedRows | None = None  # the keys this transaction writes to the table
    key_read: Snapshot | None = None  # the snapshot those keys were first checked against
    upsert: bool = False  # the keyed writes are upserts (rows with the same key are replaced)
    # a scoped overwrite (replace_where, dynamic partition overwrite): the partitions the entry
    # replaces, the segments it replaces and those it copies on write (``scoped_push``)
    scoped: ScopedPlan | None = None
    prepared: bool = False
    version: int | None = None


class Transaction:
    """A multi-table transaction: ``with mvtable.transaction() as tx:`` then writes through ``tx``.

    Leaving the block commits every table's writes together (``result`` holds each table's
    finalized version); an exception inside it aborts them all. ``id`` names the
    transaction in every table's lineage and history.

    Raises:
        InvalidOptionError: A call after the transaction ended.
    """

    def __init__(self, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self.id = new_entry_id(protocol.TRANSACTION_PREFIX.rstrip("-"))
        self.storage_options = dict(storage_options or {})
        self.result: TransactionResult | None = None
        self._parts: dict[str, _Part] = {}
        self._keepers = contextlib.ExitStack()
        self._done = False

    # -- the calls --------------------------------------------------------------------------
    def _part(self, table: TableRef | str, storage_options: Mapping[str, Any] | None) -> _Part:
        if self._done:
            raise InvalidOptionError(f"transaction {self.id} has ended; start a new one")
        uri, options = resolve(table, storage_options if storage_options is not None else self.storage_options)
        from mvtable.storage import open_file_io

        from ..post_commit import open_log

        io = open_file_io(uri, options)
        part = self._parts.get(io.uri)
        if part is None:
            part = self._parts[io.uri] = _Part(io.uri, dict(options), io, open_log(io))
        return part

    def _begin(self, part: _Part, schema: pa.Schema, *, mode: str, scope: ScopeRequest | None = None) -> writes.WritePlan:
        """Plan one call's write to ``part``: the files are named after its intent, an overwrite drops the calls before it.

        With ``scope`` the overwrite is a scoped push's: it replaces only what the scope
        covers at the read snapshot (``writes.plan_scope``), planned before the part changes.

        Raises:
            InvalidOptionError: A scoped overwrite of a table the transaction wrote already.
            ReplaceWhereViolationError: A row of the scope's data is outside ``replace_where``."""
        if scope is not None and part.operations:
            raise InvalidOptionError(
                f"{part.uri}: a scoped overwrite (replace_where, partition_overwrite) must be the transaction's first "
                f"write to the table (it has {', '.join(part.operations)} already); put its rows in one overwrite"
            )
        plan = writes.begin_write(part.uri, storage_options=part.options, incoming=schema, mode=mode)
        part.plans.append(plan)
        self._keepers.enter_context(write_intents.keep(part.io, plan.intent))
        read = plan.read_snapshot if plan.read_snapshot is not None else Snapshot()
        scoped = None if scope is None or scope.deferred else writes.plan_scope(part.io, read, plan, scope)
        if scoped is not None:
            plan = dataclasses.replace(plan, scoped=scoped)  # a Spark task checks its rows against replace_where
            part.plans[-1] = plan
        part.key = plan.primary_key
        if plan.create and part.create is None:
            part.create = MetadataAction.model_validate(plan.create)
        if mode == writes.OVERWRITE:
            self._drop_files(part, part.segments)
            part.segments = []
            part.deletes.clear()
            part.delete_bases.clear()
            part.rows = part.key_read = None
            part.scoped = None
            part.replaced = list(read.visible_segment_ids()) if read.exists else []
            if scoped is not None:
                self._scoped(part, scoped)
            elif scope is not None:  # dynamic, partitions known once the tasks wrote: planned then
                part.replaced = []
        return plan

    def _scoped(self, part: _Part, scoped: ScopedPlan) -> None:
        """Make the part's overwrite replace only what ``scoped`` covers."""
        part.replaced = list(scoped.segments_from)
        part.scoped = scoped

    def _add_keys(self, part: _Part, rows: KeyedRows, read: Snapshot, *, upsert: bool) -> None:
        """Record the keys of one keyed call; a key written twice in one transaction is refused.

        Raises:
            InvalidOptionError: Upserts mixed with appends or overwrites of one table.
            DuplicateKeyError: The transaction wrote the key to the table already."""
        if part.rows is not None and part.upsert != upsert:
            raise InvalidOptionError(
                f"{part.uri}: a transaction either upserts into a keyed table or appends/overwrites it, not both"
            )
        if part.rows is not None:
            keys = pa.concat_tables([part.rows.keys, rows.keys.cast(part.rows.keys.schema)])
            rows = KeyedRows(rows.columns, np.concatenate([part.rows.hashes, rows.hashes]), keys)
            check_unique(rows.keys, rows.hashes)
        part.rows, part.upsert = rows, upsert
        if part.key_read is None:
            part.key_read = read

    def _written(self, part: _Part, segments: list[SegmentFile], *, mode: str) -> int:
        part.segments += segments
        faults.point("transaction.after_files")
        part.operations.append(mode)
        return sum(s.num_rows for s in segments)

    def _write(
        self,
        part: _Part,
        data: pa.Table | pa.RecordBatch,
        *,
        mode: str,
        replace_where: pc.Expression | None = None,
        partition_overwrite: str | None = None,
    ) -> int:
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InvalidOptionError(f"data must be a pyarrow Table or RecordBatch, not {type(data).__name__}")
        scope = scoped_push.request(data, replace_where=replace_where, partition_overwrite=partition_overwrite)
        plan = self._begin(part, data.schema, mode=mode, scope=scope)

        def write() -> list[SegmentFile]:
            return writes.write_local(part.io, plan, data)

        read = plan.read_snapshot if plan.read_snapshot is not None else Snapshot()
        if not plan.primary_key:
            return self._written(part, [*write(), *self._kept(part, plan, read)], mode=mode)
        rows, segments = write_keyed(
            part.io, read, plan.arrow_schema, plan.primary_key, data, replace=mode == writes.OVERWRITE, write=write
        )
        try:
            if plan.scoped is not None:  # the same key checks as a single scoped push (Table.write)
                kept = self._kept(part, plan, read)
                segments += kept
                rows = scoped_push.check_keys(part.io, read, plan.scoped, rows, kept)
            self._add_keys(part, rows, read, upsert=False)
        except BaseException:
            self._drop_files(part, segments)
            raise
        return self._written(part, segments, mode=mode)

    def _kept(self, part: _Part, plan: writes.WritePlan, read: Snapshot) -> list[SegmentFile]:
        """A scoped overwrite's copy-on-write: the rows its rewritten segments keep, as new segments of the transaction."""
        if plan.scoped is None:
            return []
        plain = dataclasses.replace(plan, scoped=None)  # kept rows are outside replace_where: not checked against it
        return scoped_push.write_kept(part.io, read, plan.scoped, write=lambda rows: writes.write_data(plain, rows.to_batches()))

    def append(
        self, table: TableRef | str, data: pa.Table | pa.RecordBatch, *, storage_options: Mapping[str, Any] | None = None
    ) -> int:
        """Add ``data``'s rows to ``table`` when the transaction commits; the number of rows.

        ``table`` is a ``Table`` or a URI (with ``storage_options``, default the transaction's);
        a table that does not exist yet is created with ``data``'s schema.

        Raises:
            InvalidOptionError: The transaction ended, ``data`` is not Arrow data, or it also
                upserts into the keyed table.
            DuplicateKeyError: On a keyed table, a key repeats in ``data``, is in the table
                already, or this transaction wrote it already.
            NullKeyError: On a keyed table, a key column of ``data`` holds nulls.
            SchemaMismatchError: ``data`` does not fit the table's schema.
            StorageError: The store refused a write.
        """
        return self._write(self._part(table, storage_options), data, mode=writes.APPEND)

    def overwrite(
        self,
        table: TableRef | str,
        data: pa.Table | pa.RecordBatch,
        *,
        consistent_push: bool = True,
        replace_where: pc.Expression | None = None,
        partition_overwrite: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> int:
        """Replace every row of ``table`` with ``data``'s when the transaction commits; the number of rows.

        Inside a transaction every overwrite is a consistent push (``consistent_push`` is
        accepted for symmetry with ``Table.overwrite``): its lineage entry is the
        transaction's, so ``rollback_transaction`` can revert it.

        ``replace_where`` (every row of ``data`` must satisfy it) or
        ``partition_overwrite="dynamic"`` (the partitions ``data`` has rows in) make it a
        scoped push, as ``Table.overwrite`` does: the transaction replaces only the rows
        they cover, as the table is when this call reads it, and its entry holds those
        partitions only, so a push of other partitions of the table runs meanwhile. It must
        be the transaction's first write to the table.

        Raises:
            InvalidOptionError: The transaction ended, ``data`` is not Arrow data, it also
                upserts into the keyed table, the scope options do not go together (or come
                without ``consistent_push``), or a scoped overwrite follows another write to
                the table.
            InvalidFilterError: ``replace_where`` does not fit the table's schema.
            ReplaceWhereViolationError: A row of ``data`` is outside ``replace_where``; nothing
                of the call was written.
            DuplicateKeyError: On a keyed table, a key repeats in ``data`` (or, scoped, is in
                a row the overwrite keeps).
            NullKeyError: On a keyed table, a key column of ``data`` holds nulls.
            SchemaMismatchError: ``data`` does not fit the table's schema.
            StorageError: The store refused a write.
        """
        consistent_push = checks.flag(consistent_push, name="consistent_push")
        scoped_push.check_options(
            mode=writes.OVERWRITE,
            consistent_push=consistent_push,
            replace_where=replace_where,
            partition_overwrite=partition_overwrite,
        )
        return self._write(
            self._part(table, storage_options),
            data,
            mode=writes.OVERWRITE,
            replace_where=replace_where,
            partition_overwrite=partition_overwrite,
        )

    def delete(self, table: TableRef | str, filter: pc.Expression, *, storage_options: Mapping[str, Any] | None = None) -> int:
        """Delete the rows of ``table`` matching ``filter`` when the transaction commits; how many match now.

        Rows are found in the table's newest version; rows this transaction appends are not
        looked at. Deletes that other writers commit to the same segments before the
        transaction finalizes are kept too.

        Raises:
            InvalidOptionError: The transaction ended, ``filter`` is not a boolean expression, or
                the transaction's scoped overwrite of the table copies rows on write.
            InvalidFilterError: ``filter`` does not fit the schema.
            TableNotFoundError: There is no table at ``table``.
            StorageError: The store refused a read.
        """
        part = self._part(table, storage_options)
        if part.scoped is not None and part.scoped.rewritten:
            raise InvalidOptionError(
                f"{part.uri}: the transaction's scoped overwrite copies rows of the table on write, which a delete "
                "would not see; delete those rows in another transaction, or narrow them out of the overwrite's data"
            )
        snapshot = part.commit_log.snapshot()
        schema = schema_from_json(snapshot.table_schema)
        check_filter(filter, schema, what="delete filter")
        needed = referenced_columns(filter, schema)
        replaced = set(part.replaced)
        count = 0
        for task in plan_scan(snapshot, columns=needed, filter=filter).tasks:
            sid = task.segment.id
            if sid in replaced:
                continue
            hits = bitmap_from_array(matching_positions(part.io, task, filter, needed).astype(np.uint64))
            count += self._delete_rows(part, snapshot, sid, hits)
        part.operations.append("delete")
        return count

    def _delete_rows(self, part: _Part, snapshot: Snapshot, sid: str, rows: BitMap64) -> int:
        """Add rows of segment ``sid`` (as ``snapshot`` has it) to what the transaction deletes; how many."""
        if not len(rows) or sid in part.replaced:
            return 0
        before = part.deletes.get(sid)
        part.deletes[sid] = rows if before is None else before | rows
        part.delete_bases.setdefault(sid, (snapshot.segments[sid].file, snapshot.dvs.get(sid)))
        return len(rows)

    def upsert(
        self, table: TableRef | str, data: pa.Table | pa.RecordBatch, *, storage_options: Mapping[str, Any] | None = None
    ) -> int:
        """Replace the rows of keyed ``table`` whose keys ``data`` holds and insert the rest, when the transaction commits.

        Returns how many rows it replaces as the table is now. Rows found by key are deleted
        by deletion vector (no data file rewritten), as ``Table.upsert`` does; a key another
        writer inserts before the transaction commits is replaced too. A key can be written
        once per table per transaction.

        Raises:
            InvalidOptionError: The transaction ended, ``data`` is not Arrow data, or the
                transaction also appends to or overwrites the table.
            TableNotFoundError: There is no table at ``table``.
            NoPrimaryKeyError: The table has no primary key.
            NullKeyError: A key column of ``data`` holds nulls.
            DuplicateKeyError: A key repeats in ``data``, or the transaction wrote it already.
            SchemaMismatchError: ``data`` does not fit the table's schema.
            StorageError: The store refused a read or a write.
        """
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InvalidOptionError(f"data must be a pyarrow Table or RecordBatch, not {type(data).__name__}")
        part = self._part(table, storage_options)
        key = require_key(writes.load_snapshot(part.commit_log), uri=part.uri, what="upsert")
        plan = self._begin(part, data.schema, mode=writes.APPEND)
        read = plan.read_snapshot if plan.read_snapshot is not None else Snapshot()
        rows = keyed_rows(plan.arrow_schema, key, data)
        self._add_keys(part, rows, read, upsert=True)
        aligned = writes.align(plan, data)
        segments = (
            write_partitioned(
                part.io,
                aligned,
                spec=plan.partition_spec,
                table_schema=plan.table_schema,
                row_group_rows=plan.row_group_rows,
                primary_key=key,
                intent=plan.intent,
            )
            if data.num_rows
            else []
        )
        found = lookup(part.io, read, rows)
        replaced = 0
        for sid, positions in found.positions.items():
            replaced += self._delete_rows(part, read, sid, bitmap_from_array(positions.astype(np.uint64)))
        self._written(part, segments, mode="upsert")
        return replaced

    # -- the commit -------------------------------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._done:  # the block committed or aborted it itself
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def commit(self) -> TransactionResult:
        """Prepare every table, decide COMMITTED, finalize every table; the versions that show the writes.

        Raises:
            TransactionConflictError: A table's prepare conflicted with a concurrent commit
                (the message names the table); every table was aborted.
            TransactionAbortedError: Another writer aborted the transaction first (its lease
                ran out); nothing is visible.
            DuplicateKeyError: A keyed table's key was made visible by a concurrent commit
                after the transaction checked it; nothing is visible.
            InvalidOptionError: The transaction ended already.
            StorageError: The store refused a write before the decision (the transaction aborted).
        """
        if self._done:
            raise InvalidOptionError(f"transaction {self.id} has ended; start a new one")
        self._done = True
        parts = [p for p in self._parts.values() if p.segments or p.deletes or p.replaced or p.create]
        if not parts:
            self._release()
            self.result = TransactionResult(self.id, (), str(Outcome.COMMITTED))
            return self.result
        coordinator = parts[0]
        participants = tuple(p.uri for p in parts)
        stores = Stores(coordinator.options)
        for p in self._parts.values():
            stores.add(p.io, p.options)
        lease_ms = TableProperties.tolerant(writes.load_snapshot(coordinator.commit_log).properties)[0].push_lease_ms
        try:
            with push_recovery.LeaseKeeper(
                coordinator.io, self.id, lease_ms=lease_ms, owner=push_recovery.process_owner().describe()
            ):
                for part in parts:  # before the threads: it takes write intents
                    if part.deletes or part.upsert:
                        intent = write_intents.take(part.io, operation="transaction delete")
                        part.intents.append(intent)
                        self._keepers.enter_context(write_intents.keep(part.io, intent))
                    self._clone_deletes(part)

                def prepare(part: _Part) -> None:
                    self._prepare(part, participants=participants, decision_uri=coordinator.uri, stores=stores, lease_ms=lease_ms)

                # the tables' commits are independent: side by side, their durable writes overlap
                for i, _ in enumerate(ordered_map(prepare, parts, workers=len(parts)), start=1):
                    faults.point(f"transaction.after_prepare.{i}")
                for part in parts:
                    self._check_rewritten(part)
                decision = self._decide(coordinator, participants)
                faults.point("transaction.after_decision")
                if decision.outcome != Outcome.COMMITTED:
                    raise TransactionAbortedError(
                        f"transaction {self.id} was aborted by another writer before it committed ({decision.reason}); "
                        "nothing of it is visible: run it again"
                    )
                finalized = ordered_map(lambda p: self._finalize(p, LineageState.COMPLETED), parts, workers=len(parts))
                for i, (part, version) in enumerate(zip(parts, finalized), start=1):
                    part.version = version
                    faults.point(f"transaction.after_finalize.{i}")
        except BaseException:
            self._abort(parts, coordinator)
            raise
        finally:
            self._release()
        push_recovery.drop(coordinator.io, self.id)
        self.result = TransactionResult(
            self.id,
            tuple((p.uri, p.version) for p in parts),
            str(Outcome.COMMITTED),
            tuple(p.uri for p in parts if p.version is not None),
        )
        return self.result

    def _check_rewritten(self, part: _Part) -> None:
        """Refuse to decide when rows were deleted, since the prepare, from a segment a scoped overwrite copies on write.

        The copy would bring them back. The prepare checked the same since the read; this
        narrows what is left to the moment between here and the decision.

        Raises:
            TransactionConflictError: Such a delete landed; the transaction aborts."""
        if part.scoped is None or not part.scoped.rewritten:
            return
        current = part.commit_log.snapshot()
        changed = [sid for sid, dv in part.scoped.dvs.items() if current.dvs.get(sid) != dv]
        if changed:
            raise TransactionConflictError(
                f"transaction {self.id} aborted: rows of segment {changed[0]} of {part.uri}, which its scoped overwrite "
                "rewrites, were deleted by a concurrent commit; nothing of the transaction is visible in any table: run it again",
                table=part.uri,
            )

    def _decide(self, coordinator: _Part, participants: tuple[str, ...]) -> Decision:
        """Write COMMITTED; when the store fails the write, the decision read back says whether it landed."""
        try:
            return decide(coordinator.io, self.id, Outcome.COMMITTED, participants=participants)
        except Exception:
            standing = read_decision(coordinator.io, self.id)
            if standing is None:
                raise
            return standing

    def _prepare(self, part: _Part, *, participants: tuple[str, ...], decision_uri: str, stores: Stores, lease_ms: int) -> None:
        current = writes.load_snapshot(part.commit_log)
        if current.exists:
            recover_table(part.commit_log, current, stores=stores)
            current = part.commit_log.catch_up(current)
        owner = push_recovery.process_owner()
        expires = push_recovery.now_ms() + lease_ms

        def build(cur: Snapshot) -> list[Action]:
            return protocol.prepare(
                cur,
                transaction_id=self.id,
                participants=participants,
                decision_uri=decision_uri,
                replaced=part.replaced,
                segments=part.segments,
                clones=part.clones,
                owner=owner,
                lease_expires_ms=expires,
                metadata=part.create,
                scope=part.scoped.scope if part.scoped is not None else None,
                rewritten=part.scoped.dvs if part.scoped is not None else None,
            )

        parameters: dict[str, Any] = {"transaction": self.id, "participants": list(participants), "operations": part.operations}
        if part.scoped is not None:
            parameters.update(part.scoped.parameters())
        metrics = {"added_rows": sum(s.num_rows for s in part.segments), "added_segments": len(part.segments)}
        try:
            if part.key and part.rows is not None and len(part.rows.hashes):
                self._prepare_keyed(part, current, build, parameters=parameters, metrics=metrics)
            else:
                part.commit_log.commit(
                    read=current, operation=Operation.TXN_PREPARE, parameters=parameters, metrics=metrics, build=build
                )
        except CommitStateUnknownError:
            part.prepared = True  # it may have landed: the abort decides ABORTED and keeps its files
            raise
        except (CommitConflictError, InvalidLineageTransitionError) as exc:
            raise TransactionConflictError(
                f"transaction {self.id} aborted: table {part.uri} conflicts with a concurrent commit ({exc.message}); "
                "nothing of the transaction is visible in any table: run it again",
                table=part.uri,
            ) from exc
        part.prepared = True

    def _prepare_keyed(self, part: _Part, current: Snapshot, build: Callable[[Snapshot], list[Action]], **commit: Any) -> None:
        """The prepare of a keyed table: checked, like a keyed write, against every commit since its keys were read.

        An append or overwrite refuses a key a concurrent commit made visible
        (``DuplicateKeyError``); an upsert deletes those rows too (more clones). Keys a
        prepared transaction holds are a conflict (``held_keys``)."""
        rows = part.rows
        assert rows is not None
        replaced = set(part.replaced)

        def on_new_rows(newer: Snapshot, segment_ids: list[str]) -> None:
            ids = [sid for sid in segment_ids if sid not in replaced]
            if not part.upsert:
                check_absent(part.io, newer, rows, segment_ids=ids)
                return
            for sid, positions in lookup(part.io, newer, rows, segment_ids=ids).positions.items():
                self._delete_rows(part, newer, sid, bitmap_from_array(positions.astype(np.uint64)))
            self._clone_deletes(part)

        commit_keyed(
            part.commit_log,
            read=current,
            current=None,
            operation=Operation.TXN_PREPARE,
            build=build,
            rows=rows,
            record=True,
            on_new_rows=on_new_rows,
            since=part.key_read if part.key_read is not None and part.key_read.exists else None,
            transaction=self.id,
            **commit,
        )

    def _clone_deletes(self, part: _Part) -> None:
        """A clone per segment this transaction deletes from, carrying the deletes as its deletion vector.

        Incremental: a segment cloned already gets a new deletion vector only when more of its
        rows were found since (an upsert's prepare finds rows concurrent commits inserted)."""
        todo = {sid: rows for sid, rows in part.deletes.items() if sid not in part.replaced and part.cloned.get(sid) != len(rows)}
        if not todo:
            return
        intent = part.intents[-1]
        cache = process_cache()
        bitmaps: dict[str, BitMap64] = {}
        clones: dict[str, SegmentFile] = {}
        for sid, rows in todo.items():
            descriptor, base = part.delete_bases[sid]
            bitmaps[sid] = (load_dv(part.io, base, cache=cache) if base is not None else BitMap64()) | rows
            known = part.clones.get(sid)
            clones[sid] = known[0] if known is not None else descriptor.to_segment_file(id=new_segment_id(intent))
        props = TableProperties.tolerant(part.commit_log.snapshot().properties)[0]
        files = {clones[sid].id: location_uri(part.io.uri, clones[sid].path) for sid in bitmaps}
        dvs = write_dvs(
            part.io,
            {clones[sid].id: bm for sid, bm in bitmaps.items()},
            inline_max_bytes=props.dv_inline_max_bytes,
            data_files=files,
            file_id=intent.new_id,
        )
        for sid in bitmaps:
            part.clones[sid] = (clones[sid], dvs[clones[sid].id])
            part.cloned[sid] = len(todo[sid])

    def _finalize(self, part: _Part, target: LineageState) -> int | None:
        clones = {clone.id: sid for sid, (clone, _) in part.clones.items()}
        try:
            return finalize_part(part.commit_log, self.id, target, clones=clones, reason=f"transaction {self.id} aborted")
        except Exception as exc:  # decided: whoever reads or writes the table next finishes it
            if target == LineageState.COMPLETED:
                logger.warning(
                    "transaction %s committed; finalizing %s failed (the next reader or writer does it): %s",
                    self.id,
                    part.uri,
                    exc,
                )
                return None
            raise

    def _abort(self, parts: list[_Part], coordinator: _Part) -> None:
        """Decide ABORTED (unless COMMITTED stands) and revert what was prepared; best effort, the caller's error wins."""
        prepared = [p for p in parts if p.prepared]
        try:
            if prepared:
                decision = decide(coordinator.io, self.id, Outcome.ABORTED, participants=tuple(p.uri for p in parts))
                if decision.outcome == Outcome.COMMITTED:  # decided before the failure: recovery finishes it
                    return
                for part in prepared:
                    self._finalize(part, LineageState.REVERTED)
            push_recovery.drop(coordinator.io, self.id)
        except Exception as exc:
            logger.warning("transaction %s: abort left work for recovery (%s)", self.id, exc)
            push_recovery.give_up(coordinator.io, self.id)
        for part in parts:
            if not part.prepared:
                self._drop_files(part, part.segments)

    def abort(self) -> None:
        """End the transaction without committing anything; its files are removed or left for vacuum.

        Raises:
            InvalidOptionError: The transaction ended already.
        """
        if self._done:
            raise InvalidOptionError(f"transaction {self.id} has ended; start a new one")
        self._done = True
        try:
            for part in self._parts.values():
                self._drop_files(part, part.segments)
        finally:
            self._release()

    def _drop_files(self, part: _Part, segments: list[SegmentFile]) -> None:
        try:
            part.io.delete([s.path for s in segments])
        except Exception as exc:
            logger.warning("transaction %s left files in %s for vacuum: %s", self.id, part.uri, exc)

    def _release(self) -> None:
        try:
            self._keepers.close()
        finally:
            for part in self._parts.values():
                try:
                    for plan in part.plans:
                        write_intents.release(part.io, plan.intent)
                        writes.release_pin(plan)
                    for intent in part.intents:
                        write_intents.release(part.io, intent)
                except Exception as exc:
                    logger.warning("transaction %s: an intent or pin in %s expires on its own: %s", self.id, part.uri, exc)
