"""The deletion-vector-v1 blob: layout, round trips, and refusal of anything damaged."""

from __future__ import annotations

import ast
import pathlib
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64, FrozenBitMap64

from mvtable.errors import CorruptDeletionVectorError
from mvtable.visibility import bitmap_from_array, decode_dv, encode_dv, positions_array
from mvtable.visibility.dv import DV_MAGIC, MIN_BLOB_SIZE

SAMPLE = [0, 1, 2, 70_000, 2**16 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 5, 3 * 2**32 + 12345, 2**63 + 7, 2**64 - 1]


def portable64(values: list[int], *, run_optimize: bool = False) -> bytes:
    """The portable 64-bit Roaring layout, built independently from 32-bit buckets.

    ``BitMap(..., optimize=False)`` keeps array/bitset containers; pyroaring's default
    would silently turn runs into run containers.
    """
    buckets: dict[int, list[int]] = {}
    for v in sorted(set(values)):
        buckets.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    out = [struct.pack("<Q", len(buckets))]
    for key in sorted(buckets):
        bm = BitMap(buckets[key], optimize=run_optimize)
        out.append(struct.pack("<I", key) + bm.serialize())
    return b"".join(out)


def frame(bitmap_bytes: bytes, *, magic: bytes = DV_MAGIC) -> bytes:
    payload = magic + bitmap_bytes
    return struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))


# -- layout ------------------------------------------------------------------------------


def test_pyroaring_serialize_is_the_portable_64bit_format() -> None:
    assert BitMap64(SAMPLE).serialize() == portable64(SAMPLE)
    # array, bitset and run containers, in several buckets
    dense = [i for i in range(0, 200_000) if i % 7] + list(range(2**33, 2**33 + 5000)) + [2**40 + 3 * i for i in range(50)]
    bm = BitMap64()
    bm.update(dense)
    stats = bm.get_statistics()
    assert stats["n_bitset_containers"] and stats["n_array_containers"] and not stats["n_run_containers"]
    assert bm.serialize() == portable64(dense)
    bm.run_optimize()
    assert bm.get_statistics()["n_run_containers"]
    assert bm.serialize() == portable64(dense, run_optimize=True)
    assert BitMap64().serialize() == struct.pack("<Q", 0)


def test_blob_layout_matches_iceberg_deletion_vector_v1() -> None:
    blob = encode_dv([1, 2, 2**40])
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8
    assert blob[4:8] == bytes([0xD1, 0xD3, 0x39, 0x64])
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
    assert blob[8:-4] == portable64([1, 2, 2**40])


def test_reads_blob_framed_around_pyroaring_serialization() -> None:
    bm = BitMap64(SAMPLE)
    assert decode_dv(frame(bm.serialize()), source="t") == bm
    # and one written without run optimization, with an array and a bitset container
    values = list(range(0, 10_000)) + [2**35 + i * 3 for i in range(100)]
    assert decode_dv(frame(portable64(values)), source="t") == BitMap64(values)


# -- round trips -------------------------------------------------------------------------


def test_round_trip_inputs() -> None:
    expected = BitMap64(SAMPLE)
    assert decode_dv(encode_dv(expected), source="t") == expected
    assert decode_dv(encode_dv(SAMPLE), source="t") == expected
    assert decode_dv(encode_dv(np.array(SAMPLE, dtype=np.uint64)), source="t") == expected
    assert decode_dv(encode_dv(FrozenBitMap64(SAMPLE)), source="t") == expected
    assert decode_dv(encode_dv(BitMap([1, 5, 2**32 - 1])), source="t") == BitMap64([1, 5, 2**32 - 1])
    assert decode_dv(encode_dv([]), source="t") == BitMap64()
    assert len(encode_dv([])) == MIN_BLOB_SIZE


def test_encode_does_not_mutate_input_and_compresses_ranges() -> None:
    # long runs, stored as bitsets: pyroaring's constructor would run-optimize for us,
    # incremental updates (how a delete accumulates positions) do not
    bm = BitMap64()
    bm.update(i for i in range(1_000_000) if i % 1000)
    assert bm.get_statistics()["n_run_containers"] == 0
    before = bm.serialize()
    blob = encode_dv(bm)
    assert bm.serialize() == before
    assert len(blob) < 16 * 8192 // 10  # run containers, not 16 x 8 KiB bitsets
    assert decode_dv(blob, source="t") == bm


def test_decode_accepts_bytearray_and_memoryview() -> None:
    blob = encode_dv(SAMPLE)
    assert decode_dv(bytearray(blob), source="t") == BitMap64(SAMPLE)
    assert decode_dv(memoryview(blob), source="t") == BitMap64(SAMPLE)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=2**20),
            st.integers(min_value=2**32 - 100, max_value=2**32 + 100),
            st.integers(min_value=0, max_value=2**64 - 1),
        ),
        max_size=300,
    ),
    st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 70_000)), max_size=3),
)
def test_round_trip_property(values: list[int], ranges: list[tuple[int, int]]) -> None:
    expected = BitMap64(values)
    for lo, n in ranges:
        expected.add_range(lo, lo + n)
    blob = encode_dv(expected)
    got = decode_dv(blob, source="prop")
    assert got == expected
    assert len(got) == len(expected)


# -- corruption ---------------------------------------------------------------------------


