"""Row-level deletes: rows are addressed physically as (segment, position) and deleted by deletion vector.

A delete commits, per touched segment, one cumulative deletion vector (old ∪ new). No data file is
rewritten.

``commit_deletes`` is the one commit path; ``Table.delete`` (``delete_where``), the Spark ``delete()`` helper
and ``operation=delete`` writes all end there. It checks addresses against the snapshot
they were read from (unknown segments or positions are an error, nothing is committed),
and on every retry re-merges with the DVs that concurrent deletes committed, so deletes
on the same segment never lose each other's rows (MatrixOne's conflict
check at commit). Rows of a segment that a compaction rewrote after the read are deleted
in its output, through the compaction's row map (``compaction.rowmap``); a segment a push
or overwrite replaced is a conflict."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import acero
from pyroaring import BitMap64

from mvtable import faults
from mvtable.conf import TableProperties
from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CommitStateUnknownError, InvalidOptionError, InvalidRowAddressError, NothingToCommit
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, RemoveSegment, SetDeletionVector
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.paths import location_uri
from mvtable.storage import FileIO
from mvtable.visibility import bitmap_from_array, load_dv, process_cache, write_dvs

from .compaction.rowmap import CompactionMoves, relocate
from .expressions import check_filter, referenced_columns
from .parallel import default_workers, ordered_map
from .partitions.covering import covered_segments, drop_candidates
from .results import DeleteResult
from .scan import ScanTask, plan_scan, task_masks
from .schema import schema_from_json
from .segments import (
    DEFAULT_READ_ROWS,
    open_parquet,
    positions_at,
    read_row_groups,
    read_runs,
)
from .write_intents import IntentScope

logger = logging.getLogger("mvtable.connector")


def matching_positions(
    io: FileIO,
    task: ScanTask,
    filter: pc.Expression,
    columns: Sequence[str] | None,
    *,
    use_threads: bool = False,
    schema: pa.Schema | None = None,
) -> np.ndarray:
    """File positions (sorted ``int64``) of the live rows of ``task`` that match ``filter``.

    Reads only ``columns`` (those the filter names; None = all), evaluates the filter to a boolean
    column and takes the indices of its true values: no row-address columns, no string
    column built per row, no per-row index array (allocating and filtering one cost more
    than the read itself). Rows the task's deletion vector already deletes are not matches;
    rows where the filter is null are not either (as in SQL and ``Table.filter``). ``schema``: the
    table schema the filter is written against; columns resolve by its field ids."""
    masks = task_masks(io, task)
    pf = open_parquet(
        io, task.segment.path, row_groups=task.row_groups, columns=columns, footer_crc32=task.segment.footer_crc32, schema=schema
    )
    found: list[np.ndarray] = []
    for run, keep in read_runs(task.segment, task.row_groups, masks, read_rows=DEFAULT_READ_ROWS):
        table = read_row_groups(pf, task.segment, run, columns, keep=None, use_threads=use_threads)
        if table.num_rows == 0:
            continue
        hits = pc.indices_nonzero(evaluate(table, filter)).to_numpy().astype(np.int64)  # null counts as false
        if keep is not None:
            hits = hits[keep[hits]]
        if len(hits):
            found.append(positions_at(task.segment, run, hits))
    return np.concatenate(found) if found else np.empty(0, dtype=np.int64)


def evaluate(table: pa.Table, predicate: pc.Expression) -> pa.ChunkedArray:
    """``predicate`` evaluated on every row of ``table``: a boolean column, row for row.

    One Acero ``project`` on the calling thread (the rows stay in order; the caller already
    runs one thread per segment).

    Raises:
        InvalidOptionError: The delete filter is not a boolean expression."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("project", acero.ProjectNodeOptions([predicate], ["match"])),
        ]
    )
    result = plan.to_table(use_threads=False).column(0)
    if not pa.types.is_boolean(result.type):
        raise InvalidOptionError(f"a delete filter must be a boolean expression, {predicate} is {result.type}")
    return result


def validate_addresses(snapshot: Snapshot, positions: Mapping[str, BitMap64]) -> None:
    """Check that every row address names a row of a segment visible in ``snapshot``.

    Raises:
        InvalidRowAddressError: A segment is unknown or not visible, or a row is past its end."""
    visible = set(snapshot.visible_segment_ids())
    for seg_id, bm in positions.items():
        seg = snapshot.segments.get(seg_id)
        if seg is None:
            raise InvalidRowAddressError(f"segment {seg_id!r} is not part of the table at version {snapshot.version}")
        if seg_id not in visible:
            raise InvalidRowAddressError(
                f"segment {seg_id!r} is not visible at version {snapshot.version} (it was replaced or is staged)"
            )
        if len(bm) and bm.max() >= seg.file.num_rows:
            raise InvalidRowAddressError(
                f"row {bm.max()} of segment {seg_id!r} does not exist (the segment has {seg.file.num_rows} rows)"
            )


def load_deleted(io: FileIO, snapshot: Snapshot, seg_id: str) -> BitMap64:
    ref = snapshot.dvs.get(seg_id)
    return load_dv(io, ref, cache=process_cache()) if ref is not None else BitMap64()


