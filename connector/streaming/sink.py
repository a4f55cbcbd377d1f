"""The streaming sink: every micro-batch lands in the table exactly once.

Spark replays a micro-batch after a restart when the driver died between the sink's
commit and Spark's own record of it in ``<checkpoint>/commits`` — the window in which
Paimon committed the same batch twice (apache/paimon#9666). Here each batch's commit also
records ``SetTransaction(app id, batch id)`` (``lineage.operations.stream_batch``), and the
builder, which runs again against the newest snapshot after every lost race, refuses a batch
id the application has committed already. A replay (or two attempts of one batch racing)
therefore commits nothing, and the files the replay wrote are removed.

The application id is the streaming query's id, which Spark keeps in
``<checkpointLocation>/metadata`` and which survives restarts (the run id does not);
``txnAppId`` names one explicitly; reusing it for another stream (a new checkpoint) drops
that stream's batches whose ids the old one used, as in Delta, so a skip logs a WARNING
naming the version that recorded the batch. In complete mode each batch replaces the table as a
consistent push made in one commit, so a bad batch can be rolled back like any push.

A keyed table keeps its key through the sink as through any write: an append batch is a
keyed append (``DuplicateKeyError`` for a key in the table or repeated in the batch, and the
commit records the batch's key filter for racing keyed writers), a complete batch an
overwrite whose keys must be unique among themselves. A replay is recognised first, since
its keys are in the table because its first attempt put them there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa

from mvtable.errors import InvalidOptionError, NothingToCommit, VersionNotFoundError
from mvtable.ids import is_id, new_entry_id
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, MetadataAction, SegmentFile
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO, open_file_io

from .. import write_intents, writes
from ..key_index import segment_path_of
from ..keys.commit import check_absent, commit_keyed, segment_keys
from ..post_commit import open_log
from ..segments import DATA_DIR

logger = logging.getLogger("mvtable.connector")

_HADOOP_S3 = ("s3a", "s3n")  # Spark's names for S3; fsspec knows it as s3
_RECORD_SEARCH = 64  # streaming commits read to name the version of a skipped batch


def check_app_id(app_id: str) -> str:
    """``app_id`` once it is a valid application id, as the log's ``SetTransaction`` stores it.

    Raises:
        InvalidOptionError: ``app_id`` is not 1 to 200 letters, digits, '.', '_' or '-'."""
    if not is_id(app_id):  # the log's id pattern: an app id is stored in SetTransaction
        raise InvalidOptionError(
            f"txnAppId {app_id!r} is not a valid application id: use 1 to 200 letters, digits, '.', '_' or '-'"
        )
    return app_id


def query_app_id(checkpoint_location: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """The id of the streaming query that owns ``checkpoint_location``.

    Spark writes ``{"id": …}`` to ``<checkpoint>/metadata`` when the query first starts.

    Raises:
        InvalidOptionError: The checkpoint has no ``metadata`` file, or it holds no readable query id."""
    parsed = urlparse(checkpoint_location)
    uri = checkpoint_location
    if parsed.scheme in _HADOOP_S3:
        uri = "s3" + checkpoint_location[len(parsed.scheme) :]
    try:
        raw = open_file_io(uri, storage_options).read("metadata")
    except FileNotFoundError:
        raise InvalidOptionError(
            f"checkpointLocation {checkpoint_location!r} has no 'metadata' file: mvtable reads the streaming "
            "query's id from it; pass the checkpointLocation the query uses, or name the application with txnAppId"
        ) from None
    try:
        app_id = json.loads(raw).get("id")
    except (ValueError, AttributeError):
        app_id = None
    if not isinstance(app_id, str):
        raise InvalidOptionError(f"{checkpoint_location}/metadata holds no query id; is it a Spark streaming checkpoint?")
    return check_app_id(app_id)


def plan_batch(
    uri: str,
    *,
    storage_options: Mapping[str, Any] | None,
    incoming: pa.Schema,
    complete: bool,
    properties: Mapping[str, str] | None = None,
    merge_schema: bool = False,
    partition_by: Sequence[str] | None = None,
) -> writes.WritePlan:
    """What executors need to write one batch.

    No side effects (no pin, no lineage entry, no write intent: each task takes one for its
    files, ``writes.write_data``): Spark creates the writer anew in each process of each
    batch. ``properties`` apply when the first batch creates the table and are ignored after;
    ``partition_by`` is the spec of the table the first batch creates (later batches check it)."""
    if properties and open_log(open_file_io(uri, storage_options)).exists():
        properties = None
    plan = writes.begin_write(
        uri,
        storage_options=storage_options,
        incoming=incoming,
        mode=writes.OVERWRITE if complete else writes.APPEND,
        properties=properties,
        pin=False,
        merge_schema=merge_schema,
        partition_by=partition_by,
    )
    return dataclasses.replace(plan, task_intents=True)  # each task's files under an intent of its own


@dataclass(frozen=True)
class BatchResult:
    batch_id: int
    version: int | None  # the commit holding the batch; None when it had landed before
    skipped: bool
    rows: int


def commit_batch(plan: writes.WritePlan, segments: Sequence[SegmentFile], *, app_id: str, batch_id: int) -> BatchResult:
    """Commit one micro-batch with its ``SetTransaction``, or recognise it as committed.

    The write intents the tasks took for their files are renewed while it commits (a lapsed one:
    ``WriteIntentExpiredError``) and removed after."""
    commit_log = plan.commit_log()
    rows = sum(s.num_rows for s in segments)
    intents = write_intents.intents_naming(s.id for s in segments)
    try:
        with write_intents.IntentKeeper(commit_log.io, intents):
            result = _commit_batch(commit_log, plan, segments, app_id=app_id, batch_id=batch_id)
    except NothingToCommit:
        warn_skipped(commit_log, app_id=app_id, batch_id=batch_id)
        discard_unreferenced(commit_log, segments)
        return BatchResult(batch_id, None, True, 0)
    finally:
        for intent in intents:
            write_intents.release(commit_log.io, intent)
    return BatchResult(batch_id, result.commit.version, False, rows)


def _commit_batch(
    commit_log: CommitLog, plan: writes.WritePlan, segments: Sequence[SegmentFile], *, app_id: str, batch_id: int
) -> CommitResult:
    read = writes.read_snapshot(commit_log, plan)
    current = commit_log.catch_up(read) if read.exists else writes.load_snapshot(commit_log)
    create = MetadataAction.model_validate(plan.create) if plan.create else None
    complete = plan.mode == writes.OVERWRITE
    entry = new_entry_id() if complete else None
    operation = Operation.STREAM_COMPLETE if complete else Operation.STREAM_APPEND
    parameters = {"appId": app_id, "batchId": batch_id, **({"entry": entry} if entry else {})}
    metrics = {
        "added_rows": sum(s.num_rows for s in segments),
        "added_segments": len(segments),
        "added_bytes": sum(s.size_bytes for s in segments),
    }

    if plan.evolve:
        parameters.update(schemaChanges=plan.evolve["changes"], schemaId=read.schema_id + 1)

    def build(cur: Snapshot) -> list[Action]:
        data = ops.stream_batch(cur, segments, app_id=app_id, batch_id=batch_id, complete_entry=entry, metadata=create)
        return [*writes.schema_change(cur, plan.evolve), *data]

    if plan.primary_key and segments:
        return _commit_keyed(
            commit_log,
            plan,
            segments,
            app_id=app_id,
            batch_id=batch_id,
            read=read,
            current=current,
            operation=operation,
            build=build,
            parameters=parameters,
            metrics=metrics,
        )
    return commit_log.commit(read=read, current=current, operation=operation, build=build, parameters=parameters, metrics=metrics)


def _commit_keyed(
    commit_log: CommitLog,
    plan: writes.WritePlan,
    segments: Sequence[SegmentFile],
    *,
    app_id: str,
    batch_id: int,
    read: Snapshot,
    current: Snapshot,
    operation: Operation,
    build: Callable[[Snapshot], list[Action]],
    parameters: dict[str, Any],
    metrics: dict[str, int],
) -> CommitResult:
    """A batch into a keyed table, checked as a keyed append or, in complete mode, as an overwrite.

    As an append, no key may repeat in the batch or be in the table already, nor be made
    visible by a racing commit; as an overwrite the keys must be unique among themselves
    (the batch replaces every visible row). The commit records the batch's key filter, so
    racing keyed writers check against it."""
    ops.check_new_batch(current, app_id=app_id, batch_id=batch_id)  # a replay's keys are in the table: its own
    rows = segment_keys(commit_log.io, segments, plan.primary_key)  # DuplicateKeyError for a key repeated in the batch
    complete = plan.mode == writes.OVERWRITE
    if not complete:
        check_absent(commit_log.io, current, rows)

    def on_new_rows(newer: Snapshot, segment_ids: list[str]) -> None:
        # another attempt of this batch that landed meanwhile is a replay, not a duplicate
        ops.check_new_batch(newer, app_id=app_id, batch_id=batch_id)
        if not complete:  # complete mode removes whatever is visible when it commits
            check_absent(commit_log.io, newer, rows, segment_ids=segment_ids)

    return commit_keyed(
        commit_log,
        read=read,
        current=current,
        since=current,
        operation=operation,
        build=build,
        rows=rows,
        record=True,
        on_new_rows=on_new_rows,
        parameters=parameters,
        metrics=metrics,
    )


def warn_skipped(commit_log: CommitLog, *, app_id: str, batch_id: int) -> None:
    """Log a skipped batch as a WARNING naming the version that recorded it.

    A skip is right for a replay, but it is also what a *different* stream reusing the app
    id (a new checkpoint with the same ``txnAppId``) gets for every batch id the old one
    used: its data is silently dropped. The warning lets the user tell which case it is."""
    version = recorded_at(commit_log, app_id=app_id, batch_id=batch_id)
    where = f"version {version}" if version is not None else "an earlier version"
    logger.warning(
        "streaming batch %s of application %s was committed already (in %s): skipped, nothing written. "
        "A replay after a restart is expected; if this is a new stream (new checkpoint) reusing txnAppId "
        "%s, its batches are being dropped: give it a new txnAppId",
        batch_id,
        app_id,
        where,
        app_id,
    )


def recorded_at(commit_log: CommitLog, *, app_id: str, batch_id: int, limit: int = _RECORD_SEARCH) -> int | None:
    """The version whose commit recorded ``batch_id`` of ``app_id``.

    The newest ``limit`` streaming commits are read, newest first (a replay is of a recent
    batch); None when it is older, its log file was collected, or the batch id was never
    used (ids may jump)."""
    stream_ops = (Operation.STREAM_APPEND, Operation.STREAM_COMPLETE)
    items = [h for h in commit_log.snapshot().history if h.operation in stream_ops]
    for item in reversed(items[-limit:]):
        try:
            params = commit_log.read_commit(item.version).parameters
        except VersionNotFoundError:
            return None
        if params.get("appId") != app_id:
            continue
        if params.get("batchId") == batch_id:
            return item.version
        if isinstance(params.get("batchId"), int) and params["batchId"] < batch_id:
            return None
    return None


def discard_unreferenced(commit_log: CommitLog, segments: Sequence[SegmentFile]) -> None:
    """Remove the files of a replayed batch that no commit names.

    The batch's first attempt committed files of its own."""
    known = commit_log.snapshot().segments
    commit_log.io.delete([s.path for s in segments if s.id not in known])


