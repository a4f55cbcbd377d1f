"""Walking the log version by version, for the change feed and the streaming source.

A ``VersionWalker`` keeps one snapshot and advances it a commit at a time (``advance``), so
following a table costs one commit read per new version, not a snapshot per version. The
deltas of recent versions are cached: Spark asks for the same versions when it computes
a micro-batch's end offset and again when it plans the batch's partitions.
"""

from __future__ import annotations

from collections import OrderedDict

from mvtable.errors import VersionNotFoundError
from mvtable.lineage.log import CommitLog, Listing
from mvtable.lineage.snapshot import Snapshot

from .versions import VersionDelta, advance

DEFAULT_CACHED_VERSIONS = 1024


class VersionWalker:
    def __init__(self, commit_log: CommitLog, *, cached_versions: int = DEFAULT_CACHED_VERSIONS) -> None:
        self.commit_log = commit_log
        self._state: Snapshot | None = None  # advanced in place; the walker's alone
        self._deltas: OrderedDict[int, VersionDelta] = OrderedDict()
        self._cached_versions = cached_versions

    def delta(self, version: int) -> VersionDelta:
        """What commit ``version`` changed.

        Raises:
            VersionNotFoundError: The log no longer holds what it takes to tell."""
        cached = self._deltas.get(version)
        if cached is not None:
            self._deltas.move_to_end(version)
            return cached
        state = self._state
        if state is None or state.version >= version or state.version < version - 1 - self._cached_versions:
            # behind us, or too far ahead to walk: rebuild from the newest checkpoint
            state = self.commit_log.snapshot(version - 1) if version > 0 else Snapshot()
            self._state = state
        try:
            while state.version < version:
                self._remember(advance(state, self.commit_log.read_commit(state.version + 1)))
        except BaseException:
            self._state = None  # a commit may have been half applied: rebuild next time
            raise
        return self._deltas[version]

    def _remember(self, delta: VersionDelta) -> None:
        self._deltas[delta.version] = delta
        while len(self._deltas) > self._cached_versions:
            self._deltas.popitem(last=False)

    def forget_before(self, version: int) -> None:
        """Drop cached deltas of versions below ``version`` (a stream has committed them)."""
        for v in [v for v in self._deltas if v < version]:
            del self._deltas[v]


def first_readable_change(listing: Listing) -> int:
    """The oldest version whose changes the log can still tell, and those of every version after it.

    One past the newest when it can tell none.

    The changes of version ``v`` are the snapshot at ``v - 1`` advanced by commit ``v``
    (``VersionWalker.delta``), so they need commit ``v`` and a way to rebuild ``v - 1``:
    nothing for ``v == 0``, else a checkpoint at or before ``v - 1`` with every commit after
    it. GC cuts the log oldest first down to a checkpoint, so the readable part is the run
    of commits that ends at the newest, read from the first checkpoint at or after the
    version just below that run. The history a snapshot carries still lists the versions
    before (``Snapshot.history``), which is why it cannot answer this. Pure: names only."""
    commits, checkpoints = set(listing.commits), listing.checkpoints
    low = listing.latest + 1
    while low - 1 in commits:
        low -= 1  # commits low..latest are all there
    if low == 0:
        return 0
    base = next((c for c in checkpoints if c >= low - 1), None)  # below low - 1 a commit is missing
    return listing.latest + 1 if base is None else base + 1


def check_readable(start: int, listing: Listing, *, option: str) -> None:
    """Refuse an explicit start (``option`` names it) whose changes GC has removed.

    The error names the oldest one that can be read: reading on would fail on the first
    version anyway, with a message that names neither the option nor a way out. Pure.

    Raises:
        VersionNotFoundError: The changes of ``start`` are no longer in the log."""
    first = first_readable_change(listing)
    if start < first:
        raise VersionNotFoundError(
            f"{option} {start} can no longer be read: the log files its changes are read from were "
            f"garbage-collected (history is kept for versionRetentionPeriod). The oldest version whose "
            f"changes can still be read is {first}; start there or later"
        )


def first_version_since(listing: Listing, newest: Snapshot, timestamp_ms: int) -> int:
    """The first version committed at or after ``timestamp_ms`` (``startingTimestamp``) whose changes can still be read.

    A timestamp older than the log GC left starts at the oldest readable version, as
    Delta's ``getActiveCommitAtTime(..., canReturnEarliestCommit=true)`` does. One past the
    newest when every commit is older. Pure: ``newest`` is the snapshot of
    ``listing.latest``, whose history dates every version."""
    later = [h.version for h in newest.history if h.timestamp_ms >= timestamp_ms]
    since = min(later) if later else listing.latest + 1
    return max(since, first_readable_change(listing))
