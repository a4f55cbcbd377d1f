"""Walking the log version by version, for the change feed and the streaming source.

A ``VersionWalker`` keeps one snapshot and advances it a commit at a time (``advance``), so
following a table costs one commit read per new version, not a snapshot per version. The
deltas of recent versions are cached: Spark asks for the same versions when it computes
a micro-batch's end offset and again when it plans the batch's partitions.
"""

from __future__ import annotations

from collections import OrderedDict

from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot

from .versions import VersionDelta, advance

DEFAULT_CACHED_VERSIONS = 1024


class VersionWalker:
    def __init__(self, log: CommitLog, *, cached_versions: int = DEFAULT_CACHED_VERSIONS) -> None:
        self.log = log
        self._state: Snapshot | None = None  # advanced in place; the walker's alone
        self._deltas: OrderedDict[int, VersionDelta] = OrderedDict()
        self._cached_versions = cached_versions

    def delta(self, version: int) -> VersionDelta:
        """What commit ``version`` changed (``VersionNotFoundError`` if the log no longer
        holds what it takes to tell)."""
        cached = self._deltas.get(version)
        if cached is not None:
            self._deltas.move_to_end(version)
            return cached
        state = self._state
        if state is None or state.version >= version or state.version < version - 1 - self._cached_versions:
            # behind us, or too far ahead to walk: rebuild from the newest checkpoint
            state = self.log.snapshot(version - 1) if version > 0 else Snapshot()
            self._state = state
        try:
            while state.version < version:
                self._remember(advance(state, self.log.read_commit(state.version + 1)))
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


def first_version_since(log: CommitLog, timestamp_ms: int) -> int:
    """The first version committed at or after ``timestamp_ms`` (``startingTimestamp``);
    one past the newest when every commit is older."""
    history = log.snapshot().history
    later = [h.version for h in history if h.timestamp_ms >= timestamp_ms]
    return min(later) if later else (history[-1].version + 1 if history else 0)
