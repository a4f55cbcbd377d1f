"""Bloom filters of primary-key hashes, and the commit-time duplicate-key rule.

A keyed table writes two kinds of key filter: one per segment (beside its Parquet file, so a
lookup skips segments that cannot hold a key) and one per commit that appends keyed rows (the
``InsertedKeys`` action, so a concurrent writer can tell whether a commit it lost the race to may
have inserted one of its keys — Lance's merge_insert duplicated keys without it). Both are the
same structure over the same 64-bit key hashes (``mvtable.connector.key_hashing``).

The filter is a classic Bloom filter: ``k`` bit positions per key from one 64-bit hash by double
hashing (Kirsch–Mitzenmacher), ~10 bits per key for ~1% false positives. A false positive only
costs work (the caller checks the real keys); a key that is present always answers "maybe".
Everything here is pure: numpy in, numpy out, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mvtable.errors import CorruptKeyIndexError

from .actions import AddSegment, Commit, InsertedKeys, LineageEnd, LineageRevert, SetDeletionVector
from .enums import Operation

__all__ = [
    "BITS_PER_KEY",
    "UNKNOWN_KEYS",
    "KeyBloom",
    "inserted_keys",
    "key_effect",
    "key_effects",
    "possible_conflicts",
]

BITS_PER_KEY = 10  # ~1% false positives: a commit's inserted keys (a "maybe" costs one exact look)
_MAGIC = b"MVKB"
_HEADER = struct.Struct("<4sBBxxQQ")  # magic, format, k, pad, bits, keys
_CRC = struct.Struct("<I")
_FORMAT = 1
_LOW = np.uint64(0xFFFFFFFF)


class KeyBloom:
    """A Bloom filter over 64-bit key hashes (``np.uint64``)."""

    __slots__ = ("bits", "num_bits", "num_hashes", "num_keys")

    def __init__(self, bits: np.ndarray, num_bits: int, num_hashes: int, num_keys: int) -> None:
        self.bits = bits  # packed little-endian, num_bits / 8 bytes
        self.num_bits = num_bits
        self.num_hashes = num_hashes
        self.num_keys = num_keys

    @classmethod
    def build(cls, hashes: np.ndarray, *, bits_per_key: int = BITS_PER_KEY, num_hashes: int | None = None) -> KeyBloom:
        """The filter of ``hashes`` (duplicates are fine), with ``num_hashes`` probes per key.

        The default count is the one that minimises false positives, ``bits_per_key * ln 2``.
        Every probe is a random write when building and a random read for each key that is
        present when probing, so a large filter may take fewer at a small cost in false
        positives; the count is stored in the filter, so readers need not know it."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        num_bits = max(64, -(-len(hashes) * bits_per_key // 64) * 64)
        if num_hashes is None:
            num_hashes = max(1, round(bits_per_key * math.log(2)))
        elif not 1 <= num_hashes <= 255:
            raise ValueError(f"num_hashes must be between 1 and 255, not {num_hashes}")
        flat = np.zeros(num_bits, dtype=bool)
        # probe i sets bit (h1 + i*h2) mod m (``_positions``), stepped here one probe at a
        # time: an addition and a conditional subtraction instead of a modulo per bit
        # (h1 + i*h2 stays below 2^38, so no wrap-around changes the sum)
        pos = ((hashes & _LOW) % np.uint64(num_bits)).astype(np.int64)
        step = (((hashes >> np.uint64(32)) | np.uint64(1)) % np.uint64(num_bits)).astype(np.int64)
        for i in range(num_hashes):
            flat[pos] = True
            if i + 1 < num_hashes:
                pos += step
                np.subtract(pos, num_bits, out=pos, where=pos >= num_bits)
        return cls(np.packbits(flat, bitorder="little"), num_bits, num_hashes, len(hashes))

    def may_contain(self, hashes: np.ndarray, *, enough: int | None = None) -> np.ndarray:
        """For each hash: False when the key is certainly absent, True when it may be there.

        Probe by probe, only over the keys every earlier probe found set: in a filter about
        half full, half the absent keys drop out at each probe, so ``k`` probes cost about
        two passes over the keys instead of ``k`` (the lookup of an append probes every
        segment's filter with every key).

        With ``enough``, probing may stop early — once at least ``enough`` keys are left and
        a probe dropped fewer than one in eight of them, what is left is mostly keys the
        filter holds — and answer True for a few more absent keys than the full filter
        would. For a caller that reads the same data for ``enough`` keys as for a few more
        (a lookup whose keys cover every row group)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        m = np.uint64(self.num_bits)
        # bit (h1 + i*h2) mod m stepped as in ``build``: one modulo per key for h1 and one
        # per surviving key for h2 (after the first probe, most absent keys are gone),
        # instead of a 64-bit modulo per key and probe
        pos = (hashes & _LOW) % m
        step: np.ndarray | None = None
        alive: np.ndarray | None = None  # indices of the keys still "maybe"; None: all of them
        for i in range(self.num_hashes):
            if i:
                if step is None:
                    h2 = ((hashes if alive is None else hashes[alive]) >> np.uint64(32)) | np.uint64(1)
                    step = h2 % m
                pos += step
                np.minimum(pos, pos - m, out=pos)  # pos - m wraps around to a huge value when pos < m
            hit = ((self.bits[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1).view(bool)
            before = len(pos)
            kept = np.flatnonzero(hit)
            if len(kept) < before:
                alive = kept if alive is None else alive[kept]
                pos = pos[kept]
                if step is not None:
                    step = step[kept]
            if not len(pos):
                break
            if enough is not None and len(pos) >= enough and (before - len(pos)) * 8 < before:
                break
        if alive is None:
            return np.ones(len(hashes), dtype=bool)
        out = np.zeros(len(hashes), dtype=bool)
        out[alive] = True
        return out

    def to_bytes(self) -> bytes:
        body = _HEADER.pack(_MAGIC, _FORMAT, self.num_hashes, self.num_bits, self.num_keys) + self.bits.tobytes()
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "key filter") -> KeyBloom:
        """Parse a serialized filter.

        Raises:
            CorruptKeyIndexError: ``data`` is not a valid filter; the error names ``source`` and what is wrong."""
        if len(data) < _HEADER.size + _CRC.size:
            raise CorruptKeyIndexError(source, f"{len(data)} bytes is too short for a key filter")
        magic, fmt, k, num_bits, num_keys = _HEADER.unpack_from(data)
        if magic != _MAGIC:
            raise CorruptKeyIndexError(source, "not a key filter (bad magic)")
        if fmt != _FORMAT:
            raise CorruptKeyIndexError(source, f"key filter format {fmt} is not supported (this mvtable reads {_FORMAT})")
        if num_bits == 0 or num_bits % 64 or k == 0 or len(data) != _HEADER.size + num_bits // 8 + _CRC.size:
            raise CorruptKeyIndexError(
                source, f"key filter of {num_bits} bits and {k} hashes does not match its {len(data)} bytes"
            )
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if zlib.crc32(data[: -_CRC.size]) != crc:
            raise CorruptKeyIndexError(source, "key filter checksum mismatch")
        bits = np.frombuffer(data, dtype=np.uint8, count=num_bits // 8, offset=_HEADER.size)
        return cls(bits, num_bits, k, num_keys)


def _positions(hashes: np.ndarray, num_bits: int, num_hashes: int) -> np.ndarray:
    """``(len(hashes), num_hashes)`` bit positions: ``h1 + i * h2 mod m`` (h2 odd, never 0)."""
    h1 = hashes & _LOW
    h2 = (hashes >> np.uint64(32)) | np.uint64(1)
    steps = np.arange(num_hashes, dtype=np.uint64)
    positions: np.ndarray = (h1[:, None] + steps[None, :] * h2[:, None]) % np.uint64(num_bits)
    return positions


class _Unknown:
    """A commit that made rows visible without saying which keys they hold."""

    def __repr__(self) -> str:
        return "UNKNOWN_KEYS"


UNKNOWN_KEYS = _Unknown()


def inserted_keys(columns: tuple[str, ...], hashes: np.ndarray) -> InsertedKeys:
    """The ``InsertedKeys`` action of a commit that appends rows with these key hashes."""
    bloom = KeyBloom.build(hashes)
    return InsertedKeys(columns=columns, count=len(hashes), bloom=base64.b64encode(bloom.to_bytes()).decode())


def key_effect(commit: Commit, *, source: str = "") -> KeyBloom | _Unknown | None:
    """What a commit may have done to the keys a table holds, as seen by a concurrent keyed writer.

    That is the filter of the keys it inserted; ``UNKNOWN_KEYS`` when it made rows visible
    without recording them (a keyless append, a publish, a revert or restore that brings old
    segments back, a compaction's outputs); ``None`` when it made no row visible.

    Raises:
        CorruptKeyIndexError: The commit's inserted-key filter cannot be decoded."""
    for action in commit.actions:
        if isinstance(action, InsertedKeys):
            where = source or f"log version {commit.version}"
            try:
                data = base64.b64decode(action.bloom, validate=True)
            except binascii.Error as exc:
                raise CorruptKeyIndexError(where, f"inserted-key filter: {exc}") from None
            return KeyBloom.from_bytes(data, source=f"{where}: inserted-key filter")
    if any(isinstance(a, (AddSegment, LineageEnd, LineageRevert)) for a in commit.actions):
        return UNKNOWN_KEYS
    return None


def key_effects(commits: Sequence[Commit], dv_cardinality: Mapping[str, int]) -> list[tuple[int, KeyBloom | _Unknown | None]]:
    """``key_effect`` of consecutive commits, given the cardinality of each segment's deletion vector before the first.

    A segment absent from the cardinalities has no deletion vector. A commit that sets a DV
    that does not grow (deletes only ever add rows to a DV) or that restores an old version
    may bring deleted rows back, so its effect is ``UNKNOWN_KEYS`` too."""
    card = dict(dv_cardinality)
    out: list[tuple[int, KeyBloom | _Unknown | None]] = []
    for commit in commits:
        effect = key_effect(commit)
        for action in commit.actions:
            if isinstance(action, SetDeletionVector):
                # a restore may give a segment back an older deletion vector: rows deleted since come back
                if action.dv.cardinality <= card.get(action.segment_id, 0) or commit.operation == Operation.RESTORE:
                    effect = UNKNOWN_KEYS
                card[action.segment_id] = action.dv.cardinality
        out.append((commit.version, effect))
    return out


def possible_conflicts(mine: np.ndarray, winners: Iterable[tuple[int, KeyBloom | _Unknown | None]]) -> list[int]:
    """The commit-time rule: the versions among the commits since my last check that may have made one of my keys visible.

    The commits come as ``(version, key_effect)``. Empty means no concurrent commit can have
    inserted any of my keys; otherwise the caller looks at the real rows those commits made
    visible (a Bloom filter may say "maybe" falsely)."""
    if not len(mine):
        return []
    out = []
    for version, effect in winners:
        if effect is UNKNOWN_KEYS or (isinstance(effect, KeyBloom) and bool(effect.may_contain(mine).any())):
            out.append(version)
    return out