@dataclass(frozen=True)
class BuiltDV:
    """What one attempt of a delete commit built for a segment.

    The DV it merged with (``base``), the rows it added, the DV it wrote (None: no row was new) and
    how many rows that DV gained."""

    base: DeletionVectorRef | None
    rows: BitMap64
    dv: DeletionVectorRef | None
    added: int


@dataclass
class DeleteAttempt:
    """What one delete commit has built so far, kept across its retries.

    A retry after a lost race rewrites only the segments whose DV a concurrent commit
    changed (or whose rows moved): for the others the merged bitmap is the same, so the DV
    (and the DV file) an earlier attempt wrote is named again. Every DV file written is
    remembered, so that those the landed commit does not name can be removed."""

    built: dict[str, BuiltDV] = field(default_factory=dict)  # per segment, what the latest attempt built
    written: list[str] = field(default_factory=list)  # DV files of every attempt
    counted: dict[str, int] = field(default_factory=dict)  # rows each segment gains in the latest attempt
    remapped: int = 0  # rows the latest attempt found moved by a compaction since the read
    dropped: int = 0  # segments the latest attempt deletes whole (RemoveSegment, no DV)
    # names a DV file after the write intent that protects it from vacuum until the commit
    # lands (``write_intents.IntentScope``); None: a random name
    names: Callable[[], str] | None = None

    @property
    def deleted(self) -> int:
        return sum(self.counted.values())

    def actions(
        self, io: FileIO, current: Snapshot, bitmaps: Mapping[str, BitMap64], *, inline_max_bytes: int
    ) -> list[SetDeletionVector]:
        """The DV actions that add ``bitmaps`` to ``current``'s deletion vectors.

        Old ∪ new: one cumulative DV per segment that gains a row."""
        merged = self._merge(io, current, bitmaps)
        if merged:
            self._write(io, current, merged, inline_max_bytes=inline_max_bytes)
        faults.point("delete.after_dv_files")
        return self._count(bitmaps)

    def _merge(self, io: FileIO, current: Snapshot, bitmaps: Mapping[str, BitMap64]) -> dict[str, BitMap64]:
        """The cumulative DVs of the segments this attempt must write again.

        The others were built against the same DV with the same rows."""
        merged: dict[str, BitMap64] = {}
        for sid, bm in bitmaps.items():
            base = current.dvs.get(sid)
            before = self.built.get(sid)
            if before is not None and before.base == base and (before.rows is bm or before.rows == bm):
                continue
            old = load_deleted(io, current, sid)
            union = old | bm
            self.built[sid] = BuiltDV(base, bm, None, len(union) - len(old))
            if len(union) != len(old):
                merged[sid] = union
        return merged

    def _write(self, io: FileIO, current: Snapshot, merged: dict[str, BitMap64], *, inline_max_bytes: int) -> None:
        data_files = {sid: location_uri(io.uri, current.segments[sid].file.path) for sid in merged}
        locations = write_dvs(io, merged, inline_max_bytes=inline_max_bytes, data_files=data_files, file_id=self.names)
        self.written.extend({loc.path for loc in locations.values() if loc.path})
        for sid, location in locations.items():
            self.built[sid] = dataclasses.replace(self.built[sid], dv=location)

    def _count(self, bitmaps: Mapping[str, BitMap64]) -> list[SetDeletionVector]:
        self.counted.clear()
        actions = []
        for sid in bitmaps:
            done = self.built[sid]
            if done.dv is not None:
                self.counted[sid] = done.added
                actions.append(SetDeletionVector(segment_id=sid, dv=done.dv))
        return actions

    def drop(self, current: Snapshot, segment_ids: Sequence[str]) -> None:
        """Count the live rows of segments deleted whole (at ``current``, after concurrent deletes)."""
        for sid in segment_ids:
            dv = current.dvs.get(sid)
            self.counted[sid] = current.segments[sid].file.num_rows - (dv.cardinality if dv is not None else 0)
        self.dropped = len(segment_ids)

    def metrics(self) -> dict[str, int]:
        out = {"deleted_rows": self.deleted, "touched_segments": len(self.counted), "remapped_rows": self.remapped}
        return {**out, "dropped_segments": self.dropped} if self.dropped else out

    def cleanup(self, io: FileIO, result: CommitResult | None) -> None:
        """Remove the DV files of attempts that did not land (all of them without ``result``)."""
        kept = {a.dv.path for a in result.commit.actions if isinstance(a, SetDeletionVector) and a.dv.path} if result else set()
        io.delete(sorted(set(self.written) - kept))


