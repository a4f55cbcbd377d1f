"""The newest snapshot this process built of each table, so that opening it again replays only what is new.

A fresh ``Table`` (or ``CommitLog``) opens the newest version from the newest checkpoint
plus every commit after it. The checkpoint's parse is cached (``checkpoint_cache``), but the
commits after it are read and replayed on every open: a process that opens several tables
again and again (a consistent read of three tables, a service answering requests) replays
the same tails each time. This cache keeps, per store, the newest snapshot some open built,
so the next open starts from it and replays only the commits that landed since.

It answers only for the same history. An entry holds a digest of the commit file of its
version, and an open uses the entry only when that file still holds those bytes: commit
files are never rewritten and each names a unique transaction, so a table deleted and made
again at the same path, a restored backup or a collected log simply misses (the checkpoint
path reads it). A ``Table`` object's own last-seen snapshot (``Table._latest``) relies on
the same rule without the check; the cache checks because it crosses objects.

Snapshots in the cache are never changed: a caller that may change its snapshot gets a copy
(``CommitLog.snapshot``), and one that only reads it may be handed the cached object.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from .snapshot import Snapshot

__all__ = ["RecentSnapshots", "commit_digest", "process_snapshots"]


def commit_digest(data: bytes) -> bytes:
    """What identifies a commit file's content (16 bytes of BLAKE2b)."""
    return hashlib.blake2b(data, digest_size=16).digest()


class RecentSnapshots:
    """At most ``max_entries`` tables' newest snapshots, least recently used dropped first."""

    def __init__(self, *, max_entries: int = 8) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Snapshot, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, store: str) -> tuple[Snapshot, bytes] | None:
        """(snapshot, digest of its version's commit file) last kept for ``store``; the caller checks the digest."""
        with self._lock:
            found = self._entries.get(store)
            if found is not None:
                self._entries.move_to_end(store)
            return found

    def hit(self) -> None:
        """Count an open that started from a kept snapshot (the tests read ``hits``)."""
        with self._lock:
            self.hits += 1

    def keep(self, store: str, snapshot: Snapshot, digest: bytes) -> None:
        """Keep ``snapshot`` (which nobody changes from now on) for ``store`` unless a newer one is kept."""
        if self.max_entries <= 0:
            return
        with self._lock:
            found = self._entries.get(store)
            if found is not None and found[0].version > snapshot.version:
                return  # a time-travel read: the newer one serves more opens
            self._entries[store] = (snapshot, digest)
            self._entries.move_to_end(store)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, store: str) -> None:
        with self._lock:
            self._entries.pop(store, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_PROCESS = RecentSnapshots()


def process_snapshots() -> RecentSnapshots:
    """The cache every ``CommitLog`` of this process shares."""
    return _PROCESS
