"""Vacuum: lineage retention, removal of unneeded data files, then visibility GC.

The GC pass takes DV files, old log files and expired pins.

Order matters for crash safety. Retention only *logically* removes segments (a commit);
their files go in a later pass, once no version in the retention window or held by a pin
still shows them. Data files that no commit names (failed task attempts, aborted writes)
are orphans and go once older than ``orphanGracePeriod`` — the one place file times are
used, because an uncommitted file has no commit time — unless a live write intent covers
them (a write in flight: ``write_intents``); a grace period below
``write_intents.MIN_ORPHAN_GRACE_S`` needs ``force``. Every phase works in batches
bounded by ``gcBatchBytes`` of paths and stops (resumably) at the time budget.

On a full disk vacuum must free space before it can write anything: the data files that
commits already in the log made unreachable go first (``_free_first``), before the
retention commit; if that commit still does not fit, the GC pass (deletes only) runs and
``StorageFullError`` says what was freed. Leftovers of writes that died go too, once
older than the grace period (``_plan_leftovers``): temp files of interrupted writes in
the log, lease and export folders, and lease files of pushes that are no longer running.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from mvtable import checks, faults
from mvtable.conf import TableProperties, parse_period
from mvtable.errors import (
    CorruptMetadataError,
    RetentionTooShortError,
    StorageFullError,
    VersionNotFoundError,
)
from mvtable.lineage.actions import Action, AddSegment, Commit, PruneState
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.lineage_retention import EntryCleanup, plan_entry_cleanup
from mvtable.lineage.log import LOG_DIR, CommitLog
from mvtable.lineage.log_retention import retention_version, safe_version
from mvtable.lineage.snapshot import Snapshot, apply_commit
from mvtable.lineage.transactions import has_prepared
from mvtable.storage import FileIO, is_temp_name
from mvtable.visibility.gc import batches

from . import recovery, write_intents
from .export.common import METADATA_DIR
from .export.delta import DELTA_LOG_DIR
from .gc import GCPlan, Progress, budget_and_batch, collect_garbage, plan_garbage
from .holds import Hold, grace_hold, version_holds
from .key_index import segment_path_of
from .partitions.retention import commit_partition_drop, describe_partitions, plan_partition_drop
from .pinning import pin_scan
from .post_commit import open_log
from .segments import DATA_DIR

ENTRIES_PER_COMMIT = 50
HISTORY_TRIM_ALONE = 1000  # history items that justify a commit of their own


@dataclass
class VacuumReport:
    dry_run: bool
    retention_s: float
    safe_version: int
    files: list[str] = field(default_factory=list)  # data, DV and log files removed (or that would be)
    bytes: int = 0
    segments_expired: int = 0  # segments retention removed from the table (logically)
    entries_purged: int = 0
    orphans: int = 0
    complete: bool = True
    batches: int = 0
    retention_commits: list[int] = field(default_factory=list)
    segments_pruned: int = 0  # removed segments the newest snapshot forgets (PruneState)
    held_back: list[Hold] = field(default_factory=list)  # why files stayed: pins, retention, grace
    # partitionRetention: the partitions dropped (or that would be), as people read them, and the commit
    partitions_dropped: list[str] = field(default_factory=list)
    partition_drop_version: int | None = None


def vacuum(
    commit_log: CommitLog,
    *,
    retention: str | float | None = None,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    time_budget_s: float | None = None,
    batch_bytes: int | None = None,
    now_ms: int | None = None,
) -> VacuumReport:
    """Remove what no version in the retention window or held by a pin needs.

    The phases run in the order crash safety needs (see the module docstring): plan all of
    it, free what needs no commit, commit the retention, delete data files, then the GC pass.
    Every phase may stop at the time budget; the report says so and a later run resumes.

    Raises:
        RetentionTooShortError: ``retention`` is below the table's window and ``force`` is not set.
        InvalidOptionError: a bad ``retention``, grace period, budget or flag.
        StorageFullError: the retention commit does not fit even after freeing what needs no commit.
    """
    run = _start(
        commit_log,
        retention=retention,
        dry_run=dry_run,
        force=force,
        progress=progress,
        time_budget_s=time_budget_s,
        batch_bytes=batch_bytes,
        now_ms=now_ms,
    )
    if not run.dry_run:  # multi-table transactions decided or abandoned: finished first, as any writer does
        run.snapshot = _finish_transactions(run.commit_log, run.snapshot)
    report = VacuumReport(dry_run=run.dry_run, retention_s=run.retention_s, safe_version=run.snapshot.version)
    _drop_old_partitions(run, report)  # 0. partitionRetention: one commit, metadata only
    plan = _plan(run, report)
    freed = _free_first(run, plan.data, report) if plan.commits else set()  # 1. space first
    if not _commit_retention(run, plan, report):
        return report
    if freed:
        plan.data.doomed = [p for p in plan.data.doomed if p not in freed]
    if not _delete_data(run, plan.data, report):  # 2. data files and old orphans
        return report
    _collect_garbage(run, plan.gc_plan, report)  # 3. deletion vectors, log files, pins
    _collect_decisions(run, report)  # 4. transaction decisions no participant needs
    return report


def _drop_old_partitions(run: _Run, report: VacuumReport) -> None:
    """Drop the partitions past the table's ``partitionRetention`` (a dry run only lists them).

    First, so that the same run's lineage retention and file planning already see them gone
    (their files still wait for ``versionRetentionPeriod``, like any removed segment's).
    """
    retention_s = run.props.partition_retention_s
    if retention_s is None or not run.snapshot.exists:
        return
    text = run.props.partition_retention
    if run.dry_run:
        drop = plan_partition_drop(run.snapshot, now_ms=run.now, retention_s=retention_s)
    else:
        drop, report.partition_drop_version = commit_partition_drop(
            run.commit_log, run.snapshot, now_ms=run.now, retention_s=retention_s, retention_text=text
        )
        if report.partition_drop_version is not None:
            run.snapshot = run.commit_log.snapshot()
    for p in drop.partitions:
        spec = run.snapshot.partition_specs.get(p.spec_id)
        report.partitions_dropped.extend(describe_partitions(spec, [p.partition]) if spec is not None else [str(p.partition)])


def _finish_transactions(commit_log: CommitLog, snapshot: Snapshot) -> Snapshot:
    from .transactions.collect import finish_found

    return finish_found(commit_log, snapshot) if has_prepared(snapshot) else snapshot


def _collect_decisions(run: _Run, report: VacuumReport) -> None:
    """Remove the decision objects of transactions this table coordinated that no participant needs any more."""
    from .recovery.transaction_decisions import DECISION_DIR
    from .transactions.collect import collectable_decisions

    if run.out_of_time() or not run.commit_log.io.list_names(DECISION_DIR):
        return
    doomed = collectable_decisions(
        run.commit_log, run.commit_log.snapshot(), now_ms=run.now, grace_s=run.props.orphan_grace_s, open_log=open_log
    )
    if doomed and not run.dry_run:
        run.commit_log.io.delete(doomed)
    report.files += doomed


@dataclass
class _Run:
    """One vacuum's settled options and the snapshot it started from.

    Settled once, so that every phase sees the same clock, budget and table properties.
    """

    commit_log: CommitLog
    snapshot: Snapshot
    props: TableProperties
    retention_s: float
    dry_run: bool
    force: bool
    now: int
    deadline: float
    max_bytes: int
    progress: Progress | None

    def out_of_time(self) -> bool:
        """Whether the time budget is spent.

        Checked between batches, so that a run stops where a later one can resume.
        """
        return time.monotonic() >= self.deadline


@dataclass
class _Plan:
    """What a run will do, planned before it deletes or commits anything.

    A dry run and a real run plan the same way, so the dry run lists what the real run deletes.
    """

    plan_cleanup: Callable[[Snapshot], list[EntryCleanup]]
    chunks: list[list[EntryCleanup]]  # lineage retention, at most ENTRIES_PER_COMMIT entries each
    commits: list[list[EntryCleanup]]  # the retention commits to make (none in a dry run)
    data: _DataPlan
    prune: PruneState | None
    gc_plan: GCPlan | None  # for the GC pass, unless the log moves meanwhile
    idle_times: dict[str, int] = field(default_factory=dict)  # the prune's idle streaming apps: last batch time planned


def _start(
    commit_log: CommitLog,
    *,
    retention: str | float | None,
    dry_run: bool,
    force: bool,
    progress: Progress | None,
    time_budget_s: float | None,
    batch_bytes: int | None,
    now_ms: int | None,
) -> _Run:
    """Check the options against the table and settle them.

    A bad option must fail before anything is read beyond the newest snapshot.

    Raises:
        RetentionTooShortError: ``retention`` is below the table's window and ``force`` is not set.
        InvalidOptionError: a bad ``retention``, grace period, budget or flag.
    """
    dry_run = checks.flag(dry_run, name="dry_run")
    force = checks.flag(force, name="force")
    budget, max_bytes = budget_and_batch(time_budget_s, batch_bytes)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    deadline = time.monotonic() + max(0.0, budget)
    snapshot = commit_log.snapshot()
    props = TableProperties.of(snapshot.properties)
    retention_s = _retention_s(retention, props, force=force)
    write_intents.check_grace(props.orphan_grace_s, period=props.orphan_grace_period, force=force)
    return _Run(
        commit_log=commit_log,
        snapshot=snapshot,
        props=props,
        retention_s=retention_s,
        dry_run=dry_run,
        force=force,
        now=now,
        deadline=deadline,
        max_bytes=max_bytes,
        progress=progress,
    )


def _retention_s(retention: str | float | None, props: TableProperties, *, force: bool) -> float:
    """The retention period in seconds: the table's unless given.

    A shorter one than the table's breaks time travel and long readers, so it needs ``force``.

    Raises:
        RetentionTooShortError: shorter than ``versionRetentionPeriod`` without ``force``.
        InvalidOptionError: not a period (a ``SettingsError`` that names the option).
    """
    table_retention = props.version_retention_s
    retention_s = table_retention if retention is None else parse_period(retention, name="retention")
    if retention_s < table_retention and not force:
        raise RetentionTooShortError(
            f"retention {retention!r} is shorter than the table's versionRetentionPeriod "
            f"({props.version_retention_period}): time travel and long readers inside that window would break. "
            "Pass force=True if you mean it."
        )
    return retention_s


def _plan(run: _Run, report: VacuumReport) -> _Plan:
    """Plan the whole run and fill in what the report knows before anything is deleted.

    Lineage retention is applied to a copy of the snapshot and the data files are planned on
    the result; the GC plan is made on the log as it is now (the retention commits only
    remove state, so that plan stays safe after them).
    """
    commit_log, snapshot, now, grace_s = run.commit_log, run.snapshot, run.now, run.props.orphan_grace_s
    plan_cleanup = _entry_cleanup_planner(run)
    cleanups = plan_cleanup(snapshot)
    report.entries_purged = len(cleanups)
    report.segments_expired = sum(c.removed_segments for c in cleanups)
    chunks = [cleanups[i : i + ENTRIES_PER_COMMIT] for i in range(0, len(cleanups), ENTRIES_PER_COMMIT)]
    simulated = snapshot.copy()
    for chunk in chunks:
        _simulate(simulated, [a for c in chunk for a in c.actions], now_ms=now)
    gc_plan = plan_garbage(commit_log, now_ms=now, retention_s=run.retention_s)
    data = _plan_files(commit_log, simulated, now_ms=now, retention_s=run.retention_s, grace_s=grace_s)
    prune = prune_action(
        simulated,
        safe_version=data.safe,
        gc_plan=gc_plan,
        cleanups=bool(cleanups),
        idle_apps=idle_apps(simulated, now_ms=now, retention_s=run.props.streaming_app_retention_s),
    )
    report.safe_version = data.safe
    report.orphans = data.orphans
    report.held_back = _holds(commit_log, snapshot, data, now_ms=now, retention_s=run.retention_s, grace_s=grace_s)
    report.segments_pruned = len(prune.segment_ids) if prune else 0
    commits = ([*chunks] if chunks else ([[]] if prune else [])) if not run.dry_run else []
    idle_times = {a: simulated.transaction_times.get(a, simulated.timestamp_ms) for a in (prune.app_ids if prune else ())}
    return _Plan(
        plan_cleanup=plan_cleanup, chunks=chunks, commits=commits, data=data, prune=prune, gc_plan=gc_plan, idle_times=idle_times
    )


def _entry_cleanup_planner(run: _Run) -> Callable[[Snapshot], list[EntryCleanup]]:
    """The lineage retention planner, bound to this run's clock, periods and push verdicts.

    Each retention commit plans again with it on the newest snapshot (``_commit_cleanup``).
    """
    props = run.props
    verdicts = recovery.entry_verdicts(run.commit_log.io, run.snapshot, default_lease_ms=props.push_lease_ms, at_ms=run.now)
    return partial(
        plan_entry_cleanup,
        now_ms=run.now,
        replaced_retention_s=props.replaced_segments_retention_s,
        entry_retention_s=props.lineage_entry_retention_s,
        verdicts=verdicts,
    )


def _commit_retention(run: _Run, plan: _Plan, report: VacuumReport) -> bool:
    """Make the retention commits; ``False`` when the time budget ran out.

    If someone committed in between, the data files are planned again on what the log now
    says, and the GC pass plans afresh too.

    Raises:
        StorageFullError: a commit does not fit even after the GC pass freed what it could.
    """
    commit_log, commits, progress = run.commit_log, plan.commits, run.progress
    if progress:
        progress(0, len(plan.chunks), "retention")
    if not commits:
        return True
    try:
        for i, chunk in enumerate(commits):
            prune = plan.prune if i == len(commits) - 1 else None
            version = _commit_cleanup(commit_log, chunk, plan.plan_cleanup, prune=prune, idle_times=plan.idle_times)
            if version is not None:
                report.retention_commits.append(version)
            faults.point("vacuum.after_retention_commit")
            if progress:
                progress(i + 1, len(commits), "retention")
            if run.out_of_time():
                report.complete = False
                return False
    except StorageFullError as exc:
        raise _full_after_freeing(
            commit_log, exc, report, now_ms=run.now, retention_s=run.retention_s, plan=plan.gc_plan
        ) from exc
    first = run.snapshot.version + 1
    if report.retention_commits != list(range(first, first + len(commits))):
        plan.data = _plan_files(
            commit_log, commit_log.snapshot(), now_ms=run.now, retention_s=run.retention_s, grace_s=run.props.orphan_grace_s
        )
        plan.gc_plan = None
    return True


def _delete_data(run: _Run, data: _DataPlan, report: VacuumReport) -> bool:
    """Delete the planned data files in batches; ``False`` when the time budget ran out.

    Each batch spares files a write intent taken since the plan covers.
    """
    progress, dry_run = run.progress, run.dry_run
    if progress:
        progress(0, len(data.doomed), "data")
    done = 0
    for batch in batches(data.doomed, max_bytes=run.max_bytes):
        if not dry_run:
            batch = _spare_writes_in_flight(run.commit_log.io, batch, now_ms=run.now)
            run.commit_log.io.delete(batch)
            faults.point("vacuum.after_data_batch")
        report.batches += 1
        report.files.extend(batch)
        report.bytes += sum(data.sizes.get(p, 0) for p in batch)
        done += len(batch)
        if progress:
            progress(done, len(data.doomed), "data")
        if not dry_run and done < len(data.doomed) and run.out_of_time():
            report.complete = False
            return False
    return True


def _collect_garbage(run: _Run, gc_plan: GCPlan | None, report: VacuumReport) -> None:
    """The GC pass: deletion vectors, old log files and expired pins, in what budget is left.

    Its results join the report, whose safe version becomes the lower of the two.
    """
    gc = collect_garbage(
        run.commit_log,
        dry_run=run.dry_run,
        time_budget_s=max(0.0, run.deadline - time.monotonic()),
        batch_bytes=run.max_bytes,
        now_ms=run.now,
        progress=run.progress,
        retention_s=run.retention_s,
        plan=gc_plan,
        force=run.force,
    )
    report.files.extend(gc.deleted)
    report.bytes += gc.bytes_freed
    report.batches += gc.batches
    report.complete = report.complete and gc.complete
    report.safe_version = min(report.safe_version, gc.safe_version)


def _simulate(state: Snapshot, actions: list[Action], *, now_ms: int) -> None:
    """``state`` advanced by a commit of ``actions`` (what the retention commit will do)."""
    ts = max(now_ms, state.timestamp_ms + 1)
    commit = Commit(
        version=state.version + 1,
        read_version=state.version,
        timestamp_ms=ts,
        operation=Operation.RETENTION,
        actions=tuple(actions),
    )
    apply_commit(state, commit)


def idle_apps(state: Snapshot, *, now_ms: int, retention_s: float) -> tuple[str, ...]:
    """Streaming applications whose last batch was committed longer than ``retention_s`` ago (streamingAppRetentionPeriod)."""
    cutoff = now_ms - retention_s * 1000
    return tuple(app for app in state.transactions if state.transaction_times.get(app, state.timestamp_ms) < cutoff)


def prune_action(
    state: Snapshot, *, safe_version: int, gc_plan: GCPlan, cleanups: bool, idle_apps: tuple[str, ...] = ()
) -> PruneState | None:
    """What a table that lives for years forgets (``PruneState``); ``None``: nothing to forget.

    Segments removed at or before the safe version that no lineage entry names (vacuum deletes their files in
    this same run; no version it keeps readable shows them), and the history of the
    versions whose log files this run's GC removes — with other work, or once it is
    ``HISTORY_TRIM_ALONE`` items (a table that only appends).
    """
    named = {sid for e in state.lineage.values() for sid in (*e.segments_from, *e.segments_to)}
    gone = tuple(
        sid
        for sid, seg in state.segments.items()
        if seg.removed_version is not None and seg.removed_version <= safe_version and sid not in named
    )
    log_start = gc_plan.retention.checkpoint if gc_plan.retention.delete_commits else None
    trim = 0 if log_start is None else bisect.bisect_left(state.history, log_start, key=lambda h: h.version)
    if not gone and not idle_apps and (not cleanups or not trim) and trim < HISTORY_TRIM_ALONE:
        return None  # a commit only to trim a little history would itself give the next run work
    return PruneState(segment_ids=gone, history_before=log_start if trim else None, app_ids=idle_apps)


def _commit_cleanup(
    commit_log: CommitLog,
    chunk: list[EntryCleanup],
    plan_cleanup: Callable[[Snapshot], list[EntryCleanup]],
    *,
    prune: PruneState | None,
    idle_times: dict[str, int] | None = None,
) -> int | None:
    ids = {c.entry_id for c in chunk}
    idle = dict(idle_times or {})

    def build(current: Snapshot) -> list[Action]:
        # re-plan on the newest snapshot: an entry reverted or purged meanwhile changes what to do
        actions: list[Action] = [a for c in plan_cleanup(current) if c.entry_id in ids for a in c.actions]
        if prune is not None:
            trial = current.copy()
            _simulate(trial, actions, now_ms=current.timestamp_ms)
            named = {sid for e in trial.lineage.values() for sid in (*e.segments_from, *e.segments_to)}
            still = tuple(
                sid
                for sid in prune.segment_ids
                if sid in trial.segments and trial.segments[sid].removed_version is not None and sid not in named
            )
            # an application that committed a batch since the plan is no longer idle
            apps = tuple(a for a in prune.app_ids if a in trial.transactions and trial.transaction_times.get(a) == idle.get(a))
            if still or prune.history_before is not None or apps:
                actions.append(PruneState(segment_ids=still, history_before=prune.history_before, app_ids=apps))
        return actions

    current = commit_log.snapshot()
    if not build(current):
        return None
    result = commit_log.commit(
        read=current,
        operation=Operation.RETENTION,
        parameters={"entries": sorted(ids), **({"pruned_segments": len(prune.segment_ids)} if prune else {})},
        build=build,
    )
    return result.commit.version


@dataclass
class _DataPlan:
    doomed: list[str]
    sizes: dict[str, int]
    orphans: int
    safe: int
    young_orphans: int = 0  # unreferenced data files kept: younger than orphanGracePeriod


def _holds(
    commit_log: CommitLog, snapshot: Snapshot, data: _DataPlan, *, now_ms: int, retention_s: float, grace_s: float
) -> list[Hold]:
    """What kept files this run plans to keep (see ``holds``)."""
    history = {h.version: h.timestamp_ms for h in snapshot.history}
    keep = retention_version(history, latest=snapshot.version, now_ms=now_ms, retention_s=retention_s)
    pinned = pin_scan(commit_log.io, now_ms=now_ms).live
    return [
        *version_holds(pinned, retention_version=keep, latest=snapshot.version, retention_s=retention_s, now_ms=now_ms),
        *grace_hold(data.young_orphans, what="data file(s)", grace_s=grace_s),
    ]


def _plan_data(commit_log: CommitLog, latest: Snapshot, *, now_ms: int, retention_s: float, grace_s: float) -> _DataPlan:
    """Data files to delete (with sizes and the orphan count) and the safe version.

    Planned for the log at ``latest``, a snapshot the planned retention commits are applied to.
    """
    listing_data = commit_log.io.list(DATA_DIR)  # listed before the log is read again (see gc._plan)
    intents = write_intents.scan_intents(commit_log.io, now_ms=now_ms)  # after the listing: see write_intents
    in_log = commit_log.latest_version()
    pinned = [p.version for p in pin_scan(commit_log.io, now_ms=now_ms).live]
    history = {h.version: h.timestamp_ms for h in latest.history}
    safe = safe_version(history, latest=latest.version, now_ms=now_ms, retention_s=retention_s, pinned_versions=pinned)
    start = _readable_at_or_after(commit_log, safe, latest)
    needed = {seg.file.path for seg in start.segments.values() if seg.removed_version is None}
    for v in range(start.version + 1, min(latest.version, in_log) + 1):  # planned commits add nothing
        needed.update(a.segment.path for a in commit_log.read_commit(v).actions if isinstance(a, AddSegment))
    known = {seg.file.path for seg in latest.segments.values()}
    doomed: list[str] = []
    sizes: dict[str, int] = {}
    orphans = young = 0
    for info in listing_data:
        path = f"{DATA_DIR}/{info.name}"
        sizes[path] = int(info.size or 0)
        owner = segment_path_of(path) or path  # a key index lives and dies with its segment
        if owner in needed or intents.protects(path):
            continue
        if owner in known:
            doomed.append(path)
        elif info.mtime is not None and (now_ms / 1000 - info.mtime) >= grace_s:
            doomed.append(path)
            orphans += 1
        else:
            young += 1
    tmp_grace_s = max(grace_s, write_intents.MIN_ORPHAN_GRACE_S)  # no intent covers a commit being written
    for info in commit_log.io.list(LOG_DIR):  # temp files of interrupted put-if-absent writes
        if (
            info.name.startswith(".")
            and info.name.endswith(".tmp")
            and info.mtime is not None
            and (now_ms / 1000 - info.mtime) >= tmp_grace_s
        ):
            path = f"{LOG_DIR}/{info.name}"
            doomed.append(path)
            sizes[path] = int(info.size or 0)
            orphans += 1
    doomed.extend(intents.stale)  # intent files of writers that are gone
    return _DataPlan(doomed, sizes, orphans, safe, young)


def _plan_files(commit_log: CommitLog, latest: Snapshot, *, now_ms: int, retention_s: float, grace_s: float) -> _DataPlan:
    """``_plan_data`` and the leftovers of dead writes (``_plan_leftovers``)."""
    data = _plan_data(commit_log, latest, now_ms=now_ms, retention_s=retention_s, grace_s=grace_s)
    for path, size in _plan_leftovers(commit_log, now_ms=now_ms, grace_s=grace_s).items():
        data.doomed.append(path)
        data.sizes[path] = size
        data.orphans += 1
    return data


# folders whose temp files nothing else collects (data, DV and pin folders: their own GC
# takes every file no version needs once it is old; the log: ``_plan_data``)
_TEMP_FOLDERS = (recovery.LEASE_DIR, METADATA_DIR, DELTA_LOG_DIR)


def _plan_leftovers(commit_log: CommitLog, *, now_ms: int, grace_s: float) -> dict[str, int]:
    """What writes that died left (path -> size), once older than the grace period.

    Temp files of ``FileIO`` writes, and lease files and gave-up markers of pushes that are no
    longer IN_PROGRESS. The lease folder is listed before the log is read, so a push that
    starts meanwhile (its start commit lands before its lease file) is seen running.
    """
    io = commit_log.io
    old = lambda mtime: mtime is not None and (now_ms / 1000 - mtime) >= grace_s
    out: dict[str, int] = {}
    leases = io.list(recovery.LEASE_DIR)
    for folder in _TEMP_FOLDERS:
        for info in leases if folder == recovery.LEASE_DIR else io.list(folder):
            if is_temp_name(info.name) and old(info.mtime):
                out[f"{folder}/{info.name}"] = int(info.size or 0)
    if leases:
        lineage = commit_log.snapshot().lineage
        for info in leases:
            entry_id = recovery.entry_of(info.name)
            entry = lineage.get(entry_id) if entry_id else None
            if entry_id and (entry is None or entry.state != LineageState.IN_PROGRESS) and old(info.mtime):
                out[f"{recovery.LEASE_DIR}/{info.name}"] = int(info.size or 0)
    return out


def _free_first(run: _Run, data: _DataPlan, report: VacuumReport) -> set[str]:
    """Delete the planned files that commits already in the log made unreachable, and old leftovers.

    This runs before vacuum commits anything: on a full disk the retention commit fits
    only after them. Planned as ``_plan_data`` plans on the log as it is, and only files
    the whole run's plan deletes too, so a dry run still lists exactly what a run deletes.
    """
    commit_log, snapshot = run.commit_log, run.snapshot
    grace_s = TableProperties.of(snapshot.properties).orphan_grace_s
    now = set(_plan_files(commit_log, snapshot, now_ms=run.now, retention_s=run.retention_s, grace_s=grace_s).doomed)
    early = [p for p in data.doomed if p in now]
    for batch in batches(early, max_bytes=run.max_bytes):
        commit_log.io.delete(batch)
        report.batches += 1
        report.files.extend(batch)
        report.bytes += sum(data.sizes.get(p, 0) for p in batch)
    return set(early)


def _full_after_freeing(
    commit_log: CommitLog, exc: StorageFullError, report: VacuumReport, *, now_ms: int, retention_s: float, plan: GCPlan | None
) -> StorageFullError:
    """The error for a retention commit that does not fit even after ``_free_first``.

    The GC pass, which only deletes, runs first; the error says what was freed and what to do.
    """
    gc = collect_garbage(commit_log, now_ms=now_ms, retention_s=retention_s, plan=plan)
    freed = report.bytes + gc.bytes_freed
    n = len(report.files) + len(gc.deleted)
    return StorageFullError(
        f"vacuum of {commit_log.io.uri} freed {n} file(s), {freed} bytes, but its retention commit still does not fit "
        f"({exc}); free more space and run vacuum again",
        path=exc.path,
        operation="vacuum",
        errno=exc.errno,
    )


def _spare_writes_in_flight(io: FileIO, batch: list[str], *, now_ms: int) -> list[str]:
    """``batch`` without files a write intent taken since the plan covers.

    A restore names files that existed before its intent (the plan already spares every file written under
    an intent, which exists before its files do).
    """
    intents = write_intents.scan_intents(io, now_ms=now_ms)
    return [p for p in batch if not intents.protects(p)]


def _readable_at_or_after(commit_log: CommitLog, version: int, latest: Snapshot) -> Snapshot:
    if version >= latest.version:
        return latest
    try:
        return commit_log.snapshot(version)
    except (VersionNotFoundError, CorruptMetadataError):
        # the log no longer reaches back to the safe version: nobody can read below
        # its oldest checkpoint, so that is where "needed" starts
        for cp in commit_log.listing().checkpoints:
            if cp > version:
                try:
                    return commit_log.snapshot(cp)
                except (VersionNotFoundError, CorruptMetadataError):
                    continue
        return latest
