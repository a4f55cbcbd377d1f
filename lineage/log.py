"""The commit log on storage: listing, reading snapshots, and the optimistic commit loop.

This is the only part of ``mvtable.lineage`` that does I/O. It reads files through a
``FileIO`` and hands the content to the pure parts (``actions``, ``snapshot``,
``checkpoint``); the commit loop is Lance's ``commit(read_version)``: build actions against
the newest snapshot, validate them by applying them to a copy, and create the next version
put-if-absent. Losing the race means catching up with the winners and trying again.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from mvtable.conf import TableProperties
from mvtable.errors import (
    CommitFilesMissingError,
    CommitStateUnknownError,
    ConcurrentLineageError,
    CorruptMetadataError,
    InvalidLineageTransitionError,
    TableNotFoundError,
    TooManyRetriesError,
    VersionNotFoundError,
)
from mvtable.storage import FileIO

from . import faults
from .actions import Action, Commit, files_named, parse_commit
from .checkpoint import checkpoint_bytes, parse_checkpoint, read_checkpoint_summary
from .checkpoint_cache import process_checkpoints
from .enums import Operation
from .snapshot import Snapshot, apply_commit, replay
from .summary import CommitSummary, TableSummary, parse_commit_summary

log = logging.getLogger("mvtable.lineage")

LOG_DIR = "_mvtable/log"
_EXISTS_SERIAL = 16  # a commit naming more files than this checks they exist in parallel


_COMMIT_NAME = re.compile(r"^([0-9]{20})\.json$", re.MULTILINE)
_CHECKPOINT_NAME = re.compile(r"^([0-9]{20})\.checkpoint\.parquet$", re.MULTILINE)


class _Versioned(Protocol):
    version: int


_Base = TypeVar("_Base", bound=_Versioned)


def commit_path(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def checkpoint_path(version: int) -> str:
    """Where the checkpoint of ``version`` is written (format 2, Parquet)."""
    return f"{LOG_DIR}/{version:020d}.checkpoint.parquet"


@dataclass(frozen=True)
class Listing:
    commits: list[int]
    checkpoints: list[int]

    @property
    def latest(self) -> int:
        return max(self.commits[-1] if self.commits else -1, self.checkpoints[-1] if self.checkpoints else -1)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 100
    base_delay_s: float = 0.01
    max_delay_s: float = 1.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


@dataclass(frozen=True)
class CommitResult:
    commit: Commit
    snapshot: Snapshot
    attempts: int


Builder = Callable[[Snapshot], Sequence[Action]]
CommitHook = Callable[[FileIO, Snapshot], None]
_commit_hooks: list[CommitHook] = []


def add_commit_hook(hook: CommitHook) -> None:
    """Call ``hook(io, snapshot)`` after every commit this process lands, with the new
    snapshot (the connector's ``icebergCompat`` export). Hooks run after the commit is
    durable: one that fails is logged and the commit stands."""
    if hook not in _commit_hooks:
        _commit_hooks.append(hook)


def _run_commit_hooks(io: FileIO, snapshot: Snapshot) -> None:
    for hook in _commit_hooks:
        try:
            hook(io, snapshot)
        except Exception:
            log.warning("after-commit hook %s failed for version %s; the commit stands", hook, snapshot.version, exc_info=True)


@functools.lru_cache(maxsize=1)
def _hostname() -> str:
    return socket.gethostname()  # ~1 ms on some hosts: once per process, not per commit


def writer_identity() -> str:
    return f"mvtable {_hostname()} pid {os.getpid()}"


def commit_fsync(snapshot: Snapshot) -> bool:
    """Whether the table's commit files are flushed to disk before they count (table
    property ``commitDurability``; a bad value, which the table refuses on create, falls
    back to the safe default)."""
    return TableProperties.tolerant(snapshot.properties)[0].commit_fsync


class CommitLog:
    def __init__(self, io: FileIO, *, retry: RetryPolicy | None = None, check_files: bool = True) -> None:
        """``check_files=False`` commits without checking that the files a commit names
        exist: for tests of the log alone, whose segments are never written."""
        self.io = io
        self.retry = retry or RetryPolicy()
        self.check_files = check_files

    # -- reading -------------------------------------------------------------------------
    def listing(self) -> Listing:
        """The versions the log holds. Only names are needed, so a store that can list
        names without per-file metadata (``list_names``; local disk skips a stat per file)
        is asked for those: a 10,000-version log lists in milliseconds."""
        list_names = getattr(self.io, "list_names", None)
        names = list_names(LOG_DIR) if list_names is not None else [info.name for info in self.io.list(LOG_DIR)]
        # One regex pass over all names instead of a Python loop per file. ASCII digits
        # only ("²"-style digits that int() refuses); anything else (temp files) is skipped.
        text = "\n".join(names)
        if names and text.count("\n") != len(names) - 1:  # a name with a newline must not forge lines
            text = "\n".join(n for n in names if "\n" not in n)
        commits = sorted(map(int, _COMMIT_NAME.findall(text)))
        checkpoints = sorted(map(int, _CHECKPOINT_NAME.findall(text)))
        return Listing(commits, checkpoints)

    def exists(self) -> bool:
        return self.listing().latest >= 0

    def latest_version(self) -> int:
        return self.listing().latest

    def read_commit(self, version: int) -> Commit:
        path, data = self._read_commit_file(version)
        return parse_commit(data, source=self._where(path), expected_version=version)

    def read_commit_summary(self, version: int) -> CommitSummary:
        """GC's view of commit ``version`` (``summary.parse_commit_summary``)."""
        path, data = self._read_commit_file(version)
        return parse_commit_summary(data, source=self._where(path), expected_version=version)

    def _read_commit_file(self, version: int) -> tuple[str, bytes]:
        path = commit_path(version)
        try:
            return path, self.io.read(path)
        except FileNotFoundError:
            raise VersionNotFoundError(f"version {version} is not in the log (it may have been garbage-collected)") from None

    def read_checkpoint(self, version: int) -> Snapshot:
        """The snapshot the checkpoint of ``version`` holds, through the process-wide
        cache of parsed checkpoints (it answers only for the same bytes)."""
        path, data = self._read_checkpoint_file(version)
        return process_checkpoints().load(
            self.io.uri,
            version,
            data,
            lambda raw: parse_checkpoint(raw, source=self._where(path), expected_version=version),
        )

    def read_checkpoint_summary(self, version: int, *, full_check: bool = False) -> TableSummary:
        """GC's view of the checkpoint of ``version`` (no segments, no statistics); see
        ``checkpoint.read_checkpoint_summary`` for ``full_check``."""
        path, data = self._read_checkpoint_file(version)
        return read_checkpoint_summary(data, source=self._where(path), expected_version=version, full_check=full_check)

    def _read_checkpoint_file(self, version: int) -> tuple[str, bytes]:
        """(path, content) of the checkpoint of ``version``; ``FileNotFoundError`` if none."""
        path = checkpoint_path(version)
        return path, self.io.read(path)

    def snapshot(self, version: int | None = None, *, listing: Listing | None = None) -> Snapshot:
        """The snapshot at ``version`` (newest when ``None``): newest checkpoint at or before
        it, plus the commits after the checkpoint."""
        listing = listing or self.listing()
        if listing.latest < 0:
            raise TableNotFoundError(f"no mvtable table at {self.io.uri} (no {LOG_DIR}/ files)")
        target = listing.latest if version is None else version
        if target < 0 or target > listing.latest:
            raise VersionNotFoundError(f"version {target} does not exist; the table's versions end at {listing.latest}")
        base = self.newest_base(target, listing, self.read_checkpoint)
        start = base.version + 1 if base else 0
        # a checkpoint just parsed is ours alone: advance it in place instead of copying it
        return replay((self.read_commit(v) for v in range(start, target + 1)), base=base, in_place=True)

    def newest_base(self, target: int, listing: Listing, read: Callable[[int], _Base]) -> _Base | None:
        """What version ``target`` is rebuilt from: the newest checkpoint at or before it
        that ``read`` can read (``None``: replay from version 0), once every commit after it
        is known to be there. The one fallback rule for snapshots and GC's summaries."""
        base: _Base | None = None
        skipped: Exception | None = None
        for cp in reversed([c for c in listing.checkpoints if c <= target]):
            try:
                base = read(cp)
                break
            except (CorruptMetadataError, FileNotFoundError) as exc:
                # A bad checkpoint only costs speed while an older one (or the whole log)
                # plus the commits after it can stand in for it.
                log.warning("ignoring unreadable checkpoint %s: %s", cp, exc)
                skipped = skipped or exc
        start = base.version + 1 if base is not None else 0
        commit_set = set(listing.commits)
        missing = [v for v in range(start, target + 1) if v not in commit_set]
        if missing:
            if skipped is not None:
                raise skipped
            raise VersionNotFoundError(
                f"version {target} can no longer be read: log files from version {missing[0]} were garbage-collected"
            )
        return base

    def catch_up(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` advanced to the newest version by replaying the commits after it.

        Found by reading forward from ``snapshot``, not by listing the log: a listing grows
        with every version retention keeps (a week of one commit a second is 600,000 names,
        and on object storage 600 list requests), while nothing new costs one failed read.
        Commits are consecutive, and GC removes them oldest first, so while the commit of
        ``snapshot`` itself is there, the first missing one after it is the end of the log;
        once GC has cut past it, the snapshot is read afresh."""
        commits = []
        version = snapshot.version + 1
        while True:
            try:
                commits.append(self.read_commit(version))
            except VersionNotFoundError:
                break
            version += 1
        if commits:
            return replay(commits, base=snapshot)
        if snapshot.version < 0 or self.io.exists(commit_path(snapshot.version)):
            return snapshot
        return self.snapshot()

    def version_at(self, timestamp_ms: int) -> int:
        """Newest version committed at or before ``timestamp_ms`` (``timestampAsOf``)."""
        history = self.snapshot().history
        eligible = [h.version for h in history if h.timestamp_ms <= timestamp_ms]
        if not eligible:
            first = history[0].timestamp_ms if history else None
            raise VersionNotFoundError(f"no version at or before {timestamp_ms} ms; the first commit is at {first} ms")
        return max(eligible)

    # -- writing -------------------------------------------------------------------------
    def commit(
        self,
        *,
        read: Snapshot,
        operation: Operation,
        build: Builder,
        parameters: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        metrics: Mapping[str, float | int] | Callable[[], Mapping[str, float | int]] | None = None,
        checkpoint_interval: int | None = None,
        current: Snapshot | None = None,
    ) -> CommitResult:
        """Create the next version with the actions ``build`` makes against the newest
        snapshot. ``build`` raises a ``CommitConflictError`` when what was read no longer
        holds; validation failures that only appear on a newer snapshot are conflicts too.
        ``current`` (a newer snapshot than ``read``, if the caller has one) saves a lost race.
        ``metrics`` and ``parameters`` may be functions, called after ``build`` so they can
        report what the final attempt did (e.g. which dead push it cleaned up)."""
        txn = uuid.uuid4().hex
        current = current if current is not None else read
        uncertain = False  # a put of ours may have landed although the store said it failed
        synced: set[str] = set()  # files flushed by an earlier attempt
        for attempt in range(1, self.retry.max_attempts + 1):
            actions = tuple(build(current))
            candidate = Commit(
                version=current.version + 1,
                read_version=read.version,
                timestamp_ms=max(int(time.time() * 1000), current.timestamp_ms + 1),
                operation=operation,
                parameters={**((parameters() if callable(parameters) else parameters) or {}), "txn": txn},
                writer=writer_identity(),
                metrics=dict((metrics() if callable(metrics) else metrics) or {}),
                actions=actions,
            )
            trial = current.copy()
            try:
                apply_commit(trial, candidate)
            except InvalidLineageTransitionError as exc:
                if current.version != read.version:
                    raise ConcurrentLineageError(f"{exc} (after concurrent commits up to version {current.version})") from exc
                raise
            self._require_files(candidate)
            durable = commit_fsync(trial)
            if durable:  # what the commit names reaches the disk before the commit does
                named = [p for p in files_named(candidate.actions) if p not in synced]
                if named:
                    self.io.sync(named)
                    synced.update(named)
            faults.point(f"commit.{operation}.before_put")
            mine, unknown = self._put(candidate, txn, durable=durable)
            uncertain = uncertain or unknown
            if mine is not None and mine is candidate and self._landed_in_hole(candidate):
                current = self.snapshot()  # we were behind a log cut: start from the newest
                continue
            if mine is not None:
                if mine is not candidate:  # an earlier attempt of ours landed late, at this version
                    trial = current.copy()
                    apply_commit(trial, mine)
                faults.point(f"commit.{operation}.after_put")
                self._maybe_checkpoint(trial, checkpoint_interval)
                _run_commit_hooks(self.io, trial)
                return CommitResult(mine, trial, attempt)
            time.sleep(self.retry.delay(attempt))
            before = current.version
            current = self.catch_up(current)
            if uncertain:
                for v in range(before + 1, current.version + 1):
                    winner = self.read_commit(v)
                    if winner.parameters.get("txn") == txn:
                        landed = self.snapshot(v)
                        _run_commit_hooks(self.io, landed)
                        return CommitResult(winner, landed, attempt)
        raise TooManyRetriesError(f"gave up after {self.retry.max_attempts} attempts to commit {operation}")

    def _require_files(self, commit: Commit) -> None:
        """Refuse a commit naming a file that is gone (``CommitFilesMissingError``): its new
        segments and DV files, looked up one by one (in parallel when there are many), at
        every attempt. What keeps them there from this check to the put is the writer's
        write intent: vacuum never takes a file a live intent covers."""
        paths = files_named(commit.actions) if self.check_files else []
        if not paths:
            return
        if len(paths) <= _EXISTS_SERIAL:
            present = [self.io.exists(p) for p in paths]
        else:
            with ThreadPoolExecutor(max_workers=_EXISTS_SERIAL, thread_name_prefix="mvtable-commit-check") as pool:
                present = list(pool.map(self.io.exists, paths))
        missing = [p for p, there in zip(paths, present) if not there]
        if missing:
            raise CommitFilesMissingError(
                f"the {commit.operation} commit was not made: {len(missing)} file(s) it would name are gone "
                f"(first: {self._where(missing[0])}); vacuum removed them (an orphanGracePeriod shorter than the write, "
                "forced) or they were deleted by hand. Nothing was committed: run the write again",
                missing,
            )

    def _put(self, commit: Commit, txn: str, *, durable: bool) -> tuple[Commit | None, bool]:
        """(our commit at ``commit.version`` if it landed else ``None``, whether the store
        left the outcome open)."""
        path = commit_path(commit.version)
        try:
            return (commit if self.io.put_if_absent(path, commit.to_json_bytes(), durable=durable) else None), False
        except CommitStateUnknownError as exc:
            # Look before giving up: the file is either ours, someone else's, or absent.
            try:
                existing = self.read_commit(commit.version)
            except VersionNotFoundError:
                # Absent (or still in flight): retry through the loop, which from now on
                # recognises our txn id in whatever lands.
                return None, True
            except Exception as read_exc:
                raise CommitStateUnknownError(f"{exc}; reading {path} back failed too: {read_exc}") from read_exc
            return (existing if existing.parameters.get("txn") == txn else None), True

    def _landed_in_hole(self, commit: Commit) -> bool:
        """Whether our put succeeded only because GC had removed an older commit file of the
        same version (our snapshot was behind a log cut). GC deletes the log oldest-first, so
        while our parent's file exists there is no hole; otherwise the checkpoint covering
        our version tells whose commit that version really was. Ours is then withdrawn."""
        v = commit.version
        if v == 0 or self.io.exists(commit_path(v - 1)):
            return False
        covering = [c for c in self.listing().checkpoints if c >= v]
        if not covering:
            return False
        items = self.read_checkpoint(min(covering)).history
        theirs = next((h for h in items if h.version == v), None)
        if theirs is None:
            # vacuum trims the history of versions whose log files GC removed: a version
            # below the checkpoint's history was committed, and long since collected
            if not items or v >= items[0].version:
                return False
        elif theirs.timestamp_ms == commit.timestamp_ms and theirs.operation == commit.operation:
            return False
        log.warning("commit %s landed behind a log cut (checkpoint %s); withdrawing it and retrying", v, min(covering))
        self.io.delete([commit_path(v)])
        return True

    def _maybe_checkpoint(self, snapshot: Snapshot, interval: int | None) -> None:
        if interval:
            every = interval
        else:  # the commit has landed: a bad property must not make it look failed
            props, problems = TableProperties.tolerant(snapshot.properties)
            if "checkpointInterval" in problems:
                log.warning("%s", problems["checkpointInterval"])
            every = props.checkpointInterval
        if every > 0 and snapshot.version > 0 and snapshot.version % every == 0:
            faults.point("checkpoint.before_write")
            self.write_checkpoint(snapshot)
            faults.point("checkpoint.after_write")

    def write_checkpoint(self, snapshot: Snapshot) -> None:
        try:
            self.io.put_if_absent(checkpoint_path(snapshot.version), checkpoint_bytes(snapshot), durable=commit_fsync(snapshot))
        except Exception as exc:  # a checkpoint is an optimisation: never fail a landed commit
            log.warning("could not write checkpoint %s: %s", snapshot.version, exc)

    def _where(self, path: str) -> str:
        return f"{self.io.uri}/{path}"
