"""Parsed checkpoints kept per process, so that opening a table again does not parse its checkpoint again.

Every ``Table(uri).append(...)`` of a fresh ``Table`` object loads the newest snapshot: a
checkpoint plus the commits after it. Parsing the checkpoint (a Parquet file, validated
column by column) was a large share of a small append's CPU (benchmarks/README.md has the
numbers). The cache is keyed by store and version but answers only when the bytes just read
are the bytes it parsed, so a rewritten or replaced checkpoint file is simply parsed again:
there is nothing to invalidate. Callers get their own copy (``Snapshot.copy``), because
replay advances a snapshot in place; a caller that only reads may ask for the cached object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from .snapshot import Snapshot

__all__ = ["CheckpointCache", "process_checkpoints"]


class CheckpointCache:
    """At most ``max_entries`` parsed checkpoints, least recently used dropped first."""

    def __init__(self, *, max_entries: int = 8) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, int], tuple[bytes, Snapshot]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def load(
        self, store: str, version: int, data: bytes, parse: Callable[[bytes], Snapshot], *, shared: bool = False
    ) -> Snapshot:
        """The snapshot ``data`` (the checkpoint of ``version`` in ``store``) holds.

        It is a copy of the cached parse when the cached bytes equal ``data``, else
        ``parse(data)``. ``shared``: the cached object itself, for a caller that only reads
        it and never changes it (not a copy each time: a reader that wants a few fields
        of several tables paid more for the copies than for the reads)."""
        key = (store, version)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == data:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1] if shared else entry[1].copy()
            self.misses += 1
        snapshot = parse(data)
        if self.max_entries > 0:
            kept = snapshot if shared else snapshot.copy()  # the caller may advance its snapshot in place
            with self._lock:
                self._entries[key] = (data, kept)
                self._entries.move_to_end(key)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
        return snapshot

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_PROCESS = CheckpointCache()


def process_checkpoints() -> CheckpointCache:
    """The cache every ``CommitLog`` of this process shares."""
    return _PROCESS
