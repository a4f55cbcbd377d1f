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
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from mvtable import faults
from mvtable.conf import TableProperties
from mvtable.errors import (
    CommitFilesMissingError,
    CommitStateUnknownError,
    ConcurrentLineageError,
    ConcurrentSchemaChangeError,
    CorruptCommitError,
    CorruptMetadataError,
    InvalidLineageTransitionError,
    LogGapError,
    StrayLogFileError,
    TableNotFoundError,
    TooManyRetriesError,
    VersionNotFoundError,
)
from mvtable.storage import FileIO

from .actions import Action, AddSegment, Commit, MetadataAction, files_named, parse_commit
from .checkpoint import checkpoint_bytes, parse_checkpoint, read_checkpoint_summary
from .checkpoint_cache import process_checkpoints
from .enums import Operation
from .log_listing import Listing as Listing  # re-exported: where callers have always found it
from .log_listing import MissingKind, explain_missing, missing_commits, runs, unsettled_runs
from .schema_ids import schema_race
from .snapshot import Snapshot, apply_commit, replay
from .snapshot_cache import commit_digest, process_snapshots
from .summary import CommitSummary, TableSummary, parse_commit_summary

logger = logging.getLogger("mvtable.lineage")

LOG_DIR = "_mvtable/log"
# how long a read waits between tries for a commit a listing showed (``_read_listed_commit``)
_LISTED_READ_PAUSES = (0.02, 0.1, 0.3)
# Listings taken of a log whose missing versions GC cannot explain before the versions
# still missing are read directly: a listing that raced a writer is whole the next time
# (every file that existed when it began is in it), so the second look settles a race.
LISTING_LOOKS = 2
# Snapshots built on a fresh listing when a commit the last one showed was collected meanwhile
_SNAPSHOT_LOOKS = 3
_EXISTS_SERIAL = 16  # a commit naming more files than this checks they exist in parallel


_COMMIT_NAME = re.compile(r"^([0-9]{20})\.json$", re.MULTILINE)
_CHECKPOINT_NAME = re.compile(r"^([0-9]{20})\.checkpoint\.parquet$", re.MULTILINE)


class _Versioned(Protocol):
    version: int


_Base = TypeVar("_Base", bound=_Versioned)


