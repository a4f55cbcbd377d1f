"""Upsert and delete by key: rows found by key are deleted by physical address, no data file rewritten.

Deletion vectors do it; an upsert appends the new rows in the same commit.

``commit_upsert`` is shared by ``Table.upsert`` and the Spark writer's driver side (whose
tasks looked the keys up and wrote the segments)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from mvtable import faults
from mvtable.errors import CommitStateUnknownError, NoPrimaryKeyError, TableNotFoundError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, SegmentFile
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import Builder, CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO, open_file_io

from . import writes
from .key_index import index_path
from .keys.commit import KeyedDeletes, KeyedRows, commit_keyed, keyed_rows, lookup
from .partitions.writing import write_partitioned
from .post_commit import open_log
from .results import DeleteResult, UpsertResult
from .write_intents import IntentScope, WriteIntent, release

logger = logging.getLogger("mvtable.connector")

__all__ = ["UpsertResult", "commit_upsert", "delete_by_key", "require_key", "upsert"]


def require_key(snapshot: Snapshot, *, uri: str, what: str) -> tuple[str, ...]:
    """The table's primary key, or a typed error when there is no table or no key.

    Raises:
        TableNotFoundError: There is no table at ``uri``.
        NoPrimaryKeyError: The table has no primary key."""
    if not snapshot.exists:
        raise TableNotFoundError(f"no mvtable table at {uri}; create it with Table.create(uri, schema=…, primary_key=[…])")
    if not snapshot.primary_key:
        raise NoPrimaryKeyError(
            f"{what} needs a primary key, and the table at {uri} has none; create the table with primary_key=[…] "
            "(or .option('primaryKey', …) on the first Spark write)"
        )
    return snapshot.primary_key


def upsert(
    uri: str, data: pa.Table, *, storage_options: Mapping[str, Any] | None = None, snapshot: Snapshot | None = None
) -> UpsertResult:
    """Replace the rows whose keys ``data`` holds and insert the rest, in one commit.

    ``snapshot`` is the newest snapshot when the caller holds one (a ``Table`` passes its own,
    caught up); else it is read from the log.

    The new rows are written while the keys are looked up (they do not depend on what the
    lookup finds): the segment's encoding overlaps the reads of the table's key columns.

    Raises:
        TableNotFoundError: There is no table at ``uri``.
        NoPrimaryKeyError: The table has no primary key."""
    io = open_file_io(uri, storage_options)
    read = snapshot if snapshot is not None else writes.load_snapshot(open_log(io))
    key = require_key(read, uri=uri, what="upsert")  # before any schema complaint
    plan = writes.begin_write(uri, storage_options=storage_options, incoming=data.schema, mode=writes.APPEND, snapshot=read)
    segments: list[SegmentFile] = []
    try:
        rows = keyed_rows(plan.arrow_schema, key, data)
        aligned = writes.align(plan, data)
        deletes = KeyedDeletes()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mvtable-upsert") as pool:
            writing = (
                pool.submit(
                    write_partitioned,
                    io,
                    aligned,
                    spec=plan.partition_spec,
                    table_schema=plan.table_schema,
                    row_group_rows=plan.row_group_rows,
                    primary_key=key,
                    intent=plan.intent,
                )
                if data.num_rows
                else None
            )
            try:
                deletes.add(lookup(io, read, rows))
            finally:
                if writing is not None:
                    segments = writing.result()
        faults.point("upsert.after_files")
        return commit_upsert(
            io,
            plan.commit_log(),
            read=read,
            segments=segments,
            rows=rows,
            deletes=deletes,
            inline_max_bytes=plan.dv_inline_max_bytes,
            intent=plan.intent,
        )
    except CommitStateUnknownError:
        raise  # the commit may name these segments (now, or once a held PUT lands): they stay
    except BaseException:
        io.delete([p for s in segments for p in (s.path, index_path(s.path))])
        raise
    finally:
        writes.release_pin(plan)
        release(io, plan.intent)


def commit_upsert(
    io: FileIO,
    commit_log: CommitLog,
    *,
    read: Snapshot,
    segments: Sequence[SegmentFile],
    rows: KeyedRows,
    deletes: KeyedDeletes,
    inline_max_bytes: int,
    parameters: dict[str, Any] | None = None,
    intent: WriteIntent | None = None,
) -> UpsertResult:
    """One commit: the rows ``deletes`` found deleted, ``segments`` added, the keys' filter recorded.

    Rows that concurrent commits made visible with the same keys are deleted too. ``intent`` is the
    write intent the segments were written under (it names the DV files too, and is renewed while
    the commit runs; its owner removes it)."""
    added = sum(s.num_rows for s in segments)

    def build(cur: Snapshot) -> list[Action]:
        return [*deletes.actions(io, cur, inline_max_bytes=inline_max_bytes), *ops.append(cur, segments)]

    def metrics() -> dict[str, float | int]:
        return {
            "added_rows": added,
            "added_segments": len(segments),
            "added_bytes": sum(s.size_bytes for s in segments),
            "inserted_rows": added - deletes.deleted,
            "updated_rows": deletes.deleted,
            "deleted_rows": deletes.deleted,
        }

    parameters = {"mode": "upsert", **(parameters or {})}
    result = _commit_deleting(
        io,
        commit_log,
        read,
        rows,
        deletes,
        operation=Operation.UPSERT,
        build=build,
        parameters=parameters,
        metrics=metrics,
        intent=intent,
    )
    return UpsertResult(added - deletes.deleted, deletes.deleted, result.commit.version)


def delete_by_key(
    io: FileIO, commit_log: CommitLog, read: Snapshot, data: pa.Table, *, uri: str, inline_max_bytes: int
) -> DeleteResult:
    """Delete the rows whose key is one of ``data``'s (key columns only are needed; keys that are not in the table are ignored).

    One commit, or none when nothing matched."""
    key = require_key(read, uri=uri, what="delete by key")
    rows = keyed_rows(writes.schema_from_json(read.table_schema), key, data, unique=False)
    deletes = KeyedDeletes()
    deletes.add(lookup(io, read, rows))
    if not deletes.positions:
        return DeleteResult(0, None, 0)

    result = _commit_deleting(
        io,
        commit_log,
        read,
        rows,
        deletes,
        operation=Operation.DELETE_BY_KEY,
        build=lambda cur: deletes.actions(io, cur, inline_max_bytes=inline_max_bytes),
        parameters={"keys": rows.keys.num_rows},
        metrics=lambda: {"deleted_rows": deletes.deleted, "touched_segments": len(deletes.counted)},
    )
    return DeleteResult(deletes.deleted, result.commit.version, len(deletes.counted))


def _commit_deleting(
    io: FileIO,
    commit_log: CommitLog,
    read: Snapshot,
    rows: KeyedRows,
    deletes: KeyedDeletes,
    *,
    operation: Operation,
    build: Builder,
    parameters: dict[str, Any],
    metrics: Callable[[], dict[str, float | int]],
    intent: WriteIntent | None = None,
) -> CommitResult:
    """The commit of an upsert (which records its keys) or a delete by key.

    Rows with the same keys that concurrent commits made visible are found and deleted too. Its DV
    files are named after ``intent`` (or one taken for them), renewed while the commit runs."""

    def on_new_rows(newer: Snapshot, segment_ids: list[str]) -> None:
        deletes.add(lookup(io, newer, rows, segment_ids=segment_ids))

    result: CommitResult | None = None
    with IntentScope(io, operation=str(operation), intent=intent) as scope:
        deletes.names = scope.new_id
        try:
            result = commit_keyed(
                commit_log,
                read=read,
                current=commit_log.catch_up(read),
                operation=operation,
                build=build,
                rows=rows,
                record=operation == Operation.UPSERT,
                on_new_rows=on_new_rows,
                parameters=parameters,
                metrics=metrics,
            )
        except CommitStateUnknownError:
            raise  # the commit may name any DV file written: they stay, under the intent until it lapses
        except BaseException:
            deletes.cleanup(io, None)
            raise
        try:  # landed: a DV file of a lost attempt that cannot be removed is only an orphan
            deletes.cleanup(io, result)
        except Exception as exc:
            logger.warning("version %s landed; removing DV files of earlier attempts failed: %s", result.commit.version, exc)
    return result
