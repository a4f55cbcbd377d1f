"""Visibility GC of a table's log, deletion vectors and pins (CockroachDB's GC queue: bounded, resumable batches).

``collect_garbage`` removes what no retained or pinned version needs:

1. **plan** (reads only): list ``_mvtable/dv/``, read the pins, read the log; the safe
   version is min(oldest live pin, retention version) (``lineage.retention``); the DV files
   every version from the safe one to the latest references are *needed*; DV files only
   older committed versions reference are *superseded*; others are orphans or belong to a
   delete still in flight and go only after ``orphanGracePeriod`` (``visibility.gc``).
2. delete superseded/orphaned **DV files**, in batches;
3. delete **log files** older than the newest checkpoint at or below the safe version,
   oldest first, in batches (the checkpoint is read back first: a log is never cut at a
   checkpoint that cannot be read);
4. delete **expired pin files**.

Each batch is bounded by ``gcBatchBytes`` of paths. GC keeps no state of its own and
writes nothing to the log: a finished batch is durable (its files are gone) and is the
unit of progress, and every run recomputes its plan from the table, so a run that is
killed or stops at its time budget (``complete=False``) is simply resumed by the next run.
The order above means a kill at any point leaves every retained or pinned version readable.
Before each DV/log batch the pins are read again; a pin that appeared below the safe
version makes GC re-plan.

Fault injection for tests (``mvtable.faults``): ``MVTABLE_FAULT=gc.after_batch:N`` makes the
process SIGKILL itself right after its N-th (1-based) delete batch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mvtable import checks, faults
from mvtable.conf import TableProperties, connector_settings
from mvtable.errors import CorruptMetadataError, VersionNotFoundError
from mvtable.lineage.log import LOG_DIR, CommitLog, Listing
from mvtable.lineage.log_retention import LogRetentionPlan, plan_log_retention
from mvtable.lineage.summary import CommitSummary, TableSummary, apply_summary
from mvtable.storage import FileInfo, FileIO
from mvtable.visibility.files import DV_DIR
from mvtable.visibility.gc import DVGCPlan, batches, plan_dv_gc
from mvtable.visibility.pins import PIN_DIR

from . import write_intents
from .holds import Hold, checkpoint_hold, grace_hold, version_holds
from .pinning import pin_scan

logger = logging.getLogger("mvtable.connector")

MAX_REPLANS = 3

Progress = Callable[[int, int, str], None]


@dataclass
class GCReport:
    """What one GC run did (or, with ``dry_run``, would do).

    ``complete`` is False when the run stopped early (time budget, or pins kept moving);
    run GC again to finish. ``deleted`` lists the table-relative paths removed."""

    safe_version: int
    dv_files_deleted: int = 0
    log_files_deleted: int = 0
    pins_expired: int = 0
    bytes_freed: int = 0
    complete: bool = True
    batches: int = 0
    dry_run: bool = False
    retention_version: int | None = None
    pinned_version: int | None = None
    log_checkpoint: int | None = None  # the checkpoint the log now starts at
    dv_files_in_grace: int = 0  # unreferenced DV files kept: younger than orphanGracePeriod
    replans: int = 0
    deleted: list[str] = field(default_factory=list)
    held_back: list[Hold] = field(default_factory=list)  # why files stayed: pins, retention, grace, checkpoints


@dataclass
class GCPlan:
    safe: int
    retention: LogRetentionPlan
    dv: DVGCPlan
    phases: list[tuple[str, list[str]]]
    sizes: dict[str, int]
    held_back: list[Hold] = field(default_factory=list)


def collect_garbage(
    commit_log: CommitLog,
    *,
    dry_run: bool = False,
    time_budget_s: float | None = None,
    batch_bytes: int | None = None,
    now_ms: int | None = None,
    progress: Progress | None = None,
    retention_s: float | None = None,
    plan: GCPlan | None = None,
    force: bool = False,
) -> GCReport:
    """Remove superseded and orphaned DV files, log files no version needs, and expired pins.

    Orphaned DV files go once past the grace period; log files once no retained or pinned version
    needs them. See the module doc.

    ``time_budget_s`` (default ``gcTimeBudget``) is checked after each batch, so a run
    always deletes at least one batch; ``batch_bytes`` (default ``gcBatchBytes``) bounds the
    summed path length of one delete call; ``now_ms`` is the clock used for the retention
    window, pin expiry and the orphan grace period; ``progress(done, total, what)`` is
    called as each phase (``"dv"``, ``"log"``, ``"pins"``) starts and after each batch.
    ``retention_s`` overrides the table's ``versionRetentionPeriod`` (vacuum passes its own,
    after checking it is not shorter unless forced). ``plan`` (from ``plan_garbage``) is
    executed instead of a fresh one while no pin asks for a re-plan: vacuum plans before its
    retention commit, so that its dry run lists exactly what its real run deletes.
    ``force`` runs it on a table whose ``orphanGracePeriod`` is below the safe minimum.

    Raises ``OrphanGraceTooShortError`` for such a table without ``force``."""
    dry_run = checks.flag(dry_run, name="dry_run")
    force = checks.flag(force, name="force")
    budget_s, max_bytes = budget_and_batch(time_budget_s, batch_bytes)
    now_ms = checks.epoch_ms(now_ms)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    deadline = time.monotonic() + max(0.0, budget_s)
    fault_after = faults.numbered("gc.after_batch")

    report: GCReport | None = None
    given = plan
    for attempt in range(MAX_REPLANS + 1):
        plan = (
            given
            if given is not None and attempt == 0
            else _plan(commit_log, now_ms=now, retention_s=retention_s, force=force or given is not None)
        )
        if report is None:
            report = GCReport(safe_version=plan.safe, dry_run=dry_run)
        _describe(report, plan)
        report.replans = attempt
        if dry_run:
            for what, paths in plan.phases:
                _count(report, what, paths, plan.sizes)
                report.batches += len(batches(paths, max_bytes=max_bytes)) if paths else 0
                if progress:
                    progress(len(paths), len(paths), what)
            return report
        outcome = _execute(
            commit_log.io,
            plan,
            report,
            max_bytes=max_bytes,
            deadline=deadline,
            now_ms=now,
            progress=progress,
            fault_after=fault_after,
        )
        if outcome != "replan":
            return report
        logger.info("GC of %s: a reader pinned a version below %s while GC ran; planning again", commit_log.io.uri, plan.safe)
    assert report is not None
    report.complete = False
    return report


def budget_and_batch(time_budget_s: float | None, batch_bytes: int | None) -> tuple[float, int]:
    """A pass's time budget in seconds and the bytes of one delete call.

    The caller's, checked (a NaN budget would never stop, a string would be compared with a float),
    or the connector's ``gcTimeBudget`` and ``gcBatchBytes``. Shared by GC and vacuum."""
    settings = connector_settings()
    budget = settings.gc_time_budget_s if time_budget_s is None else checks.seconds(time_budget_s, name="time_budget_s")
    max_bytes = settings.gc_batch_bytes if batch_bytes is None else checks.count(batch_bytes, name="batch_bytes")
    return budget, max_bytes


