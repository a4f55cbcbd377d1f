"""Executor-side cache of decoded deletion vectors.

A scan touches the same DV once per row group and once per task that reads the segment,
and several queries in a row usually read the same snapshot. DV descriptors are
immutable (a DV file is written once under a fresh uuid; an inline DV is its own
content), so a decoded DV can be cached by its descriptor with no invalidation at all.

The bound is in bytes rather than entries because DV sizes span five orders of magnitude:
a count bound would either waste the budget on tiny inline DVs or blow it on a few
huge ones.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap64

from mvtable.conf import connector_settings

from .dv import positions_array

__all__ = ["DVCache", "DEFAULT_CACHE_BYTES", "ref_key", "process_cache"]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024  # a DVCache built without a size (the process cache uses dvCacheBytes)

# (bitmap, bytes fetched from storage to build it, accounted size in bytes)
Loaded = tuple[BitMap64, int, int]


def ref_key(ref: Any, *, namespace: str = "") -> Hashable:
    """Cache key of a DV descriptor (any object with ``inline``/``path``/``offset``/``size``).

    Inline DVs are keyed by a digest of their content, so equal content shares one entry
    across tables. File DVs are keyed by ``namespace`` (the table location) plus path and
    byte range: relative paths are only unique within one table.
    """
    inline = getattr(ref, "inline", None)
    if inline is not None:
        digest = hashlib.blake2b(inline.encode("ascii", "replace"), digest_size=16).digest()
        return ("inline", digest)
    return ("file", namespace, ref.path, int(ref.offset), int(ref.size))


@dataclass
class _Entry:
    bitmap: BitMap64
    size: int
    positions: np.ndarray | None = None


class DVCache:
    """Thread-safe LRU of decoded DVs, bounded by an estimate of their memory in bytes.

    A DV's footprint is estimated by its serialized size (Roaring's in-memory and
    serialized forms are close); a positions array, once asked for, adds its ``nbytes``.
    Concurrent misses on one key load once: the others wait for the first loader.
    """

    def __init__(self, *, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._loading: dict[Hashable, threading.Event] = {}
        self._size = 0
        self.hits = 0
        self.misses = 0
        self.bytes_read = 0
        self.evictions = 0

    # -- lookups -----------------------------------------------------------------------

    def get_or_load(self, key: Hashable, load: Callable[[], Loaded]) -> BitMap64:
        """The cached bitmap for ``key``, calling ``load`` on a miss.

        Callers must not mutate the returned bitmap: it is shared with other readers.
        """
        return self._entry(key, load).bitmap

    def positions(self, key: Hashable, load: Callable[[], Loaded]) -> np.ndarray:
        """The DV as a sorted, read-only ``uint64`` array, computed at most once per entry.

        Worth it when a segment is sliced into many row groups: ``searchsorted`` on the
        array beats building a range bitmap per row group.
        """
        entry = self._entry(key, load)
        if entry.positions is not None:
            return entry.positions
        arr = positions_array(entry.bitmap)
        arr.flags.writeable = False
        with self._lock:
            if entry.positions is not None:
                return entry.positions
            current = self._entries.get(key)
            if current is entry and entry.size + arr.nbytes <= self.max_bytes:
                entry.positions = arr
                entry.size += arr.nbytes
                self._size += arr.nbytes
                self._evict_locked(keep=key)
        return arr

    def _entry(self, key: Hashable, load: Callable[[], Loaded]) -> _Entry:
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return entry
                waiting = self._loading.get(key)
                if waiting is None:
                    self._loading[key] = threading.Event()
                    self.misses += 1
                    break
            waiting.wait()  # another thread is loading this key; then look again
        try:
            bitmap, fetched, size = load()
            entry = _Entry(bitmap, max(int(size), 1))
            with self._lock:
                self.bytes_read += int(fetched)
                if entry.size <= self.max_bytes:
                    self._entries[key] = entry
                    self._size += entry.size
                    self._evict_locked(keep=key)
            return entry
        finally:
            with self._lock:
                done = self._loading.pop(key, None)
            if done is not None:
                done.set()

    def _evict_locked(self, *, keep: Hashable) -> None:
        while self._size > self.max_bytes and self._entries:
            key, entry = next(iter(self._entries.items()))
            if key == keep:
                break
            del self._entries[key]
            self._size -= entry.size
            self.evictions += 1

    # -- housekeeping ------------------------------------------------------------------

    @property
    def current_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "bytes_read": self.bytes_read,
                "evictions": self.evictions,
                "entries": len(self._entries),
                "current_bytes": self._size,
                "max_bytes": self.max_bytes,
            }

    def clear(self) -> None:
        """Drop every entry and reset the counters (in-flight loads still finish)."""
        with self._lock:
            self._entries.clear()
            self._size = 0
            self.hits = self.misses = self.bytes_read = self.evictions = 0


_process_cache: DVCache | None = None
_process_lock = threading.Lock()


def process_cache() -> DVCache:
    """The one cache of this process, sized by the ``dvCacheBytes`` connector setting.

    Spark forks Python workers from a daemon, so a child must not inherit a cache whose
    lock a parent thread might hold; ``os.register_at_fork`` gives each child a fresh one.
    """
    global _process_cache
    with _process_lock:
        if _process_cache is None:
            _process_cache = DVCache(max_bytes=connector_settings().dv_cache_bytes)
        return _process_cache


def _reset_after_fork() -> None:
    global _process_cache, _process_lock
    _process_cache = None
    _process_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
