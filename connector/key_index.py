"""The per-segment key index.

A Bloom filter of a segment's key hashes, in a small file beside the segment
(``data/<segment-id>.keys.bloom``), plus the per-row-group min/max of the key columns that every
segment descriptor already carries in its statistics.

Written when a segment is written — by ``SegmentWriter`` for every writer, and by anything
that rewrites segments (compaction) through the same writer or ``build_index`` — so a key
lookup opens only segments whose filter may hold a key, and reads only the key columns of
row groups whose range covers it. A table without a primary key writes no index. The file
lives and dies with its segment: vacuum deletes it with the segment's Parquet file."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from mvtable.lineage.key_filters import KeyBloom
from mvtable.storage import FileIO

from .key_hashing import hash_keys

__all__ = [
    "INDEX_SUFFIX",
    "IndexBuilder",
    "build_index",
    "forget_filters",
    "index_cached",
    "index_path",
    "read_index",
    "segment_path_of",
]

INDEX_SUFFIX = ".keys.bloom"
_PARQUET = ".parquet"


def index_path(segment_path: str) -> str:
    """Where the key index of the segment at ``segment_path`` lives."""
    stem = segment_path[: -len(_PARQUET)] if segment_path.endswith(_PARQUET) else segment_path
    return stem + INDEX_SUFFIX


def segment_path_of(path: str) -> str | None:
    """The segment file a key index file belongs to, or ``None`` if ``path`` is not one."""
    return path[: -len(INDEX_SUFFIX)] + _PARQUET if path.endswith(INDEX_SUFFIX) else None


# Bits per key of a segment's filter: a very low false-positive rate (an absent key goes
# through about two probes: ``KeyBloom.may_contain``). A false positive makes a lookup read
# the key columns of a row group, and an append probes every segment's filter once per key:
# with a common 1% filter that read nearly every segment, as a full key scan would, and even
# a far lower rate read row groups on every append, a cost growing with the table. Hudi's
# bloom index defaults to a very low rate for the same reason. The filter stays small next to
# the key columns themselves. Fewer probes per key than the number that minimises false
# positives: the filter is built on every segment write and probed by every lookup, and a
# filter a third empty instead of half drops an absent key sooner.
SEGMENT_BITS_PER_KEY = 32
SEGMENT_HASHES = 16


def build_index(io: FileIO, segment_path: str, hashes: np.ndarray) -> None:
    """Write the key index of a segment from the hashes of all its keys (in any order)."""
    io.write(
        index_path(segment_path), KeyBloom.build(hashes, bits_per_key=SEGMENT_BITS_PER_KEY, num_hashes=SEGMENT_HASHES).to_bytes()
    )


def index_cached(io: FileIO, segment_path: str) -> bool:
    """Whether the segment's key filter is in this process's memory already."""
    return _cache.get((io.uri, index_path(segment_path))) is not None


def read_index(io: FileIO, segment_path: str) -> KeyBloom | None:
    """The segment's key filter; ``None`` when it has none (then every key is a candidate)."""
    path = index_path(segment_path)
    key = (io.uri, path)
    bloom = _cache.get(key)
    if bloom is not None:
        return bloom
    try:
        data = io.read(path)
    except FileNotFoundError:
        return None
    bloom = KeyBloom.from_bytes(data, source=f"{io.uri}/{path}")
    _cache.put(key, bloom)
    return bloom


# Key filters read by this process, newest used last. A filter is written once, beside a
# segment with a fresh id, and never changed, so an entry never goes stale: a writer that
# appends again (or a Spark worker running the next task) probes the filters it already
# read instead of reading the key columns of the table again. Bounded in bytes.
INDEX_CACHE_BYTES = 256 * 1024 * 1024


class _IndexCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], KeyBloom] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> KeyBloom | None:
        with self._lock:
            bloom = self._entries.get(key)
            if bloom is not None:
                self._entries.move_to_end(key)
            return bloom

    def put(self, key: tuple[str, str], bloom: KeyBloom) -> None:
        size = int(bloom.bits.nbytes)
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = bloom
            self._size += size
            while self._size > self.max_bytes:
                _, old = self._entries.popitem(last=False)
                self._size -= int(old.bits.nbytes)


_cache = _IndexCache(INDEX_CACHE_BYTES)


def forget_filters() -> None:
    """Drop the key filters this process keeps (the next lookup reads them again).

    It serves a benchmark that measures a cold lookup, or a process that wants the memory back."""
    global _cache
    _cache = _IndexCache(INDEX_CACHE_BYTES)


class IndexBuilder:
    """Collects the key hashes of the rows a segment writer writes, then writes the index."""

    def __init__(self, key: Sequence[str]) -> None:
        self.key = tuple(key)
        self._parts: list[np.ndarray] = []

    def add(self, rows: pa.Table) -> None:
        self._parts.append(hash_keys(rows, self.key))

    def write(self, io: FileIO, segment_path: str) -> None:
        hashes = np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=np.uint64)
        build_index(io, segment_path, hashes)
