"""The executor-side DV cache: hits read nothing, the byte bound holds, threads share loads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pyroaring import BitMap64

from mvtable.conf import connector_settings
from mvtable.errors import CorruptDeletionVectorError
from mvtable.storage import LocalFileIO
from mvtable.visibility import DVCache, load_dv, load_dv_positions, process_cache, ref_key, write_dvs
from mvtable.visibility import cache as cache_module


class CountingStore:
    """A ``LocalFileIO`` that records every fetch (kept local: test modules do not import each other)."""

    def __init__(self, inner: LocalFileIO) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.reads: list[tuple[str, int, int]] = []

    def read(self, path: str) -> bytes:
        data = self.inner.read(path)
        self.reads.append((path, 0, len(data)))
        return data

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        self.reads.append((path, offset, size))
        return self.inner.read_range(path, offset, size)

    def write(self, path: str, data: bytes) -> None:
        self.inner.write(path, data)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def list(self, folder: str) -> list:
        return self.inner.list(folder)

    def delete(self, paths) -> None:
        self.inner.delete(paths)


def big(offset: int) -> BitMap64:
    return BitMap64(range(offset, offset + 21_000, 7))  # one array container: a ~6 KB blob


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(LocalFileIO(str(tmp_path)))


def read_bytes(store: CountingStore) -> int:
    return sum(size for _, _, size in store.reads)


def test_second_load_reads_nothing(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    cache = DVCache()
    store.reads.clear()

    first = load_dv(store, loc, cache=cache)
    assert read_bytes(store) == loc.size
    second = load_dv(store, loc, cache=cache)
    assert read_bytes(store) == loc.size  # nothing more
    assert first is second and first == big(0)
    s = cache.stats()
    assert (s["hits"], s["misses"], s["bytes_read"], s["evictions"]) == (1, 1, loc.size, 0)


def test_positions_share_the_entry_and_are_computed_once(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    cache = DVCache()
    a = load_dv_positions(store, loc, cache=cache)
    b = load_dv_positions(store, loc, cache=cache)
    assert a is b
    assert len(store.reads) == 1
    assert cache.current_bytes == loc.size + a.nbytes


def test_equal_refs_from_different_objects_hit(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    cache = DVCache()
    load_dv(store, loc, cache=cache)
    load_dv(store, loc.model_copy(), cache=cache)
    assert cache.hits == 1


def test_inline_dvs_are_cached_by_content_and_read_no_bytes(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": BitMap64([1, 2])})["a"]
    cache = DVCache()
    load_dv(store, loc, cache=cache)
    load_dv(store, loc, cache=cache)
    assert (cache.hits, cache.misses, cache.bytes_read) == (1, 1, 0)
    assert store.reads == []


def test_same_relative_path_in_two_tables_does_not_collide(tmp_path: Path) -> None:
    one = CountingStore(LocalFileIO(str(tmp_path / "one")))
    two = CountingStore(LocalFileIO(str(tmp_path / "two")))
    loc = write_dvs(one, {"a": big(0)})["a"]
    # table two holds a different DV of the same size under the same relative path
    other = write_dvs(two, {"a": big(5)})["a"]
    assert (other.offset, other.size) == (loc.offset, loc.size)
    (tmp_path / "two" / other.path).rename(tmp_path / "two" / loc.path)

    cache = DVCache()
    assert load_dv(one, loc, cache=cache) == big(0)
    assert load_dv(two, loc, cache=cache) == big(5)
    assert cache.misses == 2


def test_eviction_is_by_bytes(store: CountingStore) -> None:
    locs = write_dvs(store, {f"s{i}": big(i * 10**6) for i in range(4)})
    size = locs["s0"].size
    cache = DVCache(max_bytes=2 * size + size // 2)  # room for two
    for i in range(4):
        load_dv(store, locs[f"s{i}"], cache=cache)
    assert len(cache) == 2 and cache.evictions == 2
    assert cache.current_bytes <= cache.max_bytes
    store.reads.clear()
    load_dv(store, locs["s3"], cache=cache)  # most recent: still cached
    assert store.reads == []
    load_dv(store, locs["s0"], cache=cache)  # evicted first: read again
    assert len(store.reads) == 1


def test_lru_order_follows_use(store: CountingStore) -> None:
    locs = write_dvs(store, {f"s{i}": big(i * 10**6) for i in range(3)})
    size = locs["s0"].size
    cache = DVCache(max_bytes=2 * size + size // 2)
    load_dv(store, locs["s0"], cache=cache)
    load_dv(store, locs["s1"], cache=cache)
    load_dv(store, locs["s0"], cache=cache)  # s0 is now the most recent
    load_dv(store, locs["s2"], cache=cache)  # so s1 goes
    assert ref_key(locs["s0"], namespace=f"uri:{store.uri}") in cache
    assert ref_key(locs["s1"], namespace=f"uri:{store.uri}") not in cache


def test_entry_larger_than_the_cache_is_returned_but_not_kept(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    cache = DVCache(max_bytes=loc.size - 1)
    assert load_dv(store, loc, cache=cache) == big(0)
    assert load_dv(store, loc, cache=cache) == big(0)
    assert len(cache) == 0 and cache.misses == 2 and cache.bytes_read == 2 * loc.size


def test_clear_resets(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    cache = DVCache()
    load_dv(store, loc, cache=cache)
    cache.clear()
    assert cache.stats() == {
        "hits": 0, "misses": 0, "bytes_read": 0, "evictions": 0,
        "entries": 0, "current_bytes": 0, "max_bytes": cache.max_bytes,
    }  # fmt: skip


def test_corrupt_dv_is_not_cached(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    data = bytearray(store.inner.read(loc.path))
    data[loc.offset + 10] ^= 1
    store.inner.write(loc.path, bytes(data))
    cache = DVCache()
    for _ in range(2):
        with pytest.raises(CorruptDeletionVectorError):
            load_dv(store, loc, cache=cache)
    assert len(cache) == 0 and cache.misses == 2


def test_concurrent_misses_load_once() -> None:
    cache = DVCache()
    calls = 0
    lock = threading.Lock()

    def slow_load() -> tuple[BitMap64, int, int]:
        nonlocal calls
        with lock:
            calls += 1
        time.sleep(0.05)
        return BitMap64([1, 2, 3]), 100, 100

    results: list[BitMap64] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_load("k", slow_load))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == 1
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert (cache.misses, cache.hits, cache.bytes_read) == (1, 7, 100)


def test_many_threads_keep_the_bound() -> None:
    cache = DVCache(max_bytes=1000)

    def work(t: int) -> None:
        for i in range(200):
            key = (t * 7 + i) % 37
            got = cache.get_or_load(key, lambda key=key: (BitMap64([key]), 64, 64))
            assert list(got) == [key]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.current_bytes <= 1000
    s = cache.stats()
    assert s["hits"] + s["misses"] == 1600


def test_process_cache_is_a_singleton_sized_by_the_dv_cache_bytes_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "_process_cache", None)
    assert process_cache().max_bytes == connector_settings().dv_cache_bytes == 64 * 1024 * 1024  # defaults.toml

    small = connector_settings().model_copy(update={"dv_cache_bytes": 12345})
    monkeypatch.setattr(cache_module, "connector_settings", lambda: small)
    monkeypatch.setattr(cache_module, "_process_cache", None)
    first = process_cache()
    assert first is process_cache()
    assert first.max_bytes == 12345
    # the environment is no way to configure it (the one source is the settings model)
    monkeypatch.setenv("MVTABLE_DV_CACHE_BYTES", "999")
    monkeypatch.setattr(cache_module, "_process_cache", None)
    assert process_cache().max_bytes == 12345


class _NoUri:
    """A store without ``uri``: the cache must still keep tables apart."""

    def __init__(self, inner: LocalFileIO) -> None:
        self.inner = inner
        self.read_range = inner.read_range
        self.write = inner.write
        self.read = inner.read
        self.exists = inner.exists
        self.list = inner.list
        self.delete = inner.delete


def test_store_without_uri_is_cached_per_store_object(tmp_path: Path) -> None:
    one, two = _NoUri(LocalFileIO(str(tmp_path / "a"))), _NoUri(LocalFileIO(str(tmp_path / "b")))
    loc = write_dvs(one, {"a": big(0)})["a"]
    other = write_dvs(two, {"a": big(5)})["a"]
    (tmp_path / "b" / other.path).rename(tmp_path / "b" / loc.path)
    cache = DVCache()
    assert load_dv(one, loc, cache=cache) == big(0)
    assert load_dv(one, loc, cache=cache) == big(0)
    assert load_dv(two, loc, cache=cache) == big(5)
    assert (cache.hits, cache.misses) == (1, 2)