def plan_garbage(commit_log: CommitLog, *, now_ms: int, retention_s: float | None = None) -> GCPlan:
    """What ``collect_garbage`` would delete now, to be passed back to it as ``plan``."""
    return _plan(commit_log, now_ms=now_ms, retention_s=retention_s)


def _execute(
    io,
    plan: GCPlan,
    report: GCReport,
    *,
    max_bytes: int,
    deadline: float,
    now_ms: int,
    progress: Progress | None,
    fault_after: int | None,
) -> str:
    """Delete the plan's batches: ``"done"``, ``"budget"`` (out of time) or ``"replan"``."""
    work = [(what, paths, batches(paths, max_bytes=max_bytes)) for what, paths in plan.phases]
    remaining = sum(len(b) for _, _, b in work)
    for what, paths, phase_batches in work:
        done = 0
        if progress:
            progress(0, len(paths), what)
        for batch in phase_batches:
            if what != "pins" and _pinned_below(io, plan.safe, now_ms=now_ms):
                return "replan"
            io.delete(batch)
            _count(report, what, batch, plan.sizes)
            report.batches += 1
            remaining -= 1
            done += len(batch)
            if progress:
                progress(done, len(paths), what)
            if fault_after is not None and report.batches >= fault_after:
                faults.die("GC")
            if remaining and time.monotonic() >= deadline:
                report.complete = False
                return "budget"
    report.complete = True
    return "done"


def _count(report: GCReport, what: str, paths: list[str], sizes: dict[str, int]) -> None:
    if what == "dv":
        report.dv_files_deleted += len(paths)
    elif what == "log":
        report.log_files_deleted += len(paths)
    else:
        report.pins_expired += len(paths)
    report.bytes_freed += sum(sizes.get(p, 0) for p in paths)
    report.deleted.extend(paths)


