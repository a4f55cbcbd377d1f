"""Vacuum: lineage retention, then removal of data files no retained version needs, then
visibility GC (DV files, old log files, expired pins).

Order matters for crash safety. Retention only *logically* removes segments (a commit);
their files go in a later pass, once no version in the retention window or held by a pin
still shows them. Data files that no commit names (failed task attempts, aborted writes)
are orphans and go once older than ``orphanGracePeriod`` — the one place file times are
used, because an uncommitted file has no commit time. Every phase works in batches
bounded by ``gcBatchBytes`` of paths and stops (resumably) at the time budget.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mvtable.conf import connector_settings, parse_period
from mvtable.errors import CorruptMetadataError, InvalidOptionError, RetentionTooShortError, SettingsError, VersionNotFoundError
from mvtable.lineage import faults
from mvtable.lineage.actions import AddSegment
from mvtable.lineage.enums import Operation
from mvtable.lineage.lineage_retention import EntryCleanup, plan_entry_cleanup
from mvtable.lineage.log import LOG_DIR
from mvtable.lineage.log_retention import safe_version
from mvtable.lineage.ownership import Verdict
from mvtable.lineage.snapshot import Snapshot
from mvtable.visibility.gc import batches

from . import recovery
from .gc import Progress, collect_garbage
from .keys.index import segment_path_of
from .pinning import pin_scan
from .segments import DATA_DIR
from .writes import table_properties

if TYPE_CHECKING:
    from .table import Table

ENTRIES_PER_COMMIT = 50


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


def vacuum(
    table: Table,
    *,
    retention: str | float | None = None,
    dry_run: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    time_budget_s: float | None = None,
    batch_bytes: int | None = None,
    now_ms: int | None = None,
) -> VacuumReport:
    settings = connector_settings()
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    budget = parse_period(settings.gcTimeBudget, name="gcTimeBudget") if time_budget_s is None else float(time_budget_s)
    deadline = time.monotonic() + max(0.0, budget)
    max_bytes = batch_bytes or settings.gcBatchBytes
    snapshot = table.snapshot()
    props = table_properties(snapshot)
    table_retention = props.seconds("versionRetentionPeriod")
    try:
        retention_s = table_retention if retention is None else parse_period(retention, name="retention")
    except SettingsError as exc:
        raise InvalidOptionError(str(exc)) from None
    if retention_s < table_retention and not force:
        raise RetentionTooShortError(
            f"retention {retention!r} is shorter than the table's versionRetentionPeriod "
            f"({props.versionRetentionPeriod}): time travel and long readers inside that window would break. "
            "Pass force=True (--force) if you mean it."
        )
    report = VacuumReport(dry_run=dry_run, retention_s=retention_s, safe_version=snapshot.version)

    # 1. lineage retention (commits; bounded number of entries per commit)
    verdicts = recovery.entry_verdicts(
        table.io, snapshot, default_lease_ms=int(props.seconds("pushLeasePeriod") * 1000), at_ms=now
    )
    cleanups = plan_entry_cleanup(
        snapshot,
        now_ms=now,
        replaced_retention_s=props.seconds("replacedSegmentsRetentionPeriod"),
        entry_retention_s=props.seconds("lineageEntryCleanupRetentionPeriod"),
        verdicts=verdicts,
    )
    report.entries_purged = len(cleanups)
    report.segments_expired = sum(c.removed_segments for c in cleanups)
    if progress:
        progress(0, len(cleanups), "retention")
    if not dry_run:
        for start in range(0, len(cleanups), ENTRIES_PER_COMMIT):
            chunk = cleanups[start : start + ENTRIES_PER_COMMIT]
            version = _commit_cleanup(table, chunk, now_ms=now, props=props, verdicts=verdicts)
            if version is not None:
                report.retention_commits.append(version)
            faults.point("vacuum.after_retention_commit")
            if progress:
                progress(min(start + ENTRIES_PER_COMMIT, len(cleanups)), len(cleanups), "retention")
            if time.monotonic() >= deadline:
                report.complete = False
                return report

    # 2. data files no retained or pinned version needs, and old orphans
    if now_ms is None:  # the retention commits are newer than the clock read above
        now = int(time.time() * 1000)
    doomed, sizes, orphans, safe = _plan_data(
        table, now_ms=now, retention_s=retention_s, grace_s=props.seconds("orphanGracePeriod")
    )
    report.safe_version = safe
    report.orphans = orphans
    if progress:
        progress(0, len(doomed), "data")
    done = 0
    for batch in batches(doomed, max_bytes=max_bytes):
        if not dry_run:
            table.io.delete(batch)
            faults.point("vacuum.after_data_batch")
        report.batches += 1
        report.files.extend(batch)
        report.bytes += sum(sizes.get(p, 0) for p in batch)
        done += len(batch)
        if progress:
            progress(done, len(doomed), "data")
        if not dry_run and done < len(doomed) and time.monotonic() >= deadline:
            report.complete = False
            return report

    # 3. deletion vectors, log files, pins
    remaining = max(0.0, deadline - time.monotonic())
    gc = collect_garbage(
        table,
        dry_run=dry_run,
        time_budget_s=remaining,
        batch_bytes=max_bytes,
        now_ms=now,
        progress=progress,
        retention_s=retention_s,
    )
    report.files.extend(gc.deleted)
    report.bytes += gc.bytes_freed
    report.batches += gc.batches
    report.complete = report.complete and gc.complete
    report.safe_version = min(report.safe_version, gc.safe_version)
    return report


def _commit_cleanup(
    table: Table, chunk: list[EntryCleanup], *, now_ms: int, props, verdicts: Mapping[str, Verdict]
) -> int | None:
    ids = {c.entry_id for c in chunk}

    def build(current: Snapshot):
        # re-plan on the newest snapshot: an entry reverted or purged meanwhile changes what to do
        fresh = plan_entry_cleanup(
            current,
            now_ms=now_ms,
            replaced_retention_s=props.seconds("replacedSegmentsRetentionPeriod"),
            entry_retention_s=props.seconds("lineageEntryCleanupRetentionPeriod"),
            verdicts=verdicts,
        )
        return [a for c in fresh if c.entry_id in ids for a in c.actions]

    current = table.snapshot()
    if not build(current):
        return None
    result = table.log.commit(read=current, operation=Operation.RETENTION, parameters={"entries": sorted(ids)}, build=build)
    return result.commit.version


def _plan_data(table: Table, *, now_ms: int, retention_s: float, grace_s: float) -> tuple[list[str], dict[str, int], int, int]:
    """Data files to delete, their sizes, how many are orphans, and the safe version."""
    listing_data = table.io.list(DATA_DIR)  # listed before the log is read (see maintenance._plan)
    log_listing = table.log.listing()
    latest = table.log.snapshot(listing=log_listing)
    pinned = [p.version for p in pin_scan(table.io, now_ms=now_ms).live]
    history = {h.version: h.timestamp_ms for h in latest.history}
    safe = safe_version(history, latest=latest.version, now_ms=now_ms, retention_s=retention_s, pinned_versions=pinned)
    start = _readable_at_or_after(table, safe, latest)
    needed = {seg.file.path for seg in start.segments.values() if seg.removed_version is None}
    for v in range(start.version + 1, latest.version + 1):
        needed.update(a.segment.path for a in table.log.read_commit(v).actions if isinstance(a, AddSegment))
    known = {seg.file.path for seg in latest.segments.values()}
    doomed: list[str] = []
    sizes: dict[str, int] = {}
    orphans = 0
    for info in listing_data:
        path = f"{DATA_DIR}/{info.name}"
        sizes[path] = int(info.size or 0)
        owner = segment_path_of(path) or path  # a key index lives and dies with its segment
        if owner in needed:
            continue
        if owner in known:
            doomed.append(path)
        elif info.mtime is not None and (now_ms / 1000 - info.mtime) >= grace_s:
            doomed.append(path)
            orphans += 1
    for info in table.io.list(LOG_DIR):  # temp files of interrupted put-if-absent writes
        if (
            info.name.startswith(".")
            and info.name.endswith(".tmp")
            and info.mtime is not None
            and (now_ms / 1000 - info.mtime) >= grace_s
        ):
            path = f"{LOG_DIR}/{info.name}"
            doomed.append(path)
            sizes[path] = int(info.size or 0)
            orphans += 1
    return doomed, sizes, orphans, safe


def _readable_at_or_after(table: Table, version: int, latest: Snapshot) -> Snapshot:
    if version >= latest.version:
        return latest
    try:
        return table.log.snapshot(version)
    except (VersionNotFoundError, CorruptMetadataError):
        # the log no longer reaches back to the safe version: nobody can read below
        # its oldest checkpoint, so that is where "needed" starts
        for cp in table.log.listing().checkpoints:
            if cp > version:
                try:
                    return table.log.snapshot(cp)
                except (VersionNotFoundError, CorruptMetadataError):
                    continue
        return latest