def commit_path(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


# a commit with this many actions is followed by a checkpoint (see CommitLog._maybe_checkpoint)
BIG_COMMIT_ACTIONS = 1000


def checkpoint_path(version: int) -> str:
    """Where the checkpoint of ``version`` is written (format 2, Parquet)."""
    return f"{LOG_DIR}/{version:020d}.checkpoint.parquet"


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


@functools.lru_cache(maxsize=1)
def _hostname() -> str:
    return socket.gethostname()  # ~1 ms on some hosts: once per process, not per commit


def writer_identity() -> str:
    return f"mvtable {_hostname()} pid {os.getpid()}"


def commit_fsync(snapshot: Snapshot) -> bool:
    """Whether the table's commit files are flushed to disk before they count.

    Table property ``commitDurability``; a bad value, which the table refuses on create,
    falls back to the safe default.
    """
    return TableProperties.tolerant(snapshot.properties)[0].commit_fsync


AfterCommit = Callable[["CommitLog", CommitResult], None]


class CommitLog:
    """A table's log: reading it and landing commits on it.

    ``after_commit``, when given, is called with the log and the result of every commit
    this log lands, once the commit is durable: whoever opens the log decides what follows
    its commits (the connector passes its post-commit pipeline), and the lineage knows
    nothing of it. It should not raise: the commit stands whatever it does.
    ``check_files=False`` commits without checking that the files a commit names exist:
    for tests of the log alone, whose segments are never written."""

    def __init__(
        self,
        io: FileIO,
        *,
        retry: RetryPolicy | None = None,
        after_commit: AfterCommit | None = None,
        check_files: bool = True,
    ) -> None:
        self.io = io
        self.retry = retry or RetryPolicy()
        self.after_commit = after_commit
        self.check_files = check_files

    # -- reading -------------------------------------------------------------------------
    def listing(self) -> Listing:
        """The versions the log holds, settled.

        A listing whose missing versions GC cannot
        explain (``log_listing.unsettled_runs``: it raced a writer, or files are lost) is
        taken again, and what is still missing then is read forward directly from the
        first missing version. Versions still absent after that are ``Listing.gaps``.
        A log GC alone has cut costs one listing, as before.
        """
        listing = self.raw_listing()
        for _ in range(LISTING_LOOKS - 1):
            unsettled = unsettled_runs(listing)
            if not unsettled:
                return listing
            logger.debug(
                "listing of %s/%s: versions %s missing, which GC cannot explain; listing again", self.io.uri, LOG_DIR, unsettled
            )
            listing = self.raw_listing()
        unsettled = unsettled_runs(listing)
        return self._read_forward(listing, unsettled) if unsettled else listing

    def _read_forward(self, listing: Listing, missing: Sequence[tuple[int, int]]) -> Listing:
        """``listing`` with the commits of the ``missing`` runs that a direct read finds.

        Each run is read forward from its first version (commits are created in order, so
        the first absent one ends the run); what stays absent is ``Listing.gaps``.
        """
        found: list[int] = []
        gaps: list[tuple[int, int]] = []
        for first, last in missing:
            v = first
            while v <= last and self.io.exists(commit_path(v)):
                found.append(v)
                v += 1
            if v <= last:
                gaps.append((v, last))
        if found:
            logger.info("log listing of %s missed commit(s) %s; read directly", self.io.uri, runs(found))
        return Listing(sorted({*listing.commits, *found}), listing.checkpoints, tuple(gaps))

    def raw_listing(self) -> Listing:
        """One listing of the log's names as the store returns it, unsettled (``listing`` settles it).

        Only names are needed, so a store that can list names without per-file metadata
        (``list_names``; local disk skips a stat per file) is asked for those.
        """
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
        return self.raw_listing().latest >= 0

    def latest_version(self) -> int:
        return self.listing().latest

    def read_commit(self, version: int) -> Commit:
        return self._parsed_commit(version)[0]

    def _parsed_commit(self, version: int) -> tuple[Commit, bytes]:
        """Commit ``version`` and the bytes of its file."""
        path, data = self._read_commit_file(version)
        try:
            return parse_commit(data, source=self._where(path), expected_version=version), data
        except CorruptMetadataError as exc:
            raise _undecodable(exc, version) from None

    def read_commit_summary(self, version: int) -> CommitSummary:
        """GC's view of commit ``version`` (``summary.parse_commit_summary``)."""
        path, data = self._read_commit_file(version)
        try:
            return parse_commit_summary(data, source=self._where(path), expected_version=version)
        except CorruptMetadataError as exc:
            raise _undecodable(exc, version) from None

    def _read_commit_file(self, version: int) -> tuple[str, bytes]:
        path = commit_path(version)
        try:
            return path, self.io.read(path)
        except FileNotFoundError:
            raise VersionNotFoundError(
                f"version {version} is not in the log: {path} does not exist (not written yet, or garbage-collected)"
            ) from None
        except IsADirectoryError:
            raise _directory_in_log(self._where(path), f"commit {version}") from None

    def read_checkpoint(self, version: int, *, shared: bool = False) -> Snapshot:
        """The snapshot the checkpoint of ``version`` holds.

        Read through the process-wide cache of parsed checkpoints, which answers only for
        the same bytes. ``shared``: the cached object itself, which the caller must never
        change (``CheckpointCache.load``).
        """
        path, data = self._read_checkpoint_file(version)
        return process_checkpoints().load(
            self.io.uri,
            version,
            data,
            lambda raw: parse_checkpoint(raw, source=self._where(path), expected_version=version),
            shared=shared,
        )

    def read_checkpoint_summary(self, version: int, *, full_check: bool = False) -> TableSummary:
        """GC's view of the checkpoint of ``version``: no segments, no statistics.

        See ``checkpoint.read_checkpoint_summary`` for ``full_check``.
        """
        path, data = self._read_checkpoint_file(version)
        return read_checkpoint_summary(data, source=self._where(path), expected_version=version, full_check=full_check)

    def _read_checkpoint_file(self, version: int) -> tuple[str, bytes]:
        """(path, content) of the checkpoint of ``version``; ``FileNotFoundError`` if none."""
        path = checkpoint_path(version)
        try:
            return path, self.io.read(path)
        except IsADirectoryError:  # a CorruptMetadataError: snapshots fall back to an older checkpoint
            raise _directory_in_log(self._where(path), f"checkpoint {version}") from None

    def snapshot(self, version: int | None = None, *, listing: Listing | None = None, shared: bool = False) -> Snapshot:
        """The snapshot at ``version`` (newest when ``None``).

        Built from the newest checkpoint at or before it, or from the snapshot this process
        built of the table last when no checkpoint is nearer (``snapshot_cache``), plus the
        commits after it. ``shared``: for a caller that only reads the snapshot and never
        changes it; it may then be a cached snapshot itself instead of a copy. A commit the
        listing showed that GC removes meanwhile makes it list the log again.

        Raises:
            TableNotFoundError: the log holds no version.
            VersionNotFoundError: ``version`` is past the newest, or GC removed what it needs.
            LogGapError: commit files it needs are missing while later ones are there.
            StrayLogFileError: the newest name in the log is not a commit of this table.
            CorruptCommitError: a commit it needs cannot be decoded."""
        looks = _SNAPSHOT_LOOKS
        while True:
            try:
                return self._snapshot(version, listing or self.listing(), shared=shared)
            except VersionNotFoundError:
                # A commit the listing showed can be collected before it is read: writers went on,
                # a newer checkpoint landed and GC cut the log down to it. Listed again, the log
                # shows that checkpoint (or, for an old version, why it can no longer be read).
                looks -= 1
                if looks == 0:
                    raise
                logger.debug("a commit of %s/%s went while the snapshot was built; listing again", self.io.uri, LOG_DIR)
                listing = None

    def _snapshot(self, version: int | None, listing: Listing, *, shared: bool) -> Snapshot:
        """``snapshot`` on one listing of the log."""
        if listing.latest < 0:
            raise TableNotFoundError(f"no mvtable table at {self.io.uri} (no {LOG_DIR}/ files)")
        target = listing.latest if version is None else version
        if target < 0 or target > listing.latest:
            raise VersionNotFoundError(f"version {target} does not exist; the table's versions end at {listing.latest}")
        recent = self._recent(target, listing)
        base: Snapshot | None
        if recent is not None:
            if recent.version == target:
                return recent if shared else recent.copy()
            base, in_place = recent, False
        elif shared:
            base = self.newest_base(target, listing, lambda v: self.read_checkpoint(v, shared=True))
            if base is not None and base.version == target:
                return base
            in_place = False
        else:
            # a checkpoint just parsed is ours alone: advance it in place instead of copying it
            base, in_place = self.newest_base(target, listing, self.read_checkpoint), True
        start = base.version + 1 if base else 0
        last: list[bytes] = []  # the newest commit file's bytes: what the kept snapshot is checked by

        def commits() -> Iterator[Commit]:
            for v in range(start, target + 1):
                commit, data = self._read_listed_commit(v)
                if v == target:
                    last.append(data)
                yield commit

        snapshot = replay(commits(), base=base, in_place=in_place)
        if last:  # (a snapshot that is a checkpoint has the checkpoint cache)
            self._keep(snapshot, last[0], shared=shared)
        return snapshot

    def _recent(self, target: int, listing: Listing) -> Snapshot | None:
        """The snapshot this process last built of this table, if ``target`` is best rebuilt from it.

        That is when it is not newer than ``target``, no checkpoint lies between the two,
        every commit between is listed, and its own commit file still holds the bytes it
        was built from (``snapshot_cache``: the same history, not a table made again)."""
        cache = process_snapshots()
        found = cache.get(self.io.uri)
        if found is None:
            return None
        recent, digest = found
        if recent.version > target or any(recent.version < c <= target for c in listing.checkpoints):
            return None
        if missing_commits(listing, recent.version + 1, target):
            return None  # the rules of newest_base decide what a missing commit means
        try:
            _, data = self._read_commit_file(recent.version)
        except (VersionNotFoundError, StrayLogFileError):
            return None
        if commit_digest(data) != digest:
            cache.forget(self.io.uri)
            return None
        cache.hit()
        return recent

    def _keep(self, snapshot: Snapshot, commit_data: bytes, *, shared: bool) -> None:
        """Keep ``snapshot`` for the next open in this process, unless a newer one is kept.

        A caller that did not ask for a shared snapshot may change it: the cache gets a copy."""
        cache = process_snapshots()
        found = cache.get(self.io.uri)
        if found is not None and found[0].version >= snapshot.version:
            return
        cache.keep(self.io.uri, snapshot if shared else snapshot.copy(), commit_digest(commit_data))

    def _read_listed_commit(self, version: int) -> tuple[Commit, bytes]:
        """Commit ``version``, which a listing showed: read again a few times if the store says it is not there.

        An object store may list a fresh object a moment before a GET finds it (SeaweedFS
        does, under load); the listing is the proof that it was written. Only if it stays
        missing (GC took it since) is that the answer. With the commit, the file's bytes."""
        for pause in _LISTED_READ_PAUSES:
            try:
                return self._parsed_commit(version)
            except VersionNotFoundError:
                time.sleep(pause)
        return self._parsed_commit(version)

    def newest_base(self, target: int, listing: Listing, read: Callable[[int], _Base]) -> _Base | None:
        """What version ``target`` is rebuilt from; ``None``: replay from version 0.

        The newest checkpoint at or before it that ``read`` can read, once every commit after
        it is known to be there. The one fallback rule for snapshots and GC's summaries.

        A commit missing from ``listing`` is never taken for collected on the listing's
        word: while a direct read finds it, the log is listed again; only a file that is
        absent and that GC can have removed (``log_listing.explain_missing``) makes the
        version collected. Anything else is a gap, which the error names."""
        base: _Base | None = None
        skipped: Exception | None = None
        missing: list[int] = []
        for look in range(LISTING_LOOKS):
            base, skipped = self._readable_checkpoint(target, listing, read)
            start = base.version + 1 if base is not None else 0
            missing = missing_commits(listing, start, target)
            if not missing:
                return base
            if look == LISTING_LOOKS - 1 or not any(self.io.exists(commit_path(v)) for v in {missing[0], missing[-1]}):
                break
            logger.debug(
                "listing of %s/%s missed commit(s) of %s..%s; listing again", self.io.uri, LOG_DIR, missing[0], missing[-1]
            )
            # the listing raced a writer: what it missed is in the next one, or read directly
            listing = self.listing()
            listing = self._read_forward(listing, runs(missing_commits(listing, start, target)))
        if skipped is not None:
            raise skipped
        if explain_missing(listing, missing) is MissingKind.COLLECTED:
            first = next((c for c in listing.checkpoints if c >= missing[-1]), None)
            raise VersionNotFoundError(
                f"version {target} can no longer be read: log files from version {missing[0]} were garbage-collected "
                f"(the log now starts at checkpoint {first}; history is kept for versionRetentionPeriod)"
            )
        raise self._gap_error(listing, missing)

    def _readable_checkpoint(
        self, target: int, listing: Listing, read: Callable[[int], _Base]
    ) -> tuple[_Base | None, Exception | None]:
        """The newest checkpoint at or before ``target`` that ``read`` can read.

        With it, the error of the first newer one it could not read, for the caller to report.
        """
        skipped: Exception | None = None
        for cp in reversed([c for c in listing.checkpoints if c <= target]):
            try:
                return read(cp), skipped
            except (CorruptMetadataError, FileNotFoundError) as exc:
                # A bad checkpoint only costs speed while an older one (or the whole log)
                # plus the commits after it can stand in for it.
                logger.warning("ignoring unreadable checkpoint %s: %s", cp, exc)
                skipped = skipped or exc
        return None, skipped

    def _decode_problem(self, version: int) -> str | None:
        """Why the commit file of ``version`` is not a commit of this table (``None``: it is)."""
        path = commit_path(version)
        try:
            data = self.io.read(path)
        except IsADirectoryError:
            return "a directory"
        except FileNotFoundError:
            return None  # gone since the listing: the gap is what there is to name
        try:
            parse_commit(data, source=self._where(path), expected_version=version)
        except CorruptMetadataError as exc:
            return exc.problem
        return None

    def _gap_error(self, listing: Listing, missing: Sequence[int]) -> CorruptMetadataError:
        """The error for commits missing in a way GC never leaves them.

        A stray file after the end of the log when the first commit after the gap cannot be
        read, else the gap.
        """
        first, last = runs(missing)[0]
        after = next((c for c in listing.commits if c > last), None)
        readable = (
            f"versions up to {first - 1} can still be read (version={first - 1})" if first > 0 else "no version can be read"
        )
        if after is not None and (problem := self._decode_problem(after)) is not None:
            return StrayLogFileError(
                self._where(commit_path(after)),
                f"named like commit {after}, but it is not a commit of this table ({problem}) and commits "
                f"{first}..{last} before it do not exist: the log ends at version {first - 1}. Move the file "
                f"out of {LOG_DIR}/ (keep a copy if unsure); {readable}",
            )
        later = f"while commit {after} is there" if after is not None else "with no checkpoint that stands in for them"
        return LogGapError(
            self._where(commit_path(first)),
            f"commit files of versions {first}..{last} are missing {later}. Garbage collection never leaves such a gap "
            f"(it removes the oldest commits first, down to a checkpoint): the files were lost or deleted by hand. "
            f"Restore them from a backup; {readable}",
            missing=(first, last),
        )

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
        """Create the next version with the actions ``build`` makes against the newest snapshot.

        ``build`` raises a ``CommitConflictError`` when what was read no longer
        holds; validation failures that only appear on a newer snapshot are conflicts too.
        ``current`` (a newer snapshot than ``read``, if the caller has one) saves a lost race.
        ``metrics`` and ``parameters`` may be functions, called after ``build`` so they can
        report what the final attempt did (e.g. which dead push it cleaned up).

        Every commit carries a transaction id (``parameters["txn"]``). When a put of ours
        may have landed although the store said otherwise (a lost answer, a timeout, a 5xx
        after sending), whatever ends the loop first reads the log for that id: ours there
        means success, exactly once.

        Raises:
            CommitConflictError: what ``build`` read no longer holds; nothing of ours landed.
            CommitStateUnknownError: the store never said whether a put of ours landed; it
                names the txn and the first version it may hold (see ``find_commit``).
        """
        return self._landed(
            self._commit(
                read=read,
                operation=operation,
                build=build,
                parameters=parameters,
                metrics=metrics,
                checkpoint_interval=checkpoint_interval,
                current=current,
            )
        )

    def _commit(
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
        """The attempts of ``commit``: build, check, put, catch up; settle an uncertain put.

        Each step is a method of its own; what the attempts share is one ``_Attempts``.

        Raises:
            CommitConflictError: what ``build`` read no longer holds; nothing of ours landed.
            CommitStateUnknownError: the store never said whether a put of ours landed.
        """
        state = _Attempts(txn=uuid.uuid4().hex)
        current = current if current is not None else read
        try:
            for attempt in range(1, self.retry.max_attempts + 1):
                candidate, trial = _candidate(
                    read, current, txn=state.txn, operation=operation, build=build, parameters=parameters, metrics=metrics
                )
                self._require_files(candidate)
                durable = self._sync_named(candidate, trial, state)
                faults.point(f"commit.{operation}.before_put")
                mine = self._put_attempt(candidate, state, durable=durable)
                if mine is candidate and self._landed_in_hole(candidate):
                    state.pending = False  # withdrawn
                    current = self.snapshot()  # we were behind a log cut: start from the newest
                    continue
                if mine is not None:
                    return self._won(
                        mine, candidate, current, trial, attempt, operation=operation, checkpoint_interval=checkpoint_interval
                    )
                current, ours = self._catch_up_after_loss(current, state, attempt)
                if ours is not None:
                    return ours
            raise TooManyRetriesError(f"gave up after {self.retry.max_attempts} attempts to commit {operation}")
        except Exception as exc:
            if not state.may_have_landed:
                raise  # every put of ours was answered: none of them landed
            settled = self._settle(state.txn, state.tried, exc)
            if settled is None:
                raise
            return settled

    def _sync_named(self, candidate: Commit, trial: Snapshot, state: _Attempts) -> bool:
        """Flush the files ``candidate`` names, unless an earlier attempt did; whether the put is durable.

        With ``commitFsync`` what the commit names reaches the disk before the commit does.
        """
        durable = commit_fsync(trial)
        if durable:
            named = [p for p in files_named(candidate.actions) if p not in state.synced]
            if named:
                self.io.sync(named)
                state.synced.update(named)
        return durable

    def _put_attempt(self, candidate: Commit, state: _Attempts, *, durable: bool) -> Commit | None:
        """Put ``candidate``; ours at its version if it landed, else ``None``.

        ``state`` records the put as in flight before it is sent, so that an error from here
        on is settled by reading the log; a put the store refused outright is not in flight.

        Raises:
            CommitStateUnknownError: the store left the outcome open and reading it back failed.
        """
        state.tried.append(candidate.version)
        state.pending = True
        try:
            mine, unknown = self._put(candidate, state.txn, durable=durable)
        except CommitStateUnknownError:
            raise
        except Exception:
            state.pending = False  # the store refused the put (s3: 403, no bucket; disk: an OSError)
            raise
        state.uncertain = state.uncertain or unknown
        state.pending = mine is not None
        return mine

    def _won(
        self,
        mine: Commit,
        candidate: Commit,
        current: Snapshot,
        trial: Snapshot,
        attempt: int,
        *,
        operation: Operation,
        checkpoint_interval: int | None,
    ) -> CommitResult:
        """The result of a put of ours that landed, checkpointed when it is time.

        ``mine`` is not ``candidate`` when an earlier attempt of ours landed late at this version.
        """
        if mine is not candidate:
            trial = current.copy()
            apply_commit(trial, mine)
        faults.point(f"commit.{operation}.after_put")
        self._maybe_checkpoint(trial, checkpoint_interval, actions=len(mine.actions))
        return CommitResult(mine, trial, attempt)

    def _catch_up_after_loss(self, current: Snapshot, state: _Attempts, attempt: int) -> tuple[Snapshot, CommitResult | None]:
        """Wait, then catch up to the log's newest snapshot; with it, ours if it landed after all.

        Only an uncertain put of ours can be among the new commits, so only then are they read.
        """
        time.sleep(self.retry.delay(attempt))
        before = current.version
        current = self.catch_up(current)
        if state.uncertain:
            for v in range(before + 1, current.version + 1):
                winner = self.read_commit(v)
                if winner.parameters.get("txn") == state.txn:
                    return current, CommitResult(winner, self.snapshot(v), attempt)
        return current, None

    def _settle(self, txn: str, tried: list[int], exc: Exception) -> CommitResult | None:
        """Read the log for our ``txn`` after ``exc`` ended a commit whose puts may have landed.

        ``tried`` are the versions the puts were sent for. Ours → the commit stands
        (returned); every version we tried taken by someone else → nothing of ours can land
        (``None``: re-raise ``exc``).

        Raises:
            CommitStateUnknownError: neither is known yet; it names the txn and the version.
        """
        first, last = min(tried), max(tried)
        try:
            found = self.find_commit(txn, since=first)
            if found is not None:
                return CommitResult(found, self.snapshot(found.version), len(tried))
            latest = self.latest_version()
        except Exception as read_exc:
            raise CommitStateUnknownError(
                f"cannot tell whether commit {txn} landed (at version {first} or later): {exc}; "
                f"reading the log failed too: {read_exc}. Look it up with CommitLog.find_commit(txn, since={first})",
                version=first,
                txn=txn,
            ) from exc
        if latest >= last:
            return None
        raise CommitStateUnknownError(
            f"cannot tell whether commit {txn} landed: {exc}; the log ends at version {latest}, before version {last} "
            f"that a put of ours may still create. Look it up with CommitLog.find_commit(txn, since={first})",
            version=first,
            txn=txn,
        ) from exc

    def find_commit(self, txn: str, *, since: int = 0) -> Commit | None:
        """The commit whose transaction id (``parameters["txn"]``) is ``txn``, at ``since`` or later.

        ``None`` if the log holds none. How the writer of a commit that
        ended in ``CommitStateUnknownError`` learns whether it landed (the error carries
        both). ``None`` is final once the log has grown past every version the writer tried
        (conditional puts: a version someone else holds cannot become ours).

        Raises:
            VersionNotFoundError: a commit file from ``since`` on was garbage-collected.
        """
        listing = self.listing()
        for v in range(max(since, 0), listing.latest + 1):
            commit = self.read_commit(v)
            if commit.parameters.get("txn") == txn:
                return commit
        return None

    def _landed(self, result: CommitResult) -> CommitResult:
        """``result``, once the log's ``after_commit`` has seen it."""
        if self.after_commit is not None:
            self.after_commit(self, result)
        return result

    def _require_files(self, commit: Commit) -> None:
        """Refuse a commit naming a file that is gone.

        The files are its new segments and DV files, looked up one by one (in parallel when there are many), at
        every attempt. What keeps them there from this check to the put is the writer's
        write intent: vacuum never takes a file a live intent covers.

        Raises:
            CommitFilesMissingError: a file the commit names is gone.
        """
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
        """Put ``commit``: ours at its version if it landed else ``None``, and whether the store left that open.

        An uncertain answer is looked up before giving up: the file is ours, someone else's, or absent.
        """
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
                raise CommitStateUnknownError(
                    f"{exc}; reading {path} back failed too: {read_exc}", version=commit.version, txn=txn
                ) from read_exc
            return (existing if existing.parameters.get("txn") == txn else None), True

    def _landed_in_hole(self, commit: Commit) -> bool:
        """Whether our put succeeded only because GC had removed an older commit file of the same version.

        Our snapshot was behind a log cut. GC deletes the log oldest-first, so
        while our parent's file exists there is no hole; otherwise the checkpoint covering
        our version tells whose commit that version really was. Ours is then withdrawn.
        """
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
        logger.warning("commit %s landed behind a log cut (checkpoint %s); withdrawing it and retrying", v, min(covering))
        self.io.delete([commit_path(v)])
        return True

    def _maybe_checkpoint(self, snapshot: Snapshot, interval: int | None, *, actions: int = 0) -> None:
        """Checkpoint every ``checkpointInterval`` versions, and after a commit of ``BIG_COMMIT_ACTIONS`` actions or more.

        Every reader parses a commit action by action, with each field validated, and a checkpoint
        in column batches: a commit naming thousands of segments (a large partitioned append, a
        push replacing many) costs each later open far more than its checkpoint costs once."""
        if interval:
            every = interval
        else:  # the commit has landed: a bad property must not make it look failed
            props, problems = TableProperties.tolerant(snapshot.properties)
            if "checkpointInterval" in problems:
                logger.warning("%s", problems["checkpointInterval"])
            every = props.checkpoint_interval
        due = every > 0 and (snapshot.version % every == 0 or actions >= BIG_COMMIT_ACTIONS)
        if snapshot.version > 0 and due:
            faults.point("checkpoint.before_write")
            self.write_checkpoint(snapshot)
            faults.point("checkpoint.after_write")

    def write_checkpoint(self, snapshot: Snapshot) -> None:
        try:
            self.io.put_if_absent(checkpoint_path(snapshot.version), checkpoint_bytes(snapshot), durable=commit_fsync(snapshot))
        except Exception as exc:  # a checkpoint is an optimisation: never fail a landed commit
            logger.warning("could not write checkpoint %s: %s", snapshot.version, exc)

    def _where(self, path: str) -> str:
        return f"{self.io.uri}/{path}"


@dataclass
class _Attempts:
    """What the attempts of one commit have sent so far.

    After an error it tells whether a put of ours may have landed, which only reading the
    log for ``txn`` can settle.
    """

    txn: str
    uncertain: bool = False  # a put of ours may have landed although the store said it failed
    pending: bool = False  # a put of ours is in flight, or landed and not yet returned
    tried: list[int] = field(default_factory=list)  # versions a put of ours was sent for
    synced: set[str] = field(default_factory=set)  # files flushed by an earlier attempt

    @property
    def may_have_landed(self) -> bool:
        """Whether a put of ours may be in the log although no answer said so."""
        return self.uncertain or self.pending


def _candidate(
    read: Snapshot,
    current: Snapshot,
    *,
    txn: str,
    operation: Operation,
    build: Builder,
    parameters: dict[str, Any] | Callable[[], dict[str, Any]] | None,
    metrics: Mapping[str, float | int] | Callable[[], Mapping[str, float | int]] | None,
) -> tuple[Commit, Snapshot]:
    """The commit ``build`` makes on ``current``, and the snapshot it leads to.

    Applying it here checks the lineage transitions before anything is put; one that fails
    only on a snapshot newer than ``read`` is a conflict with the commits in between.

    Raises:
        ConcurrentLineageError: the transition fails because of commits after ``read``.
        ConcurrentSchemaChangeError: the schema changed after ``read`` in a way this commit cannot follow.
        InvalidLineageTransitionError: the transition fails on what was read.
    """
    actions = tuple(build(current))  # first: parameters and metrics may report what it did
    if read.exists:
        race = schema_race(
            read.schema_id,
            current.schema_id,
            changes_schema=any(isinstance(a, MetadataAction) and a.table_schema != current.table_schema for a in actions),
            adds_files=any(isinstance(a, AddSegment) for a in actions),
            break_version=current.schema_break_version,
            read_version=read.version,
        )
        if race is not None:
            raise ConcurrentSchemaChangeError(f"{operation}: {race}")
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
    return candidate, trial


def _undecodable(exc: CorruptMetadataError, version: int) -> CorruptMetadataError:
    """A commit that does not decode, with what to do about it.

    Subclasses (unsafe paths, unknown formats) keep their own type and message.
    """
    if type(exc) is not CorruptMetadataError:
        return exc
    return CorruptCommitError(
        exc.source,
        f"{exc.problem}. This is not the commit of version {version} as mvtable wrote it: restore the file from a "
        f"backup, or, if mvtable did not write it, move it out of {LOG_DIR}/",
        version=version,
    )


def _directory_in_log(where: str, what: str) -> StrayLogFileError:
    return StrayLogFileError(
        where, f"a directory where the file of {what} belongs; mvtable never makes one there: move it out of {LOG_DIR}/"
    )