def _describe(report: GCReport, plan: GCPlan) -> None:
    report.safe_version = plan.safe
    report.retention_version = plan.retention.retention_version
    report.pinned_version = plan.retention.pinned_version
    report.log_checkpoint = plan.retention.checkpoint
    report.dv_files_in_grace = plan.dv.kept_in_grace
    report.held_back = plan.held_back


# -- planning (reads only) --------------------------------------------------------------
def _plan(commit_log: CommitLog, *, now_ms: int, retention_s: float | None = None, force: bool = True) -> GCPlan:
    """Read the table and decide what each phase deletes (nothing is changed).

    ``force=False``: ``OrphanGraceTooShortError`` for a table whose orphanGracePeriod is
    below the safe minimum (vacuum checks it itself)."""
    io = commit_log.io
    # The DV folder is listed before the log is read: a DV file committed by then is seen
    # as needed; one committed later was in flight when the log was read, and is younger
    # than the grace period.
    dv_listing = io.list(DV_DIR)
    pins = pin_scan(io, now_ms=now_ms)
    listing = commit_log.listing()
    summaries = _Summaries(commit_log, listing)
    latest = summaries.at(listing.latest)
    props = TableProperties.of(latest.properties)
    write_intents.check_grace(props.orphan_grace_s, period=props.orphan_grace_period, force=force)
    version_retention_s = props.version_retention_s if retention_s is None else retention_s
    retention = plan_log_retention(
        listing,
        {h.version: h.timestamp_ms for h in latest.history},
        now_ms=now_ms,
        retention_s=version_retention_s,
        pinned_versions=[p.version for p in pins.live],
    )
    retention, base = _readable_cut(summaries, listing, retention, latest)
    safe = retention.safe_version
    start = _oldest_readable(summaries, listing, safe, latest)
    dv = _spare_writes_in_flight(
        io,
        plan_dv_gc(
            dv_listing,
            needed=_needed_dvs(summaries, start, latest),
            superseded=_superseded_dvs(summaries, listing, start, base),
            now_ms=now_ms,
            grace_s=props.orphan_grace_s,
        ),
        now_ms,
    )
    phases = [("dv", list(dv.delete)), ("log", retention.paths), ("pins", list(pins.expired))]
    held_back = [
        *version_holds(
            pins.live,
            retention_version=retention.retention_version,
            latest=latest.version,
            retention_s=version_retention_s,
            now_ms=now_ms,
        ),
        *grace_hold(dv.kept_in_grace, what="deletion-vector file(s)", grace_s=props.orphan_grace_s),
        *checkpoint_hold(safe_version=safe, checkpoint=retention.checkpoint, interval=props.checkpoint_interval),
    ]
    return GCPlan(safe, retention, dv, phases, _sizes(io, dv_listing), held_back)


def _readable_cut(
    summaries: _Summaries, listing: Listing, retention: LogRetentionPlan, latest: TableSummary
) -> tuple[LogRetentionPlan, TableSummary | None]:
    """``retention`` and the summary of the checkpoint it cuts the log at, or a retention keeping every log file.

    The log is kept whole when a checkpoint from there on cannot be read back.

    Never cut the log below a checkpoint that cannot be read back: CommitLog.snapshot
    falls back from a bad checkpoint only while every older commit file is there, so
    after a cut every version from that checkpoint on would become unreadable."""
    base: TableSummary | None = None
    if retention.checkpoint is None:
        return retention, base
    for c in (c for c in listing.checkpoints if retention.checkpoint <= c <= latest.version):
        try:
            checked = summaries.checkpoint(c, full_check=True)
        except (CorruptMetadataError, FileNotFoundError) as exc:
            logger.warning("GC: checkpoint %s is unreadable (%s); keeping every log file this run", c, exc)
            return dataclasses.replace(retention, delete_commits=(), delete_checkpoints=()), base
        if c == retention.checkpoint:
            base = checked
    return retention, base


def _needed_dvs(summaries: _Summaries, start: TableSummary, latest: TableSummary) -> set[str]:
    """DV paths every readable version from ``start`` (the safe one, or the oldest readable after it) to the latest references."""
    needed = start.dv_paths
    for v in range(start.version + 1, latest.version + 1):
        needed.update(summaries.commit(v).dv_paths)
    return needed