def delete_where(io: FileIO, commit_log: CommitLog, snapshot: Snapshot, filter: pc.Expression) -> DeleteResult:
    """Delete the rows of ``snapshot`` that ``filter`` matches (``Table.delete``), in one commit.

    Partitions the filter cannot match are never looked at (``plan_scan``), and segments whose
    partition it covers whole go as they are: no file read, no deletion vector
    (``partitions.covering``). The rest are read for the filter's columns only, on reader
    threads, and their matches committed as deletion vectors. The caller pins ``snapshot``: the
    pin also covers the commit's merge with its deletion vectors.

    Raises:
        InvalidFilterError: ``filter`` does not fit the schema; nothing is deleted.
        CommitConflictError: A concurrent commit made this one invalid; nothing of it landed."""
    schema = schema_from_json(snapshot.table_schema)
    check_filter(filter, schema, what="delete filter")
    needed = referenced_columns(filter, schema)
    plan = plan_scan(snapshot, columns=needed, filter=filter)
    planned = {t.segment.id: len(t.row_groups) for t in plan.tasks}
    whole = covered_segments(snapshot, drop_candidates(snapshot, planned), filter, schema)
    tasks = [t for t in plan.tasks if t.segment.id not in whole]
    workers = min(default_workers(), len(tasks))

    def find(task: ScanTask) -> tuple[str, BitMap64]:
        # the bitmap is built here too, on the reader threads, beside other segments' decode
        hits = matching_positions(io, task, filter, needed, use_threads=workers > 1, schema=schema)
        return task.segment.id, bitmap_from_array(hits.astype(np.uint64))

    found: dict[str, BitMap64] = {}
    for sid, hits in ordered_map(find, tasks, workers=workers):
        if len(hits):
            found[sid] = found[sid] | hits if sid in found else hits
    return commit_deletes(
        io,
        commit_log,
        snapshot,
        found,
        inline_max_bytes=TableProperties.of(snapshot.properties).dv_inline_max_bytes,
        parameters={"predicate": str(filter)},
        drop=sorted(whole),
    )


def commit_deletes(
    io: FileIO,
    log: CommitLog,
    read: Snapshot,
    positions: Mapping[str, BitMap64 | np.ndarray],
    *,
    inline_max_bytes: int,
    operation: Operation = Operation.DELETE,
    parameters: dict | None = None,
    drop: Sequence[str] = (),
) -> DeleteResult:
    """Delete the rows at ``positions`` (segment id -> row positions of ``read``) in one commit.

    ``drop`` names segments of ``read`` to delete whole: they leave the table (``RemoveSegment``)
    with no deletion vector written, as a delete whose filter covers their partition does. One
    a concurrent commit compacted or replaced since ``read`` is a conflict, as for any delete.

    Raises:
        InvalidRowAddressError: a segment is unknown or not visible at ``read``, or a position
            is past its end (nothing is committed).
        ConcurrentCompactionError: a segment to drop was compacted since ``read``; run it again.
        ConcurrentReplaceError: a segment to drop was replaced or removed since ``read``; run it again.
    """
    bitmaps = {sid: p if isinstance(p, BitMap64) else bitmap_from_array(np.asarray(p)) for sid, p in positions.items() if len(p)}
    validate_addresses(read, bitmaps)
    drop = tuple(sid for sid in dict.fromkeys(drop) if sid not in bitmaps)
    validate_addresses(read, {sid: BitMap64() for sid in drop})
    if not drop and not any(len(bm - load_deleted(io, read, sid)) for sid, bm in bitmaps.items()):
        return DeleteResult(0, None, 0)
    attempt = DeleteAttempt()
    moves = CompactionMoves(log, read.version)  # compactions since the read: their row maps
    # DV files are named after a write intent, taken before the first one is written:
    # vacuum leaves them alone until the commit landed (or the intent's lease ended)
    with IntentScope(io, operation=str(operation)) as scope:
        attempt.names = scope.new_id

        def build(current: Snapshot) -> list[Action]:
            # rows of segments compacted since the read are deleted where they are now
            targets, attempt.remapped = relocate(io, moves, current, bitmaps)
            ops.require_visible(current, [*targets, *drop], what="delete")
            actions: list[Action] = list(attempt.actions(io, current, targets, inline_max_bytes=inline_max_bytes))
            attempt.drop(current, drop)
            actions.extend(RemoveSegment(segment_id=sid) for sid in drop)
            if not actions:  # concurrent deletes (or a compaction) got every row first
                raise NothingToCommit("every addressed row is deleted already")
            return actions

        try:
            result = log.commit(
                read=read,
                current=log.catch_up(read),
                operation=operation,
                build=build,
                parameters=parameters or {},
                metrics=attempt.metrics,
            )
        except NothingToCommit:
            attempt.cleanup(io, None)
            return DeleteResult(0, None, 0, attempt.remapped)
        except CommitStateUnknownError:
            raise  # the commit may still land: its DV files stay (vacuum collects them if it never does)
        except BaseException:
            attempt.cleanup(io, None)  # nothing of ours landed: our DV files are orphans
            raise
        try:  # landed: a DV file of a lost attempt that cannot be removed is only an orphan
            attempt.cleanup(io, result)
        except Exception as exc:
            logger.warning("version %s landed; removing DV files of earlier attempts failed: %s", result.commit.version, exc)
    return DeleteResult(attempt.deleted, result.commit.version, len(attempt.counted), attempt.remapped)
