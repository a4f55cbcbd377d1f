"""The Python ``Table`` API: everything a user can do to a table without Spark."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mvtable import checks, faults
from mvtable.conf import TableProperties
from mvtable.errors import (
    InvalidOptionError,
    TableAlreadyExistsError,
    TableNotFoundError,
    VersionNotFoundError,
)
from mvtable.lineage.actions import SegmentFile
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.push_scopes import PushScope, describe_scope
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO, make_root, open_file_io

from . import recovery, scoped_push, write_intents, writes
from .deletes import commit_deletes, delete_where
from .export import ExportResult, export
from .expressions import check_filter
from .keys.commit import write_keyed
from .keys.validate import key_data, parse_primary_key
from .parameters import Keys, Timestamp, WriteMode
from .partitions.evolution import update_partitioning
from .partitions.timeline import Timeline, timeline_of
from .pinning import PinnedSnapshot, pin_snapshot, resolve_version
from .post_commit import open_log
from .results import CompactionResult, DeleteResult, GCResult, PartitioningResult, UpsertResult, VacuumResult, WriteResult
from .row_positions import row_positions
from .scan import plan_scan
from .schema import schema_from_json
from .schema_evolution.update import UpdateSchema
from .snapshot_view import read_only
from .stats import Predicate
from .table_scan import TableScan
from .upsert import delete_by_key, require_key, upsert

if TYPE_CHECKING:
    from mvtable.lineage.log import CommitLog

    from .gc import Progress
    from .lifecycle import ActionResult


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    timestamp: dt.datetime
    operation: Operation
    parameters: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    writer: str = ""


@dataclass(frozen=True)
class LineageView:
    id: str
    segments_from: tuple[str, ...]
    segments_to: tuple[str, ...]
    state: LineageState
    timestamp: dt.datetime
    started_version: int
    state_version: int
    owner: str | None = None  # who runs (or ran) the push, e.g. "pid 4242 on host-a"
    lease_expires: dt.datetime | None = None  # IN_PROGRESS only: when its lease ends (renewals included)
    status: str | None = None  # IN_PROGRESS only: alive / dead / expired / staged, and why
    revert_reason: str | None = None  # why mvtable reverted it by itself, if it did
    # a scoped push: what it replaces, as the user asked (``replace_where`` as written, or
    # "dynamic partition overwrite") and the partitions it holds (``ts_day=2024-01-05``); a
    # push of the whole table has neither
    scope: str | None = None
    partitions: tuple[str, ...] = ()


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)


def _scope_text(scope: PushScope | None) -> str | None:
    """A scoped push's scope in words: its predicate, or how its partitions were chosen."""
    if scope is None:
        return None
    if scope.predicate is not None:
        return f"replace_where {scope.predicate}"
    return "dynamic partition overwrite" if scope.dynamic else describe_scope(scope)


def _as_table(data: pa.Table | pa.RecordBatch) -> pa.Table:
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if not isinstance(data, pa.Table):
        raise InvalidOptionError(f"data must be a pyarrow Table or RecordBatch, not {type(data).__name__}")
    return data