def _superseded_dvs(summaries: _Summaries, listing: Listing, start: TableSummary, base: TableSummary | None) -> set[str]:
    """DV paths older committed versions reference (superseded unless needed): what the log still knows.

    It starts at its oldest checkpoint (where an earlier GC cut it) or at commit 0, and every later
    commit names the DVs it set. A file that cannot be read is skipped: its DVs wait for the grace
    period."""
    superseded = base.dv_paths if base is not None else set()
    first = listing.checkpoints[0] if listing.checkpoints else None
    if first is not None and first <= start.version and (base is None or first != base.version):
        try:
            superseded.update(summaries.checkpoint(first).dv_paths)
        except (CorruptMetadataError, FileNotFoundError) as exc:
            logger.warning("GC: cannot read checkpoint %s (%s)", first, exc)
    for v in listing.commits:
        if v > start.version:
            break
        try:
            superseded.update(summaries.commit(v).dv_paths)
        except (VersionNotFoundError, CorruptMetadataError) as exc:  # gone or bad
            logger.warning("GC: cannot read log version %s (%s)", v, exc)
    return superseded


def _sizes(io: FileIO, dv_listing: list[FileInfo]) -> dict[str, int]:
    """The size of every file a phase may delete (DV files as listed before the log was read)."""
    sizes = {f"{DV_DIR}/{i.name}": int(i.size or 0) for i in dv_listing}
    sizes.update({f"{LOG_DIR}/{i.name}": int(i.size or 0) for i in io.list(LOG_DIR)})
    sizes.update({f"{PIN_DIR}/{i.name}": int(i.size or 0) for i in io.list(PIN_DIR)})
    return sizes


def _spare_writes_in_flight(io: FileIO, dv: DVGCPlan, now_ms: int) -> DVGCPlan:
    """``dv`` without the DV files of writes in flight.

    A live write intent covers them (read after the DV folder was listed, see ``write_intents``)."""
    intents = write_intents.scan_intents(io, now_ms=now_ms)
    keep = [p for p in dv.delete if intents.protects(p)]
    if not keep:
        return dv
    spared = set(keep)
    return dataclasses.replace(
        dv,
        delete=tuple(p for p in dv.delete if p not in spared),
        orphans=dv.orphans - len(keep),
        kept_in_grace=dv.kept_in_grace + len(keep),
    )


class _Summaries:
    """Versions of the table as GC needs them (``lineage.summary``).

    Version, properties, history and DV paths — never whole snapshots, whose segment descriptors and
    statistics grow with every segment of a large table. Commit summaries are kept for the plan:
    each is read once however many versions GC looks at."""

    def __init__(self, commit_log: CommitLog, listing: Listing) -> None:
        self.commit_log = commit_log
        self.listing = listing
        self._commits: dict[int, CommitSummary] = {}
        self._checkpoints: dict[int, TableSummary] = {}
        self._checked: set[int] = set()  # checkpoints read with full_check

    def commit(self, version: int) -> CommitSummary:
        found = self._commits.get(version)
        if found is None:
            found = self._commits[version] = self.commit_log.read_commit_summary(version)
        return found

    def checkpoint(self, version: int, *, full_check: bool = False) -> TableSummary:
        """``full_check``: the checkpoint must be readable by ``CommitLog.snapshot``, not just its DV paths.

        GC is about to cut the log at or below it."""
        found = self._checkpoints.get(version)
        if found is None or (full_check and version not in self._checked):
            found = self._checkpoints[version] = self.commit_log.read_checkpoint_summary(version, full_check=full_check)
            if full_check:
                self._checked.add(version)
        return found

    def at(self, version: int) -> TableSummary:
        """The summary at ``version``, falling back from unreadable checkpoints as ``CommitLog.snapshot`` does."""
        base = self.commit_log.newest_base(version, self.listing, self.checkpoint)
        state = base.copy() if base is not None else TableSummary()
        for v in range(state.version + 1, version + 1):
            apply_summary(state, self.commit(v))
        return state


def _oldest_readable(summaries: _Summaries, listing: Listing, safe: int, latest: TableSummary) -> TableSummary:
    """The summary at ``safe``, or at the oldest readable version after it.

    The log may no longer reach back that far (an old pin, an unreadable pin file pinning version
    0); versions in between cannot be read by anyone."""
    if safe >= latest.version:
        return latest
    for v in [safe, *(c for c in listing.checkpoints if c > safe)]:
        try:
            return summaries.at(v)
        except (VersionNotFoundError, CorruptMetadataError):
            continue
    return latest


def _pinned_below(io, safe: int, *, now_ms: int) -> bool:
    lowest = pin_scan(io, now_ms=now_ms).min_version
    return lowest is not None and lowest < safe
