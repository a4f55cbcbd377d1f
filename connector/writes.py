"""The write protocol shared by ``Table`` and the Spark writer.

Three steps, so that Spark can run them in three places (delta-rs'
``create_write_transaction``, Lance's operation + ``commit(read_version)``):

1. ``begin_write`` on the driver: read the snapshot, check the schema, take the write
   intent that keeps vacuum off the write's files (``write_intents``), and for a consistent
   push open the IN_PROGRESS lineage entry. Returns a picklable ``WritePlan``.
2. ``write_data`` on executors: write segments named after the intent (renewing it while
   they write), return their descriptors.
3. ``finish_write`` on the driver: one commit naming every segment; or ``abort_write``,
   which first checks whether the commit landed after all, then reverts the entry and
   removes the files. Either removes the intent.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from mvtable import checks
from mvtable.conf import TableProperties, property_strings
from mvtable.errors import (
    CommitStateUnknownError,
    ConcurrentMetadataError,
    InvalidOptionError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from mvtable.ids import new_entry_id
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import AddSegment, MetadataAction, PushOwner, SegmentFile
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.lineage.partitioning import PartitionSpec
from mvtable.lineage.schema_ids import highest_id
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.transactions import has_prepared
from mvtable.storage import FileIO, open_file_io

from . import recovery, scoped_push, write_intents
from .casting import cast_columns
from .key_index import index_path
from .keys.commit import KeyedRows, check_absent, commit_keyed, segment_keys
from .keys.validate import check_key_columns, check_key_schema, same_key
from .nested_names import with_table_names
from .partitions.scope_labels import file_partition
from .partitions.spec import carried_spec, parse_partition_by
from .partitions.writing import PartitionedWriter, write_partitioned
from .pinning import SnapshotPin, pin_version, release
from .post_commit import open_log
from .recovery.transactions import Stores, recover_table
from .schema import check_new_table_columns, check_write_schema, schema_from_json, schema_to_json
from .schema_evolution.field_ids import fresh_ids, strip_ids
from .schema_evolution.merge import merged_schema, replaced_schema
from .schema_evolution.partition_sources import check_partition_sources
from .scoped_push import ScopedPlan, ScopeRequest
from .segments import SegmentWriter
from .write_intents import WriteIntent

logger = logging.getLogger("mvtable.connector")

APPEND = "append"
OVERWRITE = "overwrite"


@dataclass(frozen=True)
class WritePlan:
    uri: str
    storage_options: dict[str, Any]
    mode: str
    consistent_push: bool
    publish: bool
    read_version: int
    table_schema: dict[str, Any]
    row_group_rows: int
    create: dict[str, Any] | None = None  # MetadataAction fields when the table does not exist yet
    entry_id: str | None = None
    primary_key: tuple[str, ...] = ()  # the table's key: segments get a key index, commits check keys
    dv_inline_max_bytes: int = 512
    lease_ms: int = 0  # a consistent push renews its lease this long ahead (pushLeasePeriod)
    pin: SnapshotPin | None = None  # keeps the read version readable until the write ends
    intent: WriteIntent | None = None  # keeps vacuum off the write's files until it commits or aborts
    task_intents: bool = False  # no intent at planning (a streaming batch): each task takes its own
    parameters: dict[str, Any] = field(default_factory=dict)
    # The snapshot begin_write read, so that a finish_write in the same process (Table.append,
    # a Spark driver that planned the write) catches up from it instead of reading the log
    # again. Never pickled: an executor or another process reads the log itself.
    read_snapshot: Snapshot | None = field(default=None, compare=False, repr=False)
    # Transaction ids of this plan's commits that ended in CommitStateUnknownError: such a
    # commit may still land (a PUT held by the network), so abort_write keeps its files.
    unsettled: list[str] = field(default_factory=list, compare=False, repr=False)
    # Spark's default save mode (ErrorIfExists): the commit must create the table, so a table a
    # concurrent writer created after this write planned is refused, not appended to
    create_only: bool = False
    segment_prefix: str = ""  # starts every segment id this write makes (SegmentWriter's id_prefix)
    # merge_schema / overwrite_schema: the schema change the write's commit carries
    # (``table_schema`` above is already the new one): {"table_schema", "last_field_id", "changes"}
    evolve: dict[str, Any] | None = None
    fill_missing: bool = False  # merge_schema: nullable columns the data lacks are written as nulls
    # a scoped push (replace_where, dynamic partition overwrite): what it replaces and rewrites,
    # and its scope (``scoped_push``); None: a push replaces the whole table
    scoped: ScopedPlan | None = None
    # a dynamic partition overwrite whose partitions only its segments will tell (Spark): no
    # push starts at planning; finish_write plans it and commits start, segments and end at once
    deferred_scope: bool = False
    # the spec new segments are written under (the table's default spec); None: unpartitioned
    partition_spec: PartitionSpec | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "read_snapshot": None}

    @property
    def arrow_schema(self) -> pa.Schema:
        return schema_from_json(self.table_schema)

    def commit_log(self) -> CommitLog:
        return open_log(open_file_io(self.uri, self.storage_options))


def load_snapshot(commit_log: CommitLog) -> Snapshot:
    try:
        return commit_log.snapshot()
    except TableNotFoundError:
        return Snapshot()


def begin_write(
    uri: str,
    *,
    storage_options: Mapping[str, Any] | None,
    incoming: pa.Schema,
    mode: str,
    consistent_push: bool = False,
    publish: bool = True,
    properties: Mapping[str, str] | None = None,
    pin: bool = True,
    primary_key: Sequence[str] | None = None,
    snapshot: Snapshot | None = None,
    owner: PushOwner | None = None,
    take_intent: bool | None = None,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    scope: ScopeRequest | None = None,
    partition_by: Sequence[str] | None = None,
) -> WritePlan:
    """Plan a write on the driver: check it against the table, then pin, take an intent, start a push.

    ``pin=False`` plans without pinning the read version: for a streaming writer, which
    plans again in every process Spark runs it in and commits against the newest snapshot.
    ``primary_key`` sets the key of a table this write creates; on an existing table it may
    only repeat the table's key. ``snapshot`` is the newest snapshot when the caller holds
    one (a ``Table`` passes its own, caught up); else it is read from the log. A consistent push starts here
    (``recovery.start_push``): ``owner`` is who runs it, this process by default (a Spark
    planner passes the driver JVM). ``take_intent`` (default: ``pin``) takes the write
    intent the files are named after, owned by ``owner`` too (``write_intents``); a
    streaming writer plans without one, a write of no files needs none. ``merge_schema`` adds the
    data's new columns and widens types in the write's own commit; ``overwrite_schema`` (an
    overwrite) replaces the schema with the data's (``schema_evolution.merge``).
    ``partition_by`` (``["day(ts)", "region"]``) is the partition spec of a table this write
    creates (spec 1); on an existing table it may only repeat the table's spec. ``scope``
    makes the push a scoped one (``scoped_push``): what it replaces is decided at
    the read snapshot, before the push starts, and the data's rows are checked against
    ``replace_where`` first when the request carries them.

    Raises:
        InvalidOptionError: an unknown mode, options that do not go together, properties or a
            primary key on an existing table, or a ``partition_by`` other than an existing table's.
        PartitionSpecError: ``partition_by`` names an unknown or nested column, puts a transform on a
            column of a type it does not take, or gives a field twice; nothing is created.
        InvalidFilterError: ``replace_where`` does not fit the table's schema.
        ReplaceWhereViolationError: a row of the data is outside ``replace_where``; nothing started.
        SchemaMismatchError: the data does not fit the table's schema, or a new table's columns are reserved.
        KeyColumnMissingError: a key column is missing from the data.
        KeyTypeMismatchError: a key column's type differs from the table's.
        UnsupportedKeyTypeError: a new table's key column has a type keys cannot have.
    """
    _check_mode(mode)
    consistent_push = checks.flag(consistent_push, name="consistent_push")
    publish = checks.flag(publish, name="publish")
    properties = property_strings(properties)
    _check_push_options(consistent_push=consistent_push, publish=publish, mode=mode)
    io = open_file_io(uri, storage_options)
    commit_log = open_log(io)
    if snapshot is None:
        snapshot = load_snapshot(commit_log)
    merge_schema = checks.flag(merge_schema, name="merge_schema")
    overwrite_schema = checks.flag(overwrite_schema, name="overwrite_schema")
    if overwrite_schema and (mode != OVERWRITE or not publish):
        raise InvalidOptionError(
            "overwriteSchema replaces the table's schema with the data's: use it with mode('overwrite') (and a published push)"
        )
    snapshot = finish_transactions(commit_log, snapshot, storage_options)
    if snapshot.exists:
        target = _existing_table(
            snapshot,
            incoming,
            properties=properties,
            primary_key=primary_key,
            merge_schema=merge_schema,
            overwrite_schema=overwrite_schema,
            partition_by=partition_by,
        )
    else:
        target = _new_table(snapshot, incoming, properties=properties, primary_key=primary_key, partition_by=partition_by)
    plan = _pinned_plan(
        io,
        snapshot,
        target,
        uri=uri,
        storage_options=storage_options,
        mode=mode,
        consistent_push=consistent_push,
        publish=publish,
        pin=pin,
    )
    if merge_schema:
        plan = dataclasses.replace(plan, fill_missing=True)
    if target.spec is not None and target.spec.partitioned:
        plan = dataclasses.replace(plan, partition_spec=target.spec)
    if scope is not None:
        plan = _with_scope(io, snapshot, plan, scope, consistent_push=consistent_push)
    if pin if take_intent is None else take_intent:
        plan = _with_intent(io, plan, owner=owner)
    if consistent_push and not plan.deferred_scope:
        plan = _start_push(io, commit_log, snapshot, plan, target, owner=owner)
    elif plan.deferred_scope:
        plan = dataclasses.replace(plan, lease_ms=target.props.push_lease_ms)
    return plan


@dataclass(frozen=True)
class _Target:
    """What a write targets: the table's schema, properties and key, and the table to create if any.

    An existing table fixes all of them; a new one takes them from the write.
    """

    table_schema: dict[str, Any]
    props: TableProperties
    key: tuple[str, ...]
    create: MetadataAction | None = None
    evolve: dict[str, Any] | None = None  # a schema change the write's commit carries (WritePlan.evolve)
    spec: PartitionSpec | None = None  # the partition spec new segments follow


def _check_mode(mode: str) -> None:
    """Refuse a mode other than append and overwrite.

    Checked first, so a typo in the mode is the error a caller sees.

    Raises:
        InvalidOptionError: an unknown mode.
    """
    if mode not in (APPEND, OVERWRITE):
        raise InvalidOptionError(f"unknown write mode {mode!r}; use 'append' or 'overwrite'")


def _check_push_options(*, consistent_push: bool, publish: bool, mode: str) -> None:
    """Refuse push options that do not go together.

    A consistent push replaces the snapshot, and only a consistent push can be staged unpublished.

    Raises:
        InvalidOptionError: ``consistent_push`` without overwrite, or ``publish=False`` without a push.
    """
    if consistent_push and mode != OVERWRITE:
        raise InvalidOptionError("consistentPush replaces the table's snapshot: use it with mode('overwrite')")
    if not publish and not consistent_push:
        raise InvalidOptionError("publish=false stages a consistent push: it needs consistentPush=true")


def _existing_table(
    snapshot: Snapshot,
    incoming: pa.Schema,
    *,
    properties: dict[str, str],
    primary_key: Sequence[str] | None,
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    partition_by: Sequence[str] | None = None,
) -> _Target:
    """Check a write to an existing table against its schema, key and partition spec.

    Properties and a primary key belong to the table's creation; a write may only repeat the key.

    Raises:
        InvalidOptionError: properties, or a primary key or ``partition_by`` other than the table's.
        SchemaMismatchError: the data does not fit the table's schema.
        KeyColumnMissingError: a key column is missing from the data.
        KeyTypeMismatchError: a key column's type differs from the table's.
        SchemaEvolutionError: ``merge_schema`` and a column whose type cannot be merged.
    """
    if properties:
        raise InvalidOptionError(f"table properties {sorted(properties)} can only be set when the table is created")
    if snapshot.primary_key:
        check_key_schema(schema_from_json(snapshot.table_schema), snapshot.primary_key, incoming)
    table_schema, evolve = snapshot.table_schema, None
    carried: PartitionSpec | None = None
    last_id = max(snapshot.last_field_id, highest_id(snapshot.table_schema))
    if overwrite_schema:
        check_new_table_columns(incoming)
        table_schema, last = replaced_schema(strip_ids(schema_to_json(incoming)), last_field_id=last_id)
        evolve = {"table_schema": table_schema, "last_field_id": last, "changes": ["overwrite schema"]}
        carried = carried_spec(snapshot.partition_specs, snapshot.default_spec_id, snapshot.table_schema, table_schema)
        if carried is not None:  # the spec follows its columns to their new ids (partitions.spec.carried_spec)
            evolve["partition_spec"] = carried
            evolve["from_spec_id"] = snapshot.default_spec_id
    elif merge_schema:
        merged = merged_schema(snapshot.table_schema, incoming, last_field_id=last_id, primary_key=snapshot.primary_key)
        if merged is not None:
            check_partition_sources(snapshot.partition_specs, snapshot.default_spec_id, snapshot.table_schema, merged.doc)
            table_schema = merged.doc
            evolve = {"table_schema": table_schema, "last_field_id": merged.last_field_id, "changes": list(merged.changes)}
    check_write_schema(table_schema, incoming, fill_missing=merge_schema)
    if primary_key and not same_key(primary_key, snapshot.primary_key):
        have = list(snapshot.primary_key) if snapshot.primary_key else "no primary key"
        raise InvalidOptionError(f"the table has {have}; a primary key can only be set when the table is created")
    if partition_by is not None:
        same_spec(snapshot, partition_by)
    return _Target(
        table_schema=table_schema,
        props=TableProperties.of(snapshot.properties),
        key=snapshot.primary_key,
        evolve=evolve,
        spec=carried if carried is not None else snapshot.default_spec,
    )


def _new_table(
    snapshot: Snapshot,
    incoming: pa.Schema,
    *,
    properties: dict[str, str],
    primary_key: Sequence[str] | None,
    partition_by: Sequence[str] | None = None,
) -> _Target:
    """Plan the table a write creates: its schema from the data, its properties and key from the options.

    The metadata is committed with the write's first commit (or the push's start).

    Raises:
        SchemaMismatchError: a column name mvtable reserves.
        KeyColumnMissingError: a key column is not in the data.
        UnsupportedKeyTypeError: a key column has a type keys cannot have.
        PartitionSpecError: ``partition_by`` does not fit the data's columns.
    """
    check_new_table_columns(incoming)
    table_schema, last_field_id = fresh_ids(schema_to_json(incoming))  # ids 1, 2, … (schema_evolution)
    props = TableProperties.of(snapshot.properties, properties)
    key = check_key_columns(incoming, primary_key or ())  # the schema's spelling of the key
    spec = parse_partition_by(list(partition_by), table_schema, spec_id=1) if partition_by else None
    partitioned = spec is not None and spec.partitioned
    create = MetadataAction(
        table_id=uuid.uuid4().hex,
        table_schema=table_schema,
        properties=dict(properties or {}),
        primary_key=key or None,
        schema_id=0,
        last_field_id=last_field_id,
        partition_specs=(spec,) if partitioned and spec is not None else None,
        default_spec_id=1 if partitioned else None,
    )
    return _Target(table_schema=table_schema, props=props, key=key, create=create, spec=spec)


def same_spec(snapshot: Snapshot, partition_by: Sequence[str]) -> None:
    """Refuse a ``partition_by`` on an existing table unless it is the table's spec.

    Raises:
        InvalidOptionError: the spec differs (the table's partitioning changes only by ``update_partitioning``).
        PartitionSpecError: ``partition_by`` does not fit the table's columns."""
    wanted = parse_partition_by(list(partition_by), snapshot.table_schema, spec_id=snapshot.default_spec_id)
    have = snapshot.default_spec
    if wanted.fields != have.fields:
        described = [f"{f.transform}({f.name})" for f in have.fields] or "no partitions"
        raise InvalidOptionError(
            f"partitionBy {list(partition_by)} differs from the table's partitioning ({described}); a write cannot "
            "change it: use Table.update_partitioning to change the spec for new writes"
        )


def _pinned_plan(
    io: FileIO,
    snapshot: Snapshot,
    target: _Target,
    *,
    uri: str,
    storage_options: Mapping[str, Any] | None,
    mode: str,
    consistent_push: bool,
    publish: bool,
    pin: bool,
) -> WritePlan:
    """The plan of a write to ``target`` read at ``snapshot``, its read version pinned when asked.

    The pin keeps that version readable until the write ends; a new table has none to pin.
    """
    return WritePlan(
        uri=uri,
        storage_options=dict(storage_options or {}),
        mode=mode,
        consistent_push=consistent_push,
        publish=publish,
        read_version=snapshot.version,
        table_schema=target.table_schema,
        row_group_rows=target.props.row_group_rows,
        primary_key=target.key,
        dv_inline_max_bytes=target.props.dv_inline_max_bytes,
        create=target.create.model_dump() if target.create else None,
        evolve=target.evolve,
        pin=pin_version(io, snapshot.version, owner="write") if snapshot.exists and pin else None,
        read_snapshot=snapshot,
    )


def _with_scope(io: FileIO, snapshot: Snapshot, plan: WritePlan, request: ScopeRequest, *, consistent_push: bool) -> WritePlan:
    """``plan`` with what its scoped push replaces, the data checked against ``replace_where`` first; on failure the pin is released.

    Raises:
        InvalidOptionError: the scope's options do not fit the write.
        InvalidFilterError: ``replace_where`` does not fit the table's schema.
        ReplaceWhereViolationError: a row of the data is outside ``replace_where``."""
    try:
        scoped_push.check_options(
            mode=plan.mode,
            consistent_push=consistent_push,
            replace_where=request.predicate,
            partition_overwrite=scoped_push.DYNAMIC if request.dynamic else None,
        )
        if request.deferred:
            return dataclasses.replace(plan, deferred_scope=True)
        scoped = plan_scope(io, snapshot, plan, request)
    except BaseException:
        release_pin(plan)
        raise
    return dataclasses.replace(plan, scoped=scoped)


def plan_scope(io: FileIO, snapshot: Snapshot, plan: WritePlan, request: ScopeRequest) -> ScopedPlan:
    """What a scoped push planned by ``plan`` replaces at ``snapshot``, its data's rows checked against ``replace_where`` first.

    Shared by a single write (``begin_write``) and a transaction's overwrite, which plans
    the same scope without starting a push of its own.

    Raises:
        InvalidFilterError: ``replace_where`` does not fit the table's schema.
        ReplaceWhereViolationError: a row of the data is outside ``replace_where``."""
    if request.data is not None:
        request = dataclasses.replace(request, data=align(plan, request.data))
        if request.predicate is not None:
            scoped_push.check_rows(request.data, request.predicate, schema=plan.arrow_schema)
    return scoped_push.plan_scoped(io, snapshot, request)


def _with_intent(io: FileIO, plan: WritePlan, *, owner: PushOwner | None) -> WritePlan:
    """``plan`` with the write intent its files are named after; on failure the pin is released.

    The intent keeps vacuum off the write's files until it commits or aborts.
    """
    try:
        intent = write_intents.take(io, operation=plan.mode if not plan.consistent_push else "consistent push", owner=owner)
    except BaseException:
        release_pin(plan)
        raise
    return dataclasses.replace(plan, intent=intent)


def _start_push(
    io: FileIO, commit_log: CommitLog, snapshot: Snapshot, plan: WritePlan, target: _Target, *, owner: PushOwner | None
) -> WritePlan:
    """Open a consistent push's IN_PROGRESS lineage entry; on failure the pin and intent are released.

    The push's start commit creates a new table, so the plan no longer does.
    """
    entry_id = new_entry_id()
    lease_ms = target.props.push_lease_ms
    try:
        result = recovery.start_push(
            commit_log,
            snapshot,
            entry_id=entry_id,
            owner=owner or recovery.process_owner(),
            lease_ms=lease_ms,
            metadata=target.create,
            replaced=plan.scoped.segments_from if plan.scoped is not None else None,
            scope=plan.scoped.scope if plan.scoped is not None else None,
            parameters=plan.scoped.parameters() if plan.scoped is not None else None,
        )
    except BaseException:
        release_pin(plan)
        write_intents.release(io, plan.intent)
        raise
    logger.info("consistent push %s started at version %s", entry_id, result.commit.version)
    return WritePlan(**{**plan.__dict__, "entry_id": entry_id, "create": None, "lease_ms": lease_ms})


def write_data(plan: WritePlan, batches: Iterable[pa.RecordBatch]) -> list[SegmentFile]:
    """Executor side: write one segment per call (per Spark task), one per partition on a partitioned table.

    On a partitioned table each batch is split by partition and the task keeps one open
    writer per partition it meets (``partitions.writing.PartitionedWriter``): memory grows with
    the number of distinct partitions in the task's rows, at most a row group each.

    The write intent (and a
    consistent push's lease) is renewed while the task writes: the planner that took them
    is long gone. A task that finds the intent lapsed stops (``WriteIntentExpiredError``).
    With ``plan.task_intents`` (a streaming batch, planned without side effects) the task
    takes an intent of its own, which the commit renews and removes.

    Raises:
        WriteIntentExpiredError: the intent lapsed while the task wrote.
        ReplaceWhereViolationError: a scoped push's row is outside its ``replace_where``.
    """
    io = open_file_io(plan.uri, plan.storage_options)
    schema = plan.arrow_schema
    intent, own = plan.intent, None
    if intent is None and plan.task_intents:  # the commit finds it by the segment's name
        intent = own = write_intents.take(io, operation="streaming batch task", owner=recovery.spark_driver_owner())
    make_writer = lambda: SegmentWriter(
        io, schema, row_group_rows=plan.row_group_rows, primary_key=plan.primary_key, id_prefix=plan.segment_prefix, intent=intent
    )
    spec = plan.partition_spec
    writer: SegmentWriter | PartitionedWriter = (
        PartitionedWriter(spec, plan.table_schema, make_writer) if spec is not None and spec.partitioned else make_writer()
    )
    order: list[str | None] | None = None
    check = plan.scoped.check if plan.scoped is not None else None
    seen = 0
    try:
        keeper: AbstractContextManager[object] = (
            write_intents.IntentKeeper(io, intent, renew_first=own is None) if intent is not None else nullcontext()
        )
        with recovery.keep_lease(io, plan.entry_id, lease_ms=plan.lease_ms), keeper:
            for batch in batches:
                if order is None:
                    order = check_write_schema(plan.table_schema, batch.schema, fill_missing=plan.fill_missing)
                if batch.schema.names != order or batch.schema != schema:
                    batch = cast_columns(
                        pa.RecordBatch, _table_named(batch, order, schema), schema, data_names=_names(order, schema)
                    )
                if check is not None:  # a scoped push writes only rows it replaces
                    rows = pa.Table.from_batches([batch])
                    scoped_push.check_rows(rows, check, schema=schema, first_row=seen, source="a write task's rows")
                    seen += batch.num_rows
                writer.write(batch)
            closed = writer.close()
    except BaseException:
        writer.abort()
        write_intents.release(io, own)
        raise
    segments = closed if isinstance(closed, list) else [closed] if closed is not None else []
    if not segments:
        write_intents.release(io, own)
    return segments


def write_local(io: FileIO, plan: WritePlan, data: pa.Table) -> list[SegmentFile]:
    """Write ``data`` as ``plan`` says, on this machine (``Table.write``, a transaction's writes): one segment set per partition.

    Raises:
        SchemaMismatchError: ``data`` does not fit the plan's schema."""
    aligned = align(plan, data)
    if not data.num_rows:
        return []
    return write_partitioned(
        io,
        aligned,
        spec=plan.partition_spec,
        table_schema=plan.table_schema,
        row_group_rows=plan.row_group_rows,
        primary_key=plan.primary_key,
        intent=plan.intent,
    )


def align(plan: WritePlan, data: pa.Table) -> pa.Table:
    """``data`` with the table's column order and types.

    Raises:
        SchemaMismatchError: the data cannot have them.
    """
    order = check_write_schema(plan.table_schema, data.schema, fill_missing=plan.fill_missing)
    schema = plan.arrow_schema
    if not data.num_rows:
        return schema.empty_table()
    if data.schema.equals(schema, check_metadata=True):  # already the table's columns, order and types
        return data
    return cast_columns(pa.Table, _table_named(data, order, schema), schema, data_names=_names(order, schema))


def _table_named(data: pa.Table | pa.RecordBatch, order: Sequence[str | None], schema: pa.Schema) -> list[Any]:
    """``data``'s columns in table order, ready for the cast to ``schema``.

    ``order`` names them as the data does (None: a column the data lacks, written as nulls); their
    struct fields get the table's names.
    """
    return [
        pa.nulls(data.num_rows, f.type) if n is None else with_table_names(data.column(n), f.type) for n, f in zip(order, schema)
    ]


def _names(order: Sequence[str | None], schema: pa.Schema) -> list[str]:
    return [n if n is not None else f.name for n, f in zip(order, schema)]


def finish_write(plan: WritePlan, segments: Sequence[SegmentFile], *, keys: KeyedRows | None = None) -> CommitResult:
    """The one commit of a write.

    On a keyed table ``keys`` are the keys the segments hold
    (read back from the segments when not given); the commit records their filter and
    fails with ``DuplicateKeyError`` if a concurrent commit made one of them visible. The
    write intent is renewed first (``WriteIntentExpiredError`` if it lapsed: its files may
    be gone) and while the commit runs, and removed once it landed.

    Raises:
        DuplicateKeyError: a concurrent commit made one of the keys visible.
        WriteIntentExpiredError: the intent lapsed, so the write's files may be gone.
    """
    commit_log = plan.commit_log()
    with write_intents.keep(commit_log.io, plan.intent):
        try:
            if plan.deferred_scope:
                result = _commit_dynamic(commit_log, plan, segments, keys=keys)
            else:
                result = _commit_write(commit_log, plan, segments, keys=keys)
        except CommitStateUnknownError as exc:
            plan.unsettled.append(exc.txn or "")  # abort_write keeps its files, and the intent lapses
            raise
    try:  # the commit stands: a failed clean-up must not report it as failed
        write_intents.release(commit_log.io, plan.intent)
        if plan.entry_id is not None:  # published or staged: nothing renews the lease any more
            recovery.drop(commit_log.io, plan.entry_id)
        release_pin(plan)
    except Exception as exc:
        logger.warning(
            "version %s landed; releasing its intent/pin/lease failed (they expire on their own): %s", result.commit.version, exc
        )
    return result


def _commit_write(
    commit_log: CommitLog, plan: WritePlan, segments: Sequence[SegmentFile], *, keys: KeyedRows | None
) -> CommitResult:
    read = read_snapshot(commit_log, plan)
    current = commit_log.catch_up(read) if read.exists else load_snapshot(commit_log)
    create = MetadataAction.model_validate(plan.create) if plan.create else None
    metrics = {
        "added_rows": sum(s.num_rows for s in segments),
        "added_segments": len(segments),
        "added_bytes": sum(s.size_bytes for s in segments),
    }
    if plan.consistent_push:
        assert plan.entry_id is not None
        operation = Operation.CONSISTENT_PUSH if plan.publish else Operation.PUSH_STAGE
        rewritten = plan.scoped.dvs if plan.scoped is not None else None
        data = lambda cur: ops.push_segments(cur, plan.entry_id, segments, publish=plan.publish, rewritten=rewritten)
    elif plan.mode == OVERWRITE:
        operation = Operation.OVERWRITE
        data = lambda cur: ops.overwrite(read, cur, segments, metadata=create)
    else:
        operation = Operation.APPEND if read.exists else Operation.CREATE
        data = lambda cur: ops.append(_still_new(cur, plan), segments, metadata=create)
    build = lambda cur: [*schema_change(cur, plan.evolve), *data(cur)]
    params = {
        "mode": plan.mode,
        **({"entry": plan.entry_id} if plan.entry_id else {}),
        **({"schemaChanges": plan.evolve["changes"], "schemaId": read.schema_id + 1} if plan.evolve else {}),
        **(plan.scoped.parameters() if plan.scoped is not None else {}),
        **plan.parameters,
    }
    if plan.primary_key and segments:
        rows = keys if keys is not None else segment_keys(commit_log.io, segments, plan.primary_key)
        if plan.scoped is not None and keys is None:  # keys read back here: check them as Table.write does
            rows = scoped_push.check_keys(commit_log.io, read, plan.scoped, rows, ())
        if plan.scoped is not None:  # a scoped push replaces only some segments: keys elsewhere still count
            replaced = set(plan.scoped.segments_from)
        else:
            replaced = set(read.visible_segment_ids()) if plan.mode == OVERWRITE and read.exists else set()
        result = commit_keyed(
            commit_log,
            read=read,
            current=current,
            operation=operation,
            build=build,
            rows=rows,
            record=True,
            # an overwrite or push replaces what it read: those rows never count as duplicates
            on_new_rows=lambda newer, ids: check_absent(
                commit_log.io, newer, rows, segment_ids=[i for i in ids if i not in replaced]
            ),
            parameters=params,
            metrics=metrics,
        )
    else:
        result = commit_log.commit(
            read=read, current=current, operation=operation, build=build, parameters=params, metrics=metrics
        )
    return result


def _commit_dynamic(
    commit_log: CommitLog, plan: WritePlan, segments: Sequence[SegmentFile], *, keys: KeyedRows | None
) -> CommitResult:
    """A dynamic partition overwrite planned only now that its segments tell its partitions: one commit.

    It replaces the segments of those partitions in the newest snapshot (so, unlike a push
    planned before its data, rows appended into them while the data was written are
    replaced too), rewrites what older-grain segments keep, and commits start, segments and
    end together, its conflicts checked against the newest snapshot then
    (``ops.push_complete``). On a keyed table the keys it makes visible (``keys``, else read
    back) are checked against the segments it leaves alone, and against concurrent commits.

    Raises:
        DuplicateKeyError: a key repeats, or is in a segment the push leaves alone."""
    io = commit_log.io
    read = read_snapshot(commit_log, plan)
    newest = commit_log.catch_up(read) if read.exists else load_snapshot(commit_log)
    written = tuple(dict.fromkeys(file_partition(s) for s in segments))
    scoped = scoped_push.plan_scoped(io, newest, ScopeRequest(dynamic=True, written=written))
    plain = dataclasses.replace(plan, scoped=None, deferred_scope=False)
    kept = scoped_push.write_kept(io, newest, scoped, write=lambda rows: write_data(plain, rows.to_batches()))
    entry_id = new_entry_id()
    claim = recovery.push_claim(io, newest, owner=recovery.process_owner(), lease_ms=plan.lease_ms)
    create = MetadataAction.model_validate(plan.create) if plan.create else None
    added = [*segments, *kept]

    def build(cur: Snapshot) -> list[Any]:
        return [
            *schema_change(cur, plan.evolve),
            *ops.push_complete(
                cur,
                entry_id,
                added,
                replaced=scoped.segments_from,
                scope=scoped.scope,
                claim=claim,
                publish=plan.publish,
                rewritten=scoped.dvs,
                metadata=create,
            ),
        ]

    params = {"mode": plan.mode, "entry": entry_id, **scoped.parameters(), **plan.parameters}
    metrics = {
        "added_rows": sum(s.num_rows for s in added),
        "added_segments": len(added),
        "added_bytes": sum(s.size_bytes for s in added),
    }
    operation = Operation.CONSISTENT_PUSH if plan.publish else Operation.PUSH_STAGE
    try:
        if not (plan.primary_key and added):
            return commit_log.commit(
                read=read, current=newest, operation=operation, build=build, parameters=params, metrics=metrics
            )
        rows = keys if keys is not None else segment_keys(io, segments, plan.primary_key)
        rows = scoped_push.check_keys(io, newest, scoped, rows, kept)
        replaced = set(scoped.segments_from)
        return commit_keyed(
            commit_log,
            read=read,
            current=newest,
            operation=operation,
            build=build,
            rows=rows,
            record=True,
            on_new_rows=lambda newer, ids: check_absent(io, newer, rows, segment_ids=[i for i in ids if i not in replaced]),
            parameters=params,
            metrics=metrics,
        )
    except CommitStateUnknownError:
        raise  # the commit may still land: the kept rows' files stay
    except BaseException:
        io.delete([s.path for s in kept])
        raise


def schema_change(current: Snapshot, evolve: dict[str, Any] | None) -> list[MetadataAction]:
    """The metadata action of a write's schema change (``WritePlan.evolve``), on top of ``current``; none without one.

    Made from the schema the write read: a schema change since is a ``ConcurrentSchemaChangeError``
    (``lineage.schema_ids.schema_race``)."""
    if evolve is None:
        return []
    partitioning: dict[str, Any] = {}
    spec = evolve.get("partition_spec")
    if spec is not None:
        if current.default_spec_id != evolve["from_spec_id"] or spec.spec_id in current.partition_specs:
            raise ConcurrentMetadataError(
                "the table's partition spec changed while the write that overwrites its schema ran; write again"
            )
        kept = tuple(s for sid, s in sorted(current.partition_specs.items()) if sid != 0)
        partitioning = {"partition_specs": (*kept, spec), "default_spec_id": spec.spec_id}
    return [
        MetadataAction(
            table_id=current.table_id,
            table_schema=evolve["table_schema"],
            properties=dict(current.properties),
            schema_id=current.schema_id + 1,
            last_field_id=max(current.last_field_id, evolve["last_field_id"]),
            **partitioning,
        )
    ]


def _still_new(current: Snapshot, plan: WritePlan) -> Snapshot:
    if plan.create_only and current.exists:
        raise TableAlreadyExistsError(table_exists_message(plan.uri, current.version))
    return current


def table_exists_message(uri: str, version: int) -> str:
    """What Spark's default save mode (ErrorIfExists) says where a table exists."""
    return (
        f"a table exists at {uri} (version {version}), and Spark's default save mode ErrorIfExists "
        "does not write into an existing table: use .mode('append') to add rows or .mode('overwrite') to replace them"
    )


def read_snapshot(commit_log: CommitLog, plan: WritePlan) -> Snapshot:
    """The snapshot the write planned against.

    The one ``begin_write`` kept, when this is the process that called it and it is the
    same table, else read back from the log.
    """
    kept = plan.read_snapshot
    if kept is not None and kept.version == plan.read_version:
        return kept
    return commit_log.snapshot(plan.read_version) if plan.read_version >= 0 else Snapshot()


def release_pin(plan: WritePlan) -> None:
    if plan.pin is not None:
        release(open_file_io(plan.uri, plan.storage_options), plan.pin)


def commit_landed(commit_log: CommitLog, plan: WritePlan, segments: Sequence[SegmentFile]) -> bool:
    """Whether a commit after the plan's read version names any of ``segments``.

    Spark calls ``abort()`` even after a ``commit()`` that failed late, and a landed commit
    must keep its files.
    """
    ids = {s.id for s in segments}
    if not ids:
        return False
    for version in range(plan.read_version + 1, commit_log.latest_version() + 1):
        commit = commit_log.read_commit(version)
        if any(isinstance(a, AddSegment) and a.segment.id in ids for a in commit.actions):
            return True
    return False


def abort_write(plan: WritePlan, segments: Sequence[SegmentFile]) -> None:
    """Undo a write that failed: revert its push, remove its files, release its pin.

    Runs while the write's own error propagates, so that a store which refuses this too
    (a full disk, a lost connection) leaves the rest to recovery instead of hiding the
    first error. Files are removed only once it is certain that no commit names them, nor
    can still come to: when the log cannot be read, or the commit ended in
    ``CommitStateUnknownError``, they stay (vacuum collects them after the grace period if
    the commit never lands). A push whose abort cannot be committed, or whose outcome is
    unknown, is marked given up (``recovery.give_up``): the next push reverts it at once if
    it is still IN_PROGRESS. Files left behind are orphans for vacuum; a pin left behind
    expires."""
    commit_log = plan.commit_log()
    try:
        landed = commit_landed(commit_log, plan, segments)
    except Exception as exc:
        logger.warning("abort: cannot tell whether the commit landed (%s); keeping %d segment(s)", exc, len(segments))
        _give_up_push(commit_log, plan)
        return
    if landed:
        logger.warning("abort after a landed commit: keeping %d segment(s)", len(segments))
        write_intents.release(commit_log.io, plan.intent)
        return
    if plan.unsettled:
        logger.warning("abort after a commit whose outcome is unknown: keeping %d segment(s) it may name", len(segments))
        _give_up_push(commit_log, plan)
        return
    entry_id = plan.entry_id
    if entry_id is not None:
        try:
            revert_push(commit_log, entry_id)
        except Exception as exc:
            logger.warning("could not write the abort of push %s (%s); marking it given up", entry_id, exc)
            recovery.give_up(commit_log.io, entry_id)
        else:
            recovery.drop(commit_log.io, entry_id)
    try:
        commit_log.io.delete([p for s in segments for p in (s.path, *([index_path(s.path)] if plan.primary_key else []))])
        write_intents.release(commit_log.io, plan.intent)
        if plan.task_intents:
            for intent in write_intents.intents_naming(s.id for s in segments):
                write_intents.release(commit_log.io, intent)
        release_pin(plan)
    except Exception as exc:
        logger.warning("abort of a write to %s left files or a pin behind (vacuum and pin expiry remove them): %s", plan.uri, exc)


def _give_up_push(commit_log: CommitLog, plan: WritePlan) -> None:
    """Mark the plan's push given up.

    The writer stops here, and whether its end landed is unknown; an entry that did
    complete ignores the marker.
    """
    if plan.entry_id is not None:
        recovery.give_up(commit_log.io, plan.entry_id)


def revert_push(commit_log: CommitLog, entry_id: str) -> None:
    """Commit the revert of push ``entry_id`` if it is still IN_PROGRESS."""
    current = load_snapshot(commit_log)
    entry = current.lineage.get(entry_id)
    if entry is not None and entry.state == LineageState.IN_PROGRESS:
        commit_log.commit(
            read=current,
            operation=Operation.PUSH_ABORT,
            parameters={"entry": entry_id},
            build=lambda cur: ops.revert(cur, entry_id),
        )


def finish_transactions(commit_log: CommitLog, snapshot: Snapshot, storage_options: Mapping[str, Any] | None) -> Snapshot:
    """``snapshot``, after finishing the multi-table transactions prepared in it that are decided or whose owner died.

    The next writer of a table does it, so that a crashed transaction never holds the
    table's segments for long; live ones are left alone (``connector.recovery.transactions``)."""
    if not has_prepared(snapshot):
        return snapshot
    if recover_table(commit_log, snapshot, stores=Stores(storage_options)):
        return commit_log.catch_up(snapshot)
    return snapshot
