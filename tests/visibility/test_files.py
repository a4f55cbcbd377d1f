"""DV files: packing, inline DVs, range reads, and typed errors for bad descriptors."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyroaring import BitMap64

from mvtable.errors import CorruptDeletionVectorError, DeletionVectorNotFoundError
from mvtable.storage import FileIO, LocalFileIO
from mvtable.visibility import DV_DIR, DVCache, decode_dv, load_dv, load_dv_positions, write_dvs


class CountingStore:
    """Wraps a store and counts what is fetched, to see exactly which bytes a load reads."""

    def __init__(self, inner: LocalFileIO) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.reads: list[tuple[str, int, int]] = []
        self.writes: list[str] = []

    def read(self, path: str) -> bytes:
        data = self.inner.read(path)
        self.reads.append((path, 0, len(data)))
        return data

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        self.reads.append((path, offset, size))
        return self.inner.read_range(path, offset, size)

    def write(self, path: str, data: bytes) -> None:
        self.writes.append(path)
        self.inner.write(path, data)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def list(self, folder: str) -> list:
        return self.inner.list(folder)

    def delete(self, paths) -> None:
        self.inner.delete(paths)


def big(offset: int, n: int = 3000, step: int = 7) -> BitMap64:
    return BitMap64(range(offset, offset + n * step, step))  # an array container: ~6 KB blob


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(LocalFileIO(str(tmp_path)))


def test_local_file_io_is_a_file_io(tmp_path: Path) -> None:
    assert isinstance(LocalFileIO(str(tmp_path)), FileIO)


def replace(ref: object, **change: object) -> SimpleNamespace:
    """A descriptor like ``ref`` with some fields changed, unvalidated: load_dv must check
    descriptors itself, because one may come from anywhere."""
    return SimpleNamespace(**{**vars(ref), **change})


def test_write_packs_large_dvs_into_one_file_and_inlines_small_ones(store: CountingStore) -> None:
    bitmaps = {"seg-a": big(0), "seg-b": BitMap64([5, 2**40]), "seg-c": big(2**33), "seg-d": BitMap64()}
    locs = write_dvs(store, bitmaps, inline_max_bytes=512)

    assert set(locs) == set(bitmaps)
    assert len(store.writes) == 1
    dv_path = store.writes[0]
    assert dv_path.startswith(f"{DV_DIR}/") and dv_path.endswith(".dv")
    assert [f.name for f in store.list(DV_DIR)] == [dv_path.rsplit("/", 1)[1]]

    for seg in ("seg-a", "seg-c"):
        assert locs[seg].path == dv_path and locs[seg].inline is None
    for seg in ("seg-b", "seg-d"):
        assert locs[seg].path is None and locs[seg].inline is not None
        assert locs[seg].size == len(base64.b64decode(locs[seg].inline)) <= 512
    assert locs["seg-a"].offset + locs["seg-a"].size <= locs["seg-c"].offset

    for seg, bm in bitmaps.items():
        assert locs[seg].cardinality == len(bm)
        assert load_dv(store, locs[seg]) == bm


def test_load_reads_only_the_blobs_byte_range(store: CountingStore) -> None:
    locs = write_dvs(store, {"a": big(0), "b": big(10**6)})
    store.reads.clear()
    assert load_dv(store, locs["b"]) == big(10**6)
    assert store.reads == [(locs["b"].path, locs["b"].offset, locs["b"].size)]


def test_each_write_gets_a_new_file(store: CountingStore) -> None:
    first = write_dvs(store, {"a": big(0)})
    second = write_dvs(store, {"a": big(0)})
    assert first["a"].path != second["a"].path
    assert len(store.list(DV_DIR)) == 2


def test_all_inline_writes_no_file(store: CountingStore) -> None:
    locs = write_dvs(store, {"a": BitMap64([1]), "b": BitMap64(range(100_000))})  # a run: tiny
    assert store.writes == []
    assert all(loc.inline for loc in locs.values())
    assert write_dvs(store, {}) == {}


def test_inline_threshold_is_respected(store: CountingStore) -> None:
    locs = write_dvs(store, {"a": BitMap64([1, 2, 3])}, inline_max_bytes=0)
    assert locs["a"].path is not None and locs["a"].inline is None
    assert load_dv(store, locs["a"]) == BitMap64([1, 2, 3])


def test_dv_file_is_a_puffin_file(store: CountingStore) -> None:
    locs = write_dvs(store, {"seg-a": big(0), "seg-b": big(99)}, inline_max_bytes=0)
    data = store.inner.read(locs["seg-a"].path)
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    (payload_size,) = struct.unpack("<i", data[-12:-8])
    assert data[-8:-4] == b"\x00\x00\x00\x00"  # flags: footer not compressed
    footer_start = len(data) - 12 - payload_size
    assert data[footer_start - 4 : footer_start] == b"PFA1"
    footer = json.loads(data[footer_start : len(data) - 12])
    blobs = {b["properties"]["referenced-data-file"]: b for b in footer["blobs"]}
    for seg, loc in locs.items():
        meta = blobs[seg]
        assert meta["type"] == "deletion-vector-v1"
        assert (meta["offset"], meta["length"]) == (loc.offset, loc.size)
        assert meta["snapshot-id"] == -1 and meta["sequence-number"] == -1
        assert meta["properties"]["cardinality"] == str(loc.cardinality)
        assert decode_dv(data[meta["offset"] : meta["offset"] + meta["length"]], source=seg) == load_dv(store, loc)


def test_accepts_any_object_with_the_ref_fields(store: CountingStore) -> None:
    locs = write_dvs(store, {"a": big(0), "b": BitMap64([9])})
    for loc in locs.values():
        duck = SimpleNamespace(cardinality=loc.cardinality, inline=loc.inline, path=loc.path, offset=loc.offset, size=loc.size)
        assert load_dv(store, duck) == load_dv(store, loc)


def test_accepts_the_logs_deletion_vector_ref(store: CountingStore) -> None:
    import mvtable.lineage.actions as actions  # the real log model (a test may import across packages)

    locs = write_dvs(store, {"a": big(0), "b": BitMap64([9])})
    for loc in locs.values():
        ref = actions.DeletionVectorRef(
            cardinality=loc.cardinality, inline=loc.inline, path=loc.path, offset=loc.offset, size=loc.size
        )
        assert load_dv(store, ref) == load_dv(store, loc)
    inline_ref = actions.DeletionVectorRef(cardinality=1, inline=locs["b"].inline)  # size left at 0
    assert load_dv(store, inline_ref) == BitMap64([9])


def test_load_positions(store: CountingStore) -> None:
    locs = write_dvs(store, {"a": big(0)})
    assert load_dv_positions(store, locs["a"]).tolist() == list(big(0))
    cache = DVCache()
    arr = load_dv_positions(store, locs["a"], cache=cache)
    assert arr.tolist() == list(big(0)) and not arr.flags.writeable


# -- damaged or hostile descriptors and files ----------------------------------------------------------


def test_missing_file_is_typed(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    store.delete([loc.path])
    with pytest.raises(DeletionVectorNotFoundError) as info:
        load_dv(store, loc)
    assert info.value.path == loc.path


@pytest.mark.parametrize(
    "change, problem",
    [
        (dict(offset=1), None),
        (dict(size=100), None),
        (dict(cardinality=1), "descriptor says"),
        (dict(path="../outside.dv"), "unsafe path"),
        (dict(path="/etc/passwd"), "unsafe path"),
        (dict(path="s3://bucket/x.dv"), "unsafe path"),
        (dict(size=3), "offset/size"),
        (dict(size=2**40), "offset/size"),
        (dict(path=None), "exactly one"),
        (dict(inline="AAAA"), "exactly one"),
    ],
)
def test_wrong_descriptor_is_rejected(store: CountingStore, change: dict, problem: str | None) -> None:
    loc = write_dvs(store, {"a": big(0), "b": big(5)})["b"]
    with pytest.raises(CorruptDeletionVectorError) as info:
        load_dv(store, replace(loc, **change))
    if problem:
        assert problem in info.value.problem


def test_error_names_file_and_offset(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0), "b": big(5)})["b"]
    with pytest.raises(CorruptDeletionVectorError) as info:
        load_dv(store, replace(loc, offset=loc.offset + 1))
    assert loc.path in info.value.source and str(loc.offset + 1) in info.value.source


def test_file_cut_short_is_rejected(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    data = store.inner.read(loc.path)
    store.inner.write(loc.path, data[: loc.offset + loc.size - 1])
    with pytest.raises(CorruptDeletionVectorError, match="ends early"):
        load_dv(store, loc)


def test_flipped_byte_in_file_is_rejected(store: CountingStore) -> None:
    loc = write_dvs(store, {"a": big(0)})["a"]
    data = bytearray(store.inner.read(loc.path))
    data[loc.offset + loc.size // 2] ^= 0x10
    store.inner.write(loc.path, bytes(data))
    with pytest.raises(CorruptDeletionVectorError, match="CRC"):
        load_dv(store, loc)


@pytest.mark.parametrize("inline", ["not base64!", base64.b64encode(b"short").decode(), ""])
def test_bad_inline_is_rejected(store: CountingStore, inline: str) -> None:
    with pytest.raises(CorruptDeletionVectorError) as info:
        load_dv(store, SimpleNamespace(cardinality=0, inline=inline, path=None, offset=0, size=0))
    assert info.value.source == "inline deletion vector"


def test_puffin_footer_names_the_data_file_location_when_given(store: CountingStore) -> None:
    """Iceberg's deletion-vector-v1 asks ``referenced-data-file`` to be the data file's
    location: with it, an Iceberg export references this file as it is."""
    where = {"seg-a": "file:///t/data/seg-a.parquet"}
    locs = write_dvs(store, {"seg-a": big(0), "seg-b": big(99)}, inline_max_bytes=0, data_files=where)
    data = store.inner.read(locs["seg-a"].path)
    (payload_size,) = struct.unpack("<i", data[-12:-8])
    footer = json.loads(data[len(data) - 12 - payload_size : len(data) - 12])
    named = {(b["offset"], b["length"]): b["properties"]["referenced-data-file"] for b in footer["blobs"]}
    assert named[(locs["seg-a"].offset, locs["seg-a"].size)] == "file:///t/data/seg-a.parquet"
    assert named[(locs["seg-b"].offset, locs["seg-b"].size)] == "seg-b"  # not given: the segment id, as before