class Table:
    """One table at ``uri`` (a local path or an fsspec URL such as ``s3://bucket/t``).

    Raises:
        StorageLocationError: ``uri`` cannot hold a table: empty, a file where the table's folder
            belongs, or a protocol no installed filesystem handles (``UnknownProtocolError``).
    """

    def __init__(self, uri: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self.uri = uri
        self.storage_options = dict(storage_options or {})
        self.io: FileIO = open_file_io(uri, self.storage_options)
        self.commit_log = open_log(self.io)
        self._seen: Snapshot | None = None  # the newest snapshot this object has seen

    @property
    def log(self) -> CommitLog:
        """Deprecated name of ``commit_log``: the table's one commit log."""
        warnings.warn(
            "Table.log is deprecated and goes away in the next release; use Table.commit_log",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.commit_log

    # -- lifecycle -----------------------------------------------------------------------
    @classmethod
    def open(cls, uri: str, *, storage_options: Mapping[str, Any] | None = None) -> Table:
        """The existing table at ``uri``.

        Raises:
            TableNotFoundError: There is no mvtable table at ``uri``.
            StorageLocationError: ``uri`` cannot hold a table (an empty path, a file, an unknown protocol).
            StorageError: The store refused or failed the listing of the log (permissions, network).
        """
        table = cls(uri, storage_options=storage_options)
        if not table.commit_log.exists():
            raise TableNotFoundError(f"no mvtable table at {uri}; create one with Table.create(uri, schema=…) or a first write")
        return table

    @classmethod
    def create(
        cls,
        uri: str,
        *,
        schema: pa.Schema,
        properties: Mapping[str, str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        primary_key: Sequence[str] | None = None,
        partition_by: Sequence[str] | None = None,
    ) -> Table:
        """A new, empty table.

        ``primary_key``: one or more non-null columns whose values identify a row (appends then
        refuse duplicates; ``upsert`` and ``delete(keys=…)`` work); fixed for the table's life.
        ``partition_by``: the partition spec, each field a column (identity) or an Iceberg
        transform of one: ``["day(ts)", "region", "bucket(16, id)", "truncate(4, name)"]``
        (docs/partitions.md). Every segment then holds the rows of one partition.

        Raises:
            InvalidOptionError: ``schema`` is not a ``pyarrow.Schema``, ``primary_key`` is not one or
                more distinct column names, or a property is unknown or malformed (``SettingsError``).
            SchemaMismatchError: A column name is one mvtable reserves.
            PrimaryKeyError: A key column is not in ``schema`` or has a type keys cannot have.
            PartitionSpecError: ``partition_by`` names an unknown or nested column, a transform on a
                column of a type it does not take, or a field twice; nothing is created.
            TableAlreadyExistsError: A table exists at ``uri`` already (``exist_ok`` not set), or
                another writer created one at the same time.
            StorageLocationError: ``uri`` cannot hold a table (an empty path, a file, an unknown protocol).
            StorageError: The store refused or failed the write (full, read-only, no permission).
            CommitStateUnknownError: The store never said whether the first commit landed; open
                the table to see.
        """
        if not isinstance(schema, pa.Schema):
            raise InvalidOptionError(
                f"schema must be a pyarrow.Schema, e.g. pa.schema([('id', pa.int64())]), not {type(schema).__name__}"
            )
        exist_ok = checks.flag(exist_ok, name="exist_ok")
        table = cls(uri, storage_options=storage_options)
        if table.commit_log.exists():
            if exist_ok:
                return table
            raise TableAlreadyExistsError(f"a table exists at {uri} already")
        make_root(table.io)
        plan = writes.begin_write(
            uri,
            storage_options=storage_options,
            incoming=schema,
            mode=writes.APPEND,
            properties=properties,
            primary_key=parse_primary_key(primary_key),
            take_intent=False,  # no file to protect
            partition_by=partition_by,
        )
        writes.finish_write(plan, [])
        return table

    # -- reading -------------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The newest committed version.

        Raises:
            TableNotFoundError: There is no mvtable table at the URI (any more).
            StorageError: The store refused or failed the listing of the log.
        """
        version = self.commit_log.latest_version()
        if version < 0:
            raise TableNotFoundError(f"no mvtable table at {self.uri}")
        return version

    def snapshot(self, version: int | None = None, *, timestamp: Timestamp | None = None) -> Snapshot:
        """The table's state at ``version`` or ``timestamp`` (the newest by default), read-only.

        Its mappings refuse changes (``TypeError``): they are the state this ``Table``
        reads from, shared rather than copied (see ``snapshot_view``).

        Raises:
            VersionNotFoundError: No such version (or no longer), or none at or before ``timestamp``.
            InvalidOptionError: Both ``version`` and ``timestamp``, or a malformed timestamp.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        version = resolve_version(self.commit_log, version=version, timestamp=timestamp)
        return read_only(self._latest() if version is None else self.commit_log.snapshot(version))

    def pin(
        self, version: int | None = None, *, timestamp: Timestamp | None = None, ttl_s: float | None = None, owner: str = "reader"
    ) -> PinnedSnapshot:
        """Pin a version (the newest by default) so that GC and vacuum keep everything it needs.

        The pin holds until it is released (``with t.pin() as p: … p.snapshot …``) or ``ttl_s``
        (default ``pinTtl``) passes; a long reader calls ``renew()``. See
        ``mvtable.connector.pinning``. ``snapshot`` is read-only, as ``snapshot()``'s.

        Raises:
            VersionNotFoundError: ``version`` does not exist (or no longer), or no version is at or
                before ``timestamp``.
            InvalidOptionError: Both ``version`` and ``timestamp``, or a malformed option.
            DeletionVectorNotFoundError: The version's deletion vectors were collected before
                the pin was taken; pin a newer version.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        pinned = self._pin(version, timestamp=timestamp, ttl_s=ttl_s, owner=owner)
        pinned.snapshot = read_only(pinned.snapshot)
        return pinned

    def _pin(
        self, version: int | None = None, *, timestamp: Timestamp | None = None, ttl_s: float | None = None, owner: str = "reader"
    ) -> PinnedSnapshot:
        """``pin`` for this object's own reads: the snapshot itself, never handed out."""
        if version is None and timestamp is None:  # the newest, caught up from the last one seen
            return pin_snapshot(self.io, self.commit_log, snapshot=self._latest(), ttl_s=ttl_s, owner=owner)
        return pin_snapshot(self.io, self.commit_log, version=version, timestamp=timestamp, ttl_s=ttl_s, owner=owner)

    def _latest_or_empty(self) -> Snapshot:
        try:
            return self._latest()
        except TableNotFoundError:
            return Snapshot()

    def _latest(self) -> Snapshot:
        """The newest snapshot, caught up from the last one this object saw.

        The new commits instead of a checkpoint read per call: reading the checkpoint was a large
        share of a small append."""
        seen = self._seen
        self._seen = self.commit_log.snapshot() if seen is None else self.commit_log.catch_up(seen)
        return self._seen

    @property
    def schema(self) -> pa.Schema:
        return schema_from_json(self._latest().table_schema)

    def update_schema(self) -> UpdateSchema:
        """Change the schema — ``with t.update_schema() as u: u.add_column("x", pa.int64())`` — in one commit.

        Add, rename, drop, widen and make optional, by field id: no data file is rewritten (see
        ``mvtable.connector.schema_evolution``); an exception inside the block commits nothing.

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            SchemaEvolutionError: A change breaks a rule (a narrowing, a name clash, a drop or type
                change of a key column, an ``_mv_`` name); the message names the column and the rule.
            ConcurrentSchemaChangeError: Another schema change landed since this block read the
                schema; nothing landed, run the block again.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read or write.
        """
        return UpdateSchema(self.commit_log, self._latest())

    def update_partitioning(self, partition_by: Sequence[str]) -> PartitioningResult:
        """Partition new writes by ``partition_by`` (``["day(ts)"]``; ``[]``: unpartitioned) from the next commit on.

        Iceberg's partition evolution: one commit, no data file rewritten; old segments keep the
        spec they were written with and pruning reads each through its own. ``compact()`` then
        rewrites old segments into the new grain where each falls in one new partition (see
        ``mvtable.connector.partitions``). The result says whether anything changed.

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            PartitionSpecError: A bad field (unknown or nested column, a transform on a type it does not
                take, a field given twice); the message names it and nothing is committed.
            CommitConflictError: Every attempt lost its race to concurrent commits; run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read or write.
        """
        return update_partitioning(self.commit_log, self._latest(), partition_by)

    def scan(
        self,
        *,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        version: int | None = None,
        timestamp: Timestamp | None = None,
        predicates: Sequence[Predicate] = (),
        with_row_address: bool = False,
        lineage_entry: str | None = None,
        use_threads: bool = True,
    ) -> TableScan:
        """A read of one version.

        ``filter`` (a ``pyarrow.compute`` expression) and ``predicates`` (``Predicate`` objects,
        which also skip row groups by statistics) both select rows exactly; either is checked
        against the table's schema here, so a filter that does not fit it is an
        ``InvalidFilterError`` before anything is read. ``lineage_entry`` reads the staged snapshot
        of an unpublished consistent push (write-audit-publish). ``use_threads=False`` reads on the
        calling thread only, one row group at a time (see ``TableScan``).

        Raises:
            InvalidOptionError: Malformed or unknown ``columns``, both ``version`` and ``timestamp``,
                or a ``lineage_entry`` the table does not have (or has reverted).
            InvalidFilterError: ``filter`` or ``predicates`` do not fit the table's schema.
            VersionNotFoundError: No such version (or no longer), or none at or before ``timestamp``.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        columns = checks.column_names(columns)
        pinned = self._pin(version, timestamp=timestamp, owner="Table.scan")
        try:
            if filter is not None:
                check_filter(filter, schema_from_json(pinned.snapshot.table_schema))
            plan = plan_scan(
                pinned.snapshot,
                columns=columns,
                predicates=predicates,
                row_address=with_row_address,
                lineage_entry=lineage_entry,
                filter=filter,
            )
        except BaseException:
            pinned.release()
            raise
        return TableScan(self.io, plan, filter, pinned=pinned, use_threads=use_threads)

    def to_arrow(
        self,
        *,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        version: int | None = None,
        timestamp: Timestamp | None = None,
        predicates: Sequence[Predicate] = (),
        with_row_address: bool = False,
        lineage_entry: str | None = None,
        use_threads: bool = True,
    ) -> pa.Table:
        """``scan(...).to_arrow()``: the same options, read into one Arrow table.

        Raises:
            InvalidOptionError: Malformed or unknown ``columns``, both ``version`` and ``timestamp``,
                or a ``lineage_entry`` the table does not have (or has reverted).
            InvalidFilterError: ``filter`` or ``predicates`` do not fit the table's schema.
            VersionNotFoundError: No such version (or no longer), or none at or before ``timestamp``.
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return self.scan(
            columns=columns,
            filter=filter,
            version=version,
            timestamp=timestamp,
            predicates=predicates,
            with_row_address=with_row_address,
            lineage_entry=lineage_entry,
            use_threads=use_threads,
        ).to_arrow()

    def history(self) -> list[HistoryEntry]:
        """Every commit, oldest first (``t.history()[-1]`` is the newest).

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        out = []
        for item in self._latest().history:
            try:
                c = self.commit_log.read_commit(item.version)
                out.append(
                    HistoryEntry(c.version, _utc(c.timestamp_ms), c.operation, dict(c.parameters), dict(c.metrics), c.writer)
                )
            except VersionNotFoundError:  # log file collected; the checkpoint still knows the basics
                out.append(HistoryEntry(item.version, _utc(item.timestamp_ms), item.operation))
        return out

    def changes(
        self,
        start_version: int,
        end_version: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
    ) -> pa.Table:
        """The change feed: the rows each version from ``start_version`` to ``end_version`` inserted and deleted.

        ``end_version`` None means the newest. Rows carry ``_change_type`` (``insert``, ``delete``,
        ``update_preimage``/``update_postimage`` for upserts), ``_commit_version`` and
        ``_commit_timestamp``. Derived from segments and deletion vectors: nothing extra is written
        at commit time (see ``mvtable.connector.streaming.changes``). ``filter`` (a ``pyarrow.compute``
        expression, as ``scan``'s) keeps the changed rows it matches; on a partitioned table the
        segments of partitions it cannot match are not read.

        Raises:
            InvalidFilterError: ``filter`` does not fit the table's schema.
            VersionNotFoundError: A version of the range does not exist, or its commit is no longer
                in the log (retention removed it).
            InvalidOptionError: ``start_version`` is after ``end_version``, or malformed or unknown ``columns``.
            SchemaMismatchError: The table has a column named like a change-feed column.
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        from .streaming import read_changes

        return read_changes(self.io, start_version, end_version, columns=checks.column_names(columns), filter=filter)

    def partitions(self, *, version: int | None = None) -> pa.Table:
        """One row per partition of ``version`` (the newest by default), from the log alone (Iceberg's ``partitions`` table).

        The partition values (a column per field, e.g. ``ts_day``), ``spec_id``, ``segments``,
        ``rows`` (live), ``deleted_rows``, ``bytes`` and ``last_modified_version``; see
        ``mvtable.connector.partitions.summary``. An unpartitioned table has one row, of spec 0.

        Raises:
            VersionNotFoundError: No such version (or no longer).
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        from .partitions.summary import partitions_table

        return partitions_table(self._latest() if version is None else self.commit_log.snapshot(version))

    def lineage(self) -> list[LineageView]:
        """Lineage entries, oldest first.

        IN_PROGRESS ones say who owns them, when their lease ends and whether the next push may
        clean them up (``status``).

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        snapshot = self._latest()
        lease_ms = TableProperties.of(snapshot.properties).push_lease_ms
        verdicts = recovery.entry_verdicts(self.io, snapshot, default_lease_ms=lease_ms)
        out = []
        for e in sorted(snapshot.lineage.values(), key=lambda e: e.started_version):
            v = verdicts.get(e.id)
            out.append(
                LineageView(
                    e.id,
                    e.segments_from,
                    e.segments_to,
                    e.state,
                    _utc(e.timestamp_ms),
                    e.started_version,
                    e.state_version,
                    owner=e.owner.describe() if e.owner is not None else None,
                    lease_expires=_utc(v.lease_expires_ms) if v is not None and v.lease_expires_ms is not None else None,
                    status=f"{v.kind}: {v.reason}" if v is not None else None,
                    revert_reason=e.revert_reason,
                    scope=_scope_text(e.scope),
                    partitions=tuple(e.scope.labels) if e.scope is not None else (),
                )
            )
        return out

    def timeline(self, version: int | None = None) -> Timeline:
        """Per partition, every segment of ``version`` (the newest by default) with the versions that added and replaced it.

        Visible, overshadowed, staged, reverted and removed segments, ordered along time (see
        ``mvtable.connector.partitions.timeline``); ``timeline_html`` draws it.

        Raises:
            VersionNotFoundError: No such version (or no longer).
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return timeline_of(self.snapshot(version))

    # -- writing -------------------------------------------------------------------------
    def append(
        self, data: pa.Table | pa.RecordBatch, *, merge_schema: bool = False, partition_by: Sequence[str] | None = None
    ) -> WriteResult:
        """Add ``data``'s rows in one commit (``write(data, mode="append")``).

        A table that does not exist yet is created with ``data``'s schema (and ``partition_by``,
        see ``create``). ``merge_schema`` adds ``data``'s new columns (and widens types) in the same commit.

        Raises:
            InvalidOptionError: ``data`` is not a pyarrow ``Table`` or ``RecordBatch``.
            SchemaMismatchError: ``data`` does not fit the table's schema; the message names the columns.
            DuplicateKeyError: On a keyed table, a key repeats in ``data`` or is in the table already.
            NullKeyError: On a keyed table, a key column of ``data`` holds nulls.
            WriteIntentExpiredError: The write's files went unprotected too long (vacuum may have
                taken them); nothing was committed, write again.
            CommitFilesMissingError: A file of the write vanished before the commit; write again.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        return self.write(data, mode=WriteMode.APPEND, merge_schema=merge_schema, partition_by=partition_by)

    def overwrite(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        consistent_push: bool = False,
        publish: bool = True,
        merge_schema: bool = False,
        overwrite_schema: bool = False,
        replace_where: pc.Expression | None = None,
        partition_overwrite: str | None = None,
        partition_by: Sequence[str] | None = None,
    ) -> WriteResult:
        """Replace every row with ``data``'s in one commit (``write(data, mode="overwrite")``).

        ``merge_schema`` adds ``data``'s new columns (and widens types); ``overwrite_schema``
        replaces the schema with ``data``'s (see ``write``). With ``consistent_push``,
        ``replace_where`` replaces only the rows that predicate matches and
        ``partition_overwrite="dynamic"`` only the partitions ``data`` has rows in (a scoped
        push, see ``write``).

        Raises:
            InvalidOptionError: ``publish=False`` without ``consistent_push``, ``replace_where`` or
                ``partition_overwrite`` without it (or both at once), or ``data`` is not a
                pyarrow ``Table`` or ``RecordBatch``.
            InvalidFilterError: ``replace_where`` does not fit the table's schema.
            ReplaceWhereViolationError: A row of ``data`` is outside ``replace_where``; nothing was
                committed.
            SchemaMismatchError: ``data`` does not fit the table's schema; the message names the columns.
            DuplicateKeyError: On a keyed table, a key repeats in ``data`` or is in the table already.
            NullKeyError: On a keyed table, a key column of ``data`` holds nulls.
            WriteIntentExpiredError: The write's files went unprotected too long (vacuum may have
                taken them); nothing was committed, write again.
            CommitFilesMissingError: A file of the write vanished before the commit; write again.
            PushBlockedError: With ``consistent_push``, another push over the same rows is alive
                (``PushInProgressError``) or staged (``StagedPushError``).
            ConcurrentCompactionError: A concurrent compaction rewrote rows this overwrite
                replaces; nothing landed, run it again.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        return self.write(
            data,
            mode=WriteMode.OVERWRITE,
            consistent_push=consistent_push,
            publish=publish,
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
            replace_where=replace_where,
            partition_overwrite=partition_overwrite,
            partition_by=partition_by,
        )

    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        *,
        mode: WriteMode | str = WriteMode.APPEND,
        consistent_push: bool = False,
        publish: bool = True,
        merge_schema: bool = False,
        overwrite_schema: bool = False,
        replace_where: pc.Expression | None = None,
        partition_overwrite: str | None = None,
        partition_by: Sequence[str] | None = None,
    ) -> WriteResult:
        """Write ``data`` in one commit, as ``mode`` says (a ``WriteMode`` or its name).

        ``consistent_push`` (overwrite only) replaces the rows as one lineage entry that
        readers see all at once or not at all; ``publish=False`` stages it for ``publish``.
        ``merge_schema`` adds ``data``'s new columns (and widens types) in the same commit;
        ``overwrite_schema`` (overwrite only) replaces the schema with ``data``'s (docs/schema.md).
        ``partition_by`` is the partition spec of a table this write creates (see ``create``); on
        an existing table it may only repeat the table's. On a partitioned table every segment
        written holds one partition's rows.

        A consistent push may be scoped (docs/partitions.md, "Scoped pushes"): ``replace_where``
        (a ``pyarrow.compute`` expression) replaces the rows it matches, and every row of
        ``data`` must satisfy it; ``partition_overwrite="dynamic"`` replaces the partitions
        ``data`` has rows in. Only the segments those rows are in take part: pushes of other
        partitions run at the same time, and rows appended meanwhile stay.

        Raises:
            InvalidOptionError: An unknown mode, options that do not fit it, ``data`` that is not
                a pyarrow ``Table`` or ``RecordBatch``, or a ``partition_by`` other than the table's.
            PartitionSpecError: ``partition_by`` does not fit the data's columns (a table this write creates).
            InvalidFilterError: ``replace_where`` does not fit the table's schema.
            ReplaceWhereViolationError: A row of ``data`` is outside ``replace_where``; nothing was
                committed.
            SchemaMismatchError: ``data`` does not fit the table's schema; the message names the columns.
            DuplicateKeyError: On a keyed table, a key repeats in ``data`` or is in the table already.
            NullKeyError: On a keyed table, a key column of ``data`` holds nulls.
            WriteIntentExpiredError: The write's files went unprotected too long (vacuum may have
                taken them); nothing was committed, write again.
            CommitFilesMissingError: A file of the write vanished before the commit; write again.
            PushBlockedError: With ``consistent_push``, another push over the same rows is alive
                (``PushInProgressError``) or staged (``StagedPushError``).
            ConcurrentCompactionError: A concurrent compaction rewrote rows this overwrite
                replaces; nothing landed, run it again.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        mode = WriteMode.parse(mode)
        data = _as_table(data)
        scope = scoped_push.request(data, replace_where=replace_where, partition_overwrite=partition_overwrite)
        plan = writes.begin_write(
            self.uri,
            storage_options=self.storage_options,
            incoming=data.schema,
            mode=mode.value,
            consistent_push=consistent_push,
            publish=publish,
            snapshot=self._latest_or_empty(),
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
            scope=scope,
            partition_by=partition_by,
        )
        segments: list[SegmentFile] = []
        try:
            # a push renews its lease, every write its intent (vacuum leaves its files alone)
            with recovery.keep_lease(self.io, plan.entry_id, lease_ms=plan.lease_ms), write_intents.keep(self.io, plan.intent):
                rows = None

                def write_rows(table: pa.Table) -> list[SegmentFile]:
                    return writes.write_local(self.io, plan, table)

                def write() -> list[SegmentFile]:
                    return write_rows(data)

                if plan.primary_key:  # key errors (nulls …) before the schema cast complains
                    read = writes.read_snapshot(self.commit_log, plan)
                    rows, segments = write_keyed(
                        self.io, read, plan.arrow_schema, plan.primary_key, data, replace=mode is WriteMode.OVERWRITE, write=write
                    )
                else:
                    segments = write()
                if plan.scoped is not None:  # copy-on-write: the rows rewritten segments keep
                    read = writes.read_snapshot(self.commit_log, plan)
                    kept = scoped_push.write_kept(self.io, read, plan.scoped, write=write_rows)
                    segments += kept
                    if rows is not None:
                        rows = scoped_push.check_keys(self.io, read, plan.scoped, rows, kept)
                faults.point("write.after_files")
            result = writes.finish_write(plan, segments, keys=rows)
            self._seen = result.snapshot
            return WriteResult.of(result)
        except BaseException:
            writes.abort_write(plan, segments)
            raise

    # -- deleting ------------------------------------------------------------------------
    def upsert(self, data: pa.Table | pa.RecordBatch) -> UpsertResult:
        """Replace the rows whose primary key ``data`` holds and insert the others, in one commit.

        Old rows are deleted by deletion vector, new rows appended; the result reports how many rows
        were inserted and updated. Keys may not repeat inside ``data``.

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            NoPrimaryKeyError: The table has no primary key.
            DuplicateKeyError: A key repeats inside ``data``.
            NullKeyError: A key column of ``data`` holds nulls.
            SchemaMismatchError: ``data`` does not fit the table's schema, or lacks a key column.
            InvalidOptionError: ``data`` is not a pyarrow ``Table`` or ``RecordBatch``.
            WriteIntentExpiredError: The upsert's files went unprotected too long; nothing was
                committed, run it again.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        return upsert(self.uri, _as_table(data), storage_options=self.storage_options, snapshot=self._latest_or_empty())

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The key columns (empty when the table has no primary key).

        Raises:
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return self._latest().primary_key

    def delete(self, filter: pc.Expression | None = None, *, keys: Keys | None = None) -> DeleteResult:
        """Delete the rows matching ``filter`` (exactly), or those whose primary key is one of ``keys``.

        ``keys`` is a table or dict of the key columns and no other: a delete matches on the key
        only, so another column would be ignored, and is refused instead. For a one-column key it
        can also be a list of values.

        Writes deletion vectors only: no data file is rewritten. The result's
        ``deleted_rows`` is how many rows went (``delete`` returned that number itself
        before; the result still compares like it for one release, with a warning).

        Raises:
            InvalidOptionError: Neither or both of ``filter`` and ``keys``, or ``filter`` is not a
                boolean expression.
            InvalidFilterError: ``filter`` does not fit the schema; nothing is deleted.
            NoPrimaryKeyError: ``keys`` on a table without a primary key.
            NonKeyColumnError: ``keys`` holds a column that is not part of the primary key.
            SchemaMismatchError: ``keys`` lacks a key column or has a type that does not fit it.
            FilesMissingError: A file the version needs is gone (vacuumed or deleted by hand).
            CorruptionError: A data file or deletion vector is not what the log recorded.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        if (filter is None) == (keys is None):
            raise InvalidOptionError("delete takes exactly one of a filter expression and keys=…")
        if keys is not None:
            return self._delete_keys(keys)
        # the pin also covers the commit's merge of these rows with the snapshot's DVs
        with self._pin(owner="Table.delete") as pinned:
            return delete_where(self.io, self.commit_log, pinned.snapshot, filter)

    def _delete_keys(self, keys: Keys) -> DeleteResult:
        with self._pin(owner="Table.delete by key") as pinned:
            snapshot = pinned.snapshot
            data = key_data(keys, require_key(snapshot, uri=self.uri, what="delete by key"))
            inline = TableProperties.of(snapshot.properties).dv_inline_max_bytes
            return delete_by_key(self.io, self.commit_log, snapshot, data, uri=self.uri, inline_max_bytes=inline)

    def delete_rows(
        self,
        positions: Mapping[str, Sequence[int] | np.ndarray | pa.Array],
        *,
        read: Snapshot | None = None,
        parameters: dict | None = None,
    ) -> DeleteResult:
        """Delete rows by physical address ``{segment id: positions}`` as read at ``read`` (the newest snapshot by default).

        Positions are integers (Python ints, NumPy or pyarrow integer arrays); anything else, and
        unknown addresses, raise and commit nothing (see ``row_positions``).

        Raises:
            InvalidOptionError: ``positions`` is not a mapping of segment ids to integer positions.
            InvalidRowAddressError: A segment is not part of the table at ``read``, or a position is
                past its end; nothing is deleted.
            ConcurrentReplaceError: A concurrent commit replaced or removed one of the segments;
                read again and address the rows anew.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        arrays = row_positions(positions)
        read = read or self._latest()
        with pin_snapshot(self.io, self.commit_log, snapshot=read, owner="Table.delete_rows"):  # its DVs are merged with ours
            return commit_deletes(
                self.io,
                self.commit_log,
                read,
                arrays,
                inline_max_bytes=TableProperties.of(read.properties).dv_inline_max_bytes,
                parameters=parameters,
            )

    # -- lifecycle -----------------------------------------------------------------------
    def rollback(self, *, entry: str | None = None, version: int | None = None) -> ActionResult:
        """Revert one consistent push (``entry``) or restore the table as of ``version``.

        Raises:
            InvalidOptionError: Neither or both of ``entry`` and ``version`` were given.
            InvalidLineageTransitionError: There is no such lineage entry, or its state does not
                allow this step (e.g. publishing a reverted push).
            DuplicateKeyError: On a keyed table, rolling back ``entry`` would bring back a key
                committed since; nothing is committed.
            VersionNotFoundError: ``version`` does not exist, or its commit is no longer in the log.
            FilesMissingError: Files ``version`` needs were vacuumed; it cannot be restored.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        from . import lifecycle

        if entry is not None and version is None:
            return lifecycle.rollback_entry(self.commit_log, entry)
        if version is not None and entry is None:
            return lifecycle.restore_version(self.commit_log, version)
        raise InvalidOptionError("rollback takes exactly one of entry=… (a lineage entry id) and version=…")

    def restore(self, *, version: int) -> ActionResult:
        """Restore the table as of ``version``, in one new commit (``rollback(version=…)``).

        Raises:
            VersionNotFoundError: ``version`` does not exist, or its commit is no longer in the log.
            FilesMissingError: Files ``version`` needs were vacuumed; it cannot be restored.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        from . import lifecycle

        return lifecycle.restore_version(self.commit_log, version)

    def publish(self, entry: str) -> ActionResult:
        """Complete a staged consistent push (written with ``publish=False``).

        Raises:
            InvalidLineageTransitionError: There is no such lineage entry, or its state does not
                allow this step (e.g. publishing a reverted push).
            DuplicateKeyError: On a keyed table, a key of the push was committed since it was staged;
                the push stays staged.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        from . import lifecycle

        return lifecycle.publish_entry(self.commit_log, entry)

    # -- maintenance ---------------------------------------------------------------------
    def collect_garbage(
        self,
        *,
        dry_run: bool = False,
        time_budget_s: float | None = None,
        batch_bytes: int | None = None,
        now_ms: int | None = None,
        progress: Progress | None = None,
        force: bool = False,
    ) -> GCResult:
        """Visibility GC: superseded DV files, old log files, expired pins.

        Safe beside readers (pinned and retained versions stay readable) and resumable: a pass stops
        after ``time_budget_s`` (default: the ``gcTimeBudget`` setting) and the next one goes on.
        ``batch_bytes`` (default ``gcBatchBytes``) bounds one delete call; ``now_ms`` is the clock
        for retention, pin expiry and grace; ``progress(done, total, phase)``. A table whose
        ``orphanGracePeriod`` is below the safe minimum needs ``force=True``
        (``OrphanGraceTooShortError``).

        Raises:
            OrphanGraceTooShortError: The table's ``orphanGracePeriod`` is below the safe minimum
                and ``force`` is not set; nothing was deleted.
            InvalidOptionError: A malformed flag, budget, batch size or clock.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        from .gc import collect_garbage

        report = collect_garbage(
            self.commit_log,
            dry_run=dry_run,
            time_budget_s=time_budget_s,
            batch_bytes=batch_bytes,
            now_ms=now_ms,
            progress=progress,
            force=force,
        )
        return GCResult.of(report)

    def vacuum(
        self,
        *,
        retention: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        time_budget_s: float | None = None,
        batch_bytes: int | None = None,
        now_ms: int | None = None,
        progress: Progress | None = None,
    ) -> VacuumResult:
        """Apply lineage retention, then delete the files no retained version needs and orphans past the grace period.

        Data, DV and log files go; never a file of a write in flight (writes hold write intents).
        ``retention`` defaults to the table's ``versionRetentionPeriod``; a shorter one, or an
        ``orphanGracePeriod`` below the safe minimum, needs ``force=True``. The other options are
        those of ``collect_garbage``.

        Raises:
            RetentionTooShortError: ``retention`` is shorter than the table's, or its
                ``orphanGracePeriod`` is below the safe minimum (``OrphanGraceTooShortError``),
                and ``force`` is not set; nothing was deleted.
            InvalidOptionError: A malformed ``retention``, flag, budget, batch size or clock.
            StorageFullError: The store is full and the retention commit does not fit even after
                freeing what needs no commit.
            CommitConflictError: A concurrent commit made this one invalid; nothing of it landed,
                so run it again.
            CommitStateUnknownError: The store never said whether the commit landed; look for it in
                ``history()`` before running it again.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        from .vacuum import vacuum

        report = vacuum(
            self.commit_log,
            retention=retention,
            dry_run=dry_run,
            force=force,
            time_budget_s=time_budget_s,
            batch_bytes=batch_bytes,
            now_ms=checks.epoch_ms(now_ms),
            progress=progress,
        )
        return VacuumResult.of(report)

    # -- other formats -------------------------------------------------------------------
    def export_iceberg(self, *, all_versions: bool = False) -> ExportResult:
        """Write Iceberg v3 metadata (``metadata/``) naming this table's own files.

        For the newest version, or every version the log can still rebuild. Metadata only.

        Raises:
            InvalidOptionError: ``all_versions`` is not a bool.
            ExportError: The export cannot be written: a column type the format cannot hold, a
                folder that is not writable, another table's or a foreign export in the folder, or a
                concurrent export of the same version (``ExportConflictError``: run it again).
            FilesMissingError: A file a version needs is gone, so it cannot be exported.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return export(self.io, self.commit_log, format="iceberg", all_versions=all_versions)

    def export_delta(self, *, all_versions: bool = False) -> ExportResult:
        """Append Delta commits (``_delta_log/``) naming this table's own files.

        For the newest version, or every version the log can still rebuild. Metadata only.

        Raises:
            InvalidOptionError: ``all_versions`` is not a bool.
            ExportError: The export cannot be written: a column type the format cannot hold, a
                folder that is not writable, another table's or a foreign export in the folder, or a
                concurrent export of the same version (``ExportConflictError``: run it again).
            FilesMissingError: A file a version needs is gone, so it cannot be exported.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
        """
        return export(self.io, self.commit_log, format="delta", all_versions=all_versions)

    # -- compaction ----------------------------------------------------------------------
    def compact(
        self,
        *,
        target_file_size: int | str | None = None,
        min_input_files: int | None = None,
        delete_ratio: float | None = None,
        max_bytes_per_commit: int | str | None = None,
        dry_run: bool = False,
        progress: Callable[[int, int, str], None] | None = None,
        where: pc.Expression | None = None,
    ) -> CompactionResult:
        """Merge small segments and rewrite segments worn by deletes, beside concurrent appends and deletes.

        Neither ever fails because of it. Defaults come from the table properties
        ``compactTargetFileSize`` (sizes take ``128MiB``-style units), ``compactMinInputFiles``,
        ``compactDeleteRatio`` and ``compactMaxBytesPerCommit`` (see
        ``mvtable.connector.compaction``). Bins never mix partitions; ``where`` (an expression
        over the table's columns) limits the run to the partitions it may match. After
        ``update_partitioning``, segments of an older spec are rewritten into the new grain
        where all their rows fall in one new partition.

        Raises:
            InvalidOptionError: A malformed size, count, ratio or flag (``SettingsError`` names the
                option).
            InvalidFilterError: ``where`` does not fit the table's schema.
            CorruptSegmentError: A segment to rewrite is not what the log recorded; nothing of its
                bin is committed.
            FilesMissingError: A segment to rewrite is gone (vacuumed or deleted by hand).
            CommitStateUnknownError: The store never said whether a compaction commit landed; look
                for it in ``history()`` before running it again.
            TooManyRetriesError: Every retry of a commit lost the race to concurrent writers.
            TableNotFoundError: There is no mvtable table at the URI.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read (permissions, network).
            StorageError: The store refused or failed a write (full, read-only, no permission).
        """
        from .compaction import compact

        report = compact(
            self.io,
            self.commit_log,
            target_file_size=target_file_size,
            min_input_files=min_input_files,
            delete_ratio=delete_ratio,
            max_bytes_per_commit=max_bytes_per_commit,
            dry_run=dry_run,
            progress=progress,
            where=where,
        )
        return CompactionResult.of(report)

    def __repr__(self) -> str:
        return f"Table({self.uri!r})"
