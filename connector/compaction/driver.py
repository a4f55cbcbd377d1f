"""The compaction driver: plan bins, rewrite them, and commit them in bounded batches.

Bins are rewritten by threads here, by Spark tasks there; each batch is one ``compact`` commit.

Each batch starts from the newest snapshot (its *read version*, pinned while it works):
bins whose inputs are no longer all eligible there are dropped (a push or overwrite that
replaced them wins) and the others take that version's deletion vectors. The commit's
builder runs against whatever is newest when it commits: bins a concurrent commit made
ineligible are dropped, and deletes committed on inputs since the read version are carried
onto the outputs through the row map (the conflict window starts at the read version,
never at "latest": Lance #6653). Appends never matter. A killed run leaves its committed
batches in place and its uncommitted outputs as orphans for vacuum; the next run plans
what is left."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from mvtable import faults
from mvtable.dvref import DeletionVectorRef
from mvtable.errors import NothingToCommit
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import Action, SetDeletionVector
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.schema_ids import schema_race
from mvtable.lineage.snapshot import Snapshot
from mvtable.paths import location_uri
from mvtable.storage import FileIO
from mvtable.visibility import bitmap_from_array, load_dv, positions_array, process_cache, write_dvs

from ..pinning import pin_version, release
from ..results import CompactionResult, DroppedBin
from ..write_intents import IntentScope, WriteIntent
from .plan import Bin, BinInput, CompactionOptions, Regrain, commit_batches, plan_bins, why_no_bins
from .rewrite import RewrittenBin
from .rowmap import map_positions

logger = logging.getLogger("mvtable.compaction")

Rewriter = Callable[[Sequence[Bin], WriteIntent], list[RewrittenBin]]  # outputs named after the intent
Progress = Callable[[int, int, str], None]


@dataclass
class CompactionReport:
    """What a compaction did (``dry_run``: would do).

    ``complete`` is False when bins were dropped; running it again picks up what is left."""

    dry_run: bool
    bins: int = 0  # planned
    committed_bins: int = 0
    input_segments: int = 0
    output_segments: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    rows_dropped: int = 0  # deleted rows purged from storage
    deletes_remapped: int = 0  # rows deleted during the compaction, carried onto outputs
    commits: list[int] = field(default_factory=list)
    dropped: list[DroppedBin] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why there was nothing to compact

    @property
    def complete(self) -> bool:
        return not self.dropped

    @property
    def changed(self) -> bool:
        return bool(self.commits)

    def as_dict(self) -> dict[str, Any]:
        """Every field, plus ``complete`` and ``changed`` (for JSON output)."""
        return CompactionResult.of(self).as_dict()

    def summary(self) -> str:
        """One line for people."""
        return CompactionResult.of(self).summary()


def refresh(bins: Sequence[Bin], snapshot: Snapshot) -> tuple[list[Bin], list[DroppedBin]]:
    """``bins`` with ``snapshot``'s deletion vectors, minus those no longer eligible there."""
    live: list[Bin] = []
    dropped: list[DroppedBin] = []
    for b in bins:
        reason = ops.compaction_blocker(snapshot, b.segment_ids)
        if reason:
            dropped.append(DroppedBin(b.segment_ids, reason))
            continue
        inputs = tuple(BinInput(snapshot.segments[i.segment.id].file, snapshot.dvs.get(i.segment.id)) for i in b.inputs)
        live.append(Bin(inputs, b.origin, b.worn, b.target))
    return live, dropped


def run(
    io: FileIO,
    commit_log: CommitLog,
    snapshot: Snapshot,
    options: CompactionOptions,
    *,
    rewrite: Rewriter,
    inline_max_bytes: int,
    dry_run: bool = False,
    progress: Progress | None = None,
    only: set[str] | None = None,
    max_batches: int | None = None,
    within: set[str] | None = None,
    grain: Callable[[SegmentDescriptor], Regrain | None] | None = None,
) -> CompactionReport:
    """Plan at ``snapshot``, then rewrite and commit batch by batch (see the module doc).

    ``only`` and ``max_batches`` bound auto compaction to what a write just made worse;
    ``within`` and ``grain`` are ``plan_bins``'."""
    bins = plan_bins(snapshot, options, only=only, within=within, grain=grain)
    report = CompactionReport(dry_run=dry_run, bins=len(bins), reasons=[] if bins else why_no_bins(snapshot, options))
    if dry_run:
        for b in bins:
            _count(report, b, None)
        return report
    batches = commit_batches(bins, options.max_bytes_per_commit)[:max_batches]
    done = 0
    if progress:
        progress(0, len(bins), "compact")
    for batch in batches:
        read = snapshot = commit_log.catch_up(snapshot)
        pin = pin_version(io, read.version, owner="compaction")
        try:
            live, dropped = refresh(batch, read)
            report.dropped.extend(dropped)
            if live:
                # outputs and DV files are named after a write intent, renewed until the commit
                with IntentScope(io, operation="compact") as scope:
                    rewritten = rewrite(live, scope.get())
                    faults.point("compact.after_outputs")
                    _commit_batch(io, commit_log, read, rewritten, report, inline_max_bytes=inline_max_bytes, names=scope.new_id)
                faults.point("compact.after_batch")
        finally:
            release(io, pin)
        done += len(batch)
        if progress:
            progress(done, len(bins), "compact")
    return report