def query_segment_prefix(app_id: str) -> str:
    """The start of every segment id the streaming query ``app_id`` writes.

    With it the query's files are recognisable as its own."""
    return "st" + hashlib.sha1(app_id.encode()).hexdigest()[:12] + "-"


def is_marked(name: str, prefix: str) -> bool:
    """Whether a file of ``data/`` carries the query marker ``prefix``.

    The marker comes right after its write intent's id (``segments.new_segment_id``), or first when
    it was written under none."""
    return name.startswith(prefix) or name.partition("-")[2].startswith(prefix)


def remove_unfinished_batches(io: FileIO, prefix: str) -> list[str]:
    """Remove the files of this query's batches that no commit names, and return them.

    ``query.stop()`` interrupts a micro-batch in flight, and the interrupt may cut Spark's
    ``abort()`` short (it logs "failed to abort"), so the files of that batch stay behind; a
    crashed driver leaves them too. The batch is not committed and runs again when the query
    restarts, with new files, so the old ones are garbage. Called after each commit of the
    query: no other batch of it runs then (Spark starts the next batch after the commit), and
    files of other writers never carry its prefix. One listing of ``data/`` per batch."""
    if not prefix:
        return []
    commit_log = open_log(io)
    known = {s.file.path for s in commit_log.snapshot().segments.values()} if commit_log.exists() else set()
    stray = []
    for info in io.list(DATA_DIR):
        if is_marked(info.name, prefix):
            path = f"{DATA_DIR}/{info.name}"
            if (segment_path_of(path) or path) not in known:
                stray.append(path)
    if stray:
        io.delete(stray)
        logger.info("streaming query start: removed %d file(s) of batches an earlier run never committed", len(stray))
    return stray


def abort_batch(plan: writes.WritePlan, segments: Sequence[SegmentFile]) -> None:
    """Tasks failed: remove what they wrote, unless a commit names it after all."""
    writes.abort_write(plan, segments)
