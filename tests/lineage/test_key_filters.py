"""The key filters and the commit-time key rule (pure: no I/O), and the primary key as
table metadata through replay and checkpoints."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptKeyIndexError, CorruptMetadataError
from mvtable.lineage.actions import AddSegment, Commit, InsertedKeys, MetadataAction, SegmentFile, SetDeletionVector
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import Operation
from mvtable.lineage.key_filters import (
    UNKNOWN_KEYS,
    KeyBloom,
    _positions,
    inserted_keys,
    key_effect,
    key_effects,
    possible_conflicts,
)
from mvtable.lineage.snapshot import replay

hashes = st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=300).map(lambda v: np.array(v, dtype=np.uint64))


@settings(max_examples=60, deadline=None)
@given(hashes)
def test_a_filter_never_misses_a_key_it_holds(keys: np.ndarray) -> None:
    bloom = KeyBloom.from_bytes(KeyBloom.build(keys).to_bytes())
    assert bloom.may_contain(keys).all()
    assert bloom.num_keys == len(keys)


@settings(max_examples=30, deadline=None)
@given(hashes, hashes, st.sampled_from([10, 24, 32]), st.sampled_from([None, 1, 16]))
def test_probing_probe_by_probe_answers_as_probing_all_at_once(
    present: np.ndarray, probed: np.ndarray, bits: int, k: int | None
) -> None:
    """``may_contain`` only probes the keys every earlier probe found set; the answer must
    be the filter's definition: all ``k`` bits set (``_positions`` is what ``build`` sets)."""
    bloom = KeyBloom.build(present, bits_per_key=bits, num_hashes=k)
    assert bloom.num_hashes == (k if k is not None else round(bits * np.log(2)))
    probed = np.concatenate([probed, present[: len(present) // 2]])
    if not len(probed):
        return
    pos = _positions(probed, bloom.num_bits, bloom.num_hashes)
    flat = np.unpackbits(bloom.bits, bitorder="little").astype(bool)
    assert bloom.may_contain(probed).tolist() == flat[pos.astype(np.int64)].all(axis=1).tolist()
    # stopping early answers "maybe" for every key the full probe does (and maybe a few more)
    full = bloom.may_contain(probed)
    for enough in (1, 8, len(probed)):
        early = bloom.may_contain(probed, enough=enough)
        assert (early | ~full).all() and early[len(probed) - len(present) // 2 :].all()


def test_false_positives_stay_near_one_percent() -> None:
    rng = np.random.default_rng(7)
    present = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
    absent = rng.integers(0, 2**63, 50_000, dtype=np.uint64)
    absent = absent[~np.isin(absent, present)]
    rate = KeyBloom.build(present).may_contain(absent).mean()
    assert rate < 0.03, rate


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b[:10], "too short"),
        (lambda b: b"XXXX" + b[4:], "bad magic"),
        (lambda b: b[:-5] + bytes([b[-5] ^ 1]) + b[-4:], "checksum"),
        (lambda b: b[:-4] + b"\0" * 8, "does not match"),
    ],
)
def test_a_damaged_filter_is_refused(damage, message) -> None:
    data = KeyBloom.build(np.arange(100, dtype=np.uint64)).to_bytes()
    with pytest.raises(CorruptKeyIndexError, match=message):
        KeyBloom.from_bytes(damage(data))


def _commit(version: int, *actions) -> Commit:
    return Commit(version=version, read_version=version - 1, timestamp_ms=1, operation=Operation.APPEND, actions=actions)


def _segment(sid: str) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=1, size_bytes=1)


def test_what_a_commit_did_to_the_keys() -> None:
    mine = np.array([11, 22, 33], dtype=np.uint64)
    keyed = _commit(3, AddSegment(segment=_segment("a")), inserted_keys(("id",), np.array([22], dtype=np.uint64)))
    other = _commit(4, AddSegment(segment=_segment("b")), inserted_keys(("id",), np.array([99], dtype=np.uint64)))
    keyless = _commit(5, AddSegment(segment=_segment("c")))
    deletes = _commit(6, SetDeletionVector(segment_id="a", dv=DeletionVectorRef(cardinality=0, inline="AA==")))
    effects = [(c.version, key_effect(c)) for c in (keyed, other, keyless, deletes)]
    assert isinstance(effects[0][1], KeyBloom)
    assert effects[2][1] is UNKNOWN_KEYS
    assert effects[3][1] is None
    # the keyed winner that holds 22 and the keyless append conflict; 99's filter says no
    assert possible_conflicts(mine, effects) == [3, 5]
    assert possible_conflicts(np.zeros(0, dtype=np.uint64), effects) == []


def test_a_corrupt_inserted_key_filter_is_a_typed_error() -> None:
    bad = InsertedKeys(columns=("id",), count=1, bloom=base64.b64encode(b"not a filter").decode())
    with pytest.raises(CorruptKeyIndexError, match="inserted-key filter"):
        key_effect(_commit(1, bad))


def test_the_primary_key_is_table_metadata() -> None:
    create = _commit(0, MetadataAction(table_id="t1", table_schema={"fields": []}, primary_key=("a", "b")))
    props = _commit(1, MetadataAction(table_id="t1", table_schema={"fields": []}, properties={"x": "1"}))
    snap = replay([create, props])
    assert snap.primary_key == ("a", "b")  # a later metadata action without a key keeps it
    again = parse_checkpoint(checkpoint_bytes(snap), source="cp", expected_version=1)
    assert again.primary_key == ("a", "b")
    change = _commit(2, MetadataAction(table_id="t1", table_schema={"fields": []}, primary_key=("a",)))
    with pytest.raises(CorruptMetadataError, match="primary key"):
        replay([create, props, change])


def test_deletion_vectors_that_bring_rows_back_count_as_unknown_keys() -> None:
    def dv(n: int) -> DeletionVectorRef:
        return DeletionVectorRef(cardinality=n, inline="AA==")

    grow = _commit(1, SetDeletionVector(segment_id="a", dv=dv(3)))
    shrink = _commit(2, SetDeletionVector(segment_id="a", dv=dv(1)))
    restore = Commit(
        version=3,
        read_version=2,
        timestamp_ms=1,
        operation=Operation.RESTORE,
        actions=(SetDeletionVector(segment_id="b", dv=dv(9)),),
    )
    effects = key_effects([grow, shrink, restore], {"a": 2, "b": 5})
    assert [e for _, e in effects] == [None, UNKNOWN_KEYS, UNKNOWN_KEYS]