def _commit_batch(
    io: FileIO,
    commit_log: CommitLog,
    read: Snapshot,
    rewritten: list[RewrittenBin],
    report: CompactionReport,
    *,
    inline_max_bytes: int,
    names: Callable[[], str] | None = None,
) -> None:
    carried_files: dict[str, tuple[BitMap64, DeletionVectorRef]] = {}  # output -> what a previous attempt wrote
    written: set[str] = set()
    state = _Attempt()

    def build(current: Snapshot) -> list[Action]:
        keep: list[RewrittenBin] = []
        dropped: list[DroppedBin] = []
        carried: dict[str, BitMap64] = {}
        remapped = 0
        # outputs written under a schema a rename, drop or type change has since replaced would
        # carry statistics under old names: the batch is dropped (the next run compacts again)
        renamed = schema_race(
            read.schema_id,
            current.schema_id,
            changes_schema=False,
            adds_files=True,
            break_version=current.schema_break_version,
            read_version=read.version,
        )
        for rb in rewritten:
            reason = renamed or ops.compaction_blocker(current, rb.bin.segment_ids)
            extra: BitMap64 | None = None
            if reason is None:
                extra, reason = _carry(io, current, rb)
            if reason is not None:
                dropped.append(DroppedBin(rb.bin.segment_ids, reason))
                continue
            keep.append(rb)
            if extra is not None and len(extra) and rb.output is not None:
                carried[rb.output.id] = extra
                remapped += len(extra)
        state.keep, state.dropped, state.remapped = keep, dropped, remapped
        if not keep:
            raise NothingToCommit("every bin of this batch was replaced by a concurrent commit")
        paths = {rb.output.id: rb.output.path for rb in keep if rb.output is not None}
        dvs = _dv_refs(io, carried, carried_files, written, inline_max_bytes, paths, names)
        return ops.compact(current, [(rb.inputs, rb.output) for rb in keep], dvs)

    try:
        result = commit_log.commit(
            read=read,
            current=commit_log.catch_up(read),
            operation=Operation.COMPACT,
            build=build,
            metrics=state.metrics,
        )
    except NothingToCommit:
        result = None
    keep = state.keep if result is not None else []
    kept_outputs = {rb.output.id for rb in keep if rb.output is not None}
    orphans = [rb.output.path for rb in rewritten if rb.output is not None and rb.output.id not in kept_outputs]
    used = {a.dv.path for a in result.commit.actions if isinstance(a, SetDeletionVector) and a.dv.path} if result else set()
    io.delete(orphans + sorted(written - used))
    report.dropped.extend(state.dropped)
    if result is None:
        return
    report.commits.append(result.commit.version)
    report.deletes_remapped += state.remapped
    for rb in keep:
        _count(report, rb.bin, rb)
        report.committed_bins += 1


def _carry(io: FileIO, current: Snapshot, rb: RewrittenBin) -> tuple[BitMap64 | None, str | None]:
    """Deletes committed on ``rb``'s inputs since its read version as rows of its output, or why to drop the bin.

    The bin is dropped when a restore brought back rows the output no longer has."""
    extra = BitMap64()
    for inp in rb.inputs:
        now = current.dvs.get(inp.segment_id)
        if now == inp.dv:
            continue
        then = load_dv(io, inp.dv, cache=process_cache()) if inp.dv is not None else BitMap64()
        now_bm = load_dv(io, now, cache=process_cache()) if now is not None else BitMap64()
        if not then.issubset(now_bm):
            return None, f"rows of segment {inp.segment_id} were undeleted (restore) after the compaction read them"
        new = now_bm - then
        if len(new):
            extra |= bitmap_from_array(map_positions(positions_array(new), positions_array(then), inp.first_row))
    return extra, None


def _dv_refs(
    io: FileIO,
    carried: dict[str, BitMap64],
    files: dict[str, tuple[BitMap64, DeletionVectorRef]],
    written: set[str],
    inline_max_bytes: int,
    paths: dict[str, str],
    names: Callable[[], str] | None = None,
) -> dict[str, DeletionVectorRef]:
    """DV descriptors for the outputs' carried deletes.

    A retry reuses what an earlier attempt wrote when the rows are the same."""
    out: dict[str, DeletionVectorRef] = {}
    todo: dict[str, BitMap64] = {}
    for sid, bm in carried.items():
        prev = files.get(sid)
        if prev is not None and prev[0] == bm:
            out[sid] = prev[1]
        else:
            todo[sid] = bm
    if todo:
        data_files = {sid: location_uri(io.uri, paths[sid]) for sid in todo}
        refs = write_dvs(io, todo, inline_max_bytes=inline_max_bytes, data_files=data_files, file_id=names)
        written.update(r.path for r in refs.values() if r.path)
        for sid, ref in refs.items():
            files[sid] = (todo[sid], ref)
            out[sid] = ref
    return out


@dataclass
class _Attempt:
    """What the newest attempt of a batch's commit builder decided.

    For metrics and the report: the last attempt is the one that lands."""

    keep: list[RewrittenBin] = field(default_factory=list)
    dropped: list[DroppedBin] = field(default_factory=list)
    remapped: int = 0

    def metrics(self) -> dict[str, float | int]:
        return {
            "bins": len(self.keep),
            "input_segments": sum(len(rb.inputs) for rb in self.keep),
            "output_segments": sum(rb.output is not None for rb in self.keep),
            "input_bytes": sum(rb.bin.input_bytes for rb in self.keep),
            "output_bytes": sum(rb.output_bytes for rb in self.keep),
            "rows_dropped": sum(rb.bin.rows_dropped for rb in self.keep),
            "deletes_remapped": self.remapped,
        }


def _count(report: CompactionReport, b: Bin, rb: RewrittenBin | None) -> None:
    report.input_segments += len(b.inputs)
    report.input_bytes += b.input_bytes
    report.rows_dropped += b.rows_dropped
    if rb is not None:
        report.output_segments += rb.output is not None
        report.output_bytes += rb.output_bytes