CORPUS = {
    "tiny": encode_dv([3, 2**33]),
    "runs": encode_dv(list(range(0, 5000)) + [2**32 + 7, 2**40 + 1, 2**40 + 9]),
    "arrays": frame(portable64([1, 2, 3, 2**32])),
    "bitset": frame(portable64([i for i in range(0, 20_000, 3)] + [2**32 + 1])),
}


@pytest.mark.parametrize("blob", CORPUS.values(), ids=CORPUS.keys())
def test_every_single_bit_flip_is_rejected(blob: bytes) -> None:
    for i in range(len(blob)):
        for bit in (0x01, 0x80):
            damaged = bytearray(blob)
            damaged[i] ^= bit
            with pytest.raises(CorruptDeletionVectorError) as info:
                decode_dv(bytes(damaged), source=f"seg-x@{i}")
            assert info.value.source == f"seg-x@{i}"
            assert info.value.problem
            assert info.value.message.startswith(f"seg-x@{i}: ")


@pytest.mark.parametrize("blob", CORPUS.values(), ids=CORPUS.keys())
def test_every_truncation_is_rejected(blob: bytes) -> None:
    for n in range(len(blob)):
        with pytest.raises(CorruptDeletionVectorError):
            decode_dv(blob[:n], source="trunc")


def test_trailing_garbage_is_rejected() -> None:
    blob = encode_dv(SAMPLE)
    for extra in (b"\x00", b"\x00" * 4, b"garbage!"):
        with pytest.raises(CorruptDeletionVectorError, match="length field"):
            decode_dv(blob + extra, source="t")


def test_bad_magic_is_rejected_even_with_valid_crc() -> None:
    bad = frame(BitMap64([1]).serialize(), magic=b"\x64\x39\xd3\xd1")
    with pytest.raises(CorruptDeletionVectorError, match="magic"):
        decode_dv(bad, source="t")


def test_bytes_after_bitmap_inside_valid_frame_are_rejected() -> None:
    # pyroaring's deserialize ignores leftovers; a correctly framed blob with junk after
    # the bitmap is still not what any honest writer produces.
    with pytest.raises(CorruptDeletionVectorError, match="unexpected bytes"):
        decode_dv(frame(BitMap64([1, 2]).serialize() + b"\x00\x00"), source="t")


@pytest.mark.parametrize(
    "bitmap_bytes",
    [
        struct.pack("<Q", 2) + struct.pack("<I", 5) + BitMap([1]).serialize() + struct.pack("<I", 5) + BitMap([2]).serialize(),
        struct.pack("<Q", 2) + struct.pack("<I", 6) + BitMap([1]).serialize() + struct.pack("<I", 5) + BitMap([2]).serialize(),
        struct.pack("<Q", 2**62) + struct.pack("<I", 0) + BitMap([1]).serialize(),
        struct.pack("<Q", 1) + struct.pack("<I", 0) + bytes(8),
        struct.pack("<Q", 1)
        + struct.pack("<I", 0)
        + struct.pack("<II", 12346, 1)
        + struct.pack("<HH", 0, 2)
        + struct.pack("<I", 16)
        + struct.pack("<3H", 3, 2, 1),
        struct.pack("<Q", 1)
        + struct.pack("<I", 0)
        + struct.pack("<II", 12346, 1)
        + struct.pack("<HH", 0, 4999)
        + struct.pack("<I", 16)
        + b"\xff" * 750
        + bytes(8192 - 750),
        struct.pack("<Q", 1)
        + struct.pack("<I", 0)
        + struct.pack("<IB", 12347, 1)
        + struct.pack("<HH", 0, 6)
        + struct.pack("<5H", 2, 10, 4, 3, 1),
        b"",
    ],
    ids=[
        "duplicate-keys",
        "descending-keys",
        "huge-count",
        "bad-cookie",
        "unsorted-array",
        "bitset-card-lie",
        "unsorted-runs",
        "no-bitmap",
    ],
)
def test_structurally_invalid_bitmaps_with_valid_crc_are_rejected(bitmap_bytes: bytes) -> None:
    with pytest.raises(CorruptDeletionVectorError):
        decode_dv(frame(bitmap_bytes), source="hostile")


# -- helpers -------------------------------------------------------------------------------


def test_positions_array_and_back() -> None:
    bm = BitMap64(SAMPLE)
    arr = positions_array(bm)
    assert arr.dtype == np.uint64
    assert arr.tolist() == sorted(SAMPLE)
    assert bitmap_from_array(arr) == bm
    assert positions_array(BitMap64()).size == 0
    assert bitmap_from_array(np.array([5, 3, 5, 0], dtype=np.int64)) == BitMap64([0, 3, 5])
    assert bitmap_from_array(np.array([], dtype=np.int64)) == BitMap64()
    assert bitmap_from_array(np.array([[1, 2], [3, 4]], dtype=np.uint32)) == BitMap64([1, 2, 3, 4])
    with pytest.raises(ValueError):
        bitmap_from_array(np.array([1, -1], dtype=np.int64))
    with pytest.raises(TypeError):
        bitmap_from_array(np.array([1.0]))
    with pytest.raises((ValueError, OverflowError)):
        encode_dv([-1])


def test_visibility_package_keeps_its_layering() -> None:
    root = pathlib.Path(__file__).resolve().parents[2] / "visibility"
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
                if node.level:
                    names = [f".{n}" for n in names]
            for name in names:
                assert not name.startswith(("mvtable.lineage", "mvtable.connector", "pyspark", "lineage", "connector")), (
                    f"{path.name} imports {name}"
                )
                assert not name.startswith(("..", ".lineage", ".connector")), f"{path.name} imports {name}"
