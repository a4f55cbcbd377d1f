"""Key hashes are the contract between the process that writes a key filter and every
process that probes it, so they are pinned to known values and must not depend on how the
values happen to be laid out in memory."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa

from mvtable.connector.key_hashing import hash_keys

SAMPLE = pa.table({"i": pa.array([0, 1, -1, 2**40], pa.int64()), "s": ["", "a", "héllo", "x" * 20]})


def test_hashes_are_pinned() -> None:
    # splitmix64's first output for seed 0 is 0xe220a8397b1dcdaf: integers use its steps
    assert [hex(h) for h in hash_keys(SAMPLE, ["i"])] == [
        "0xe220a8397b1dcdaf",
        "0x910a2dec89025cc1",
        "0xe4d971771b652c20",
        "0x1fdd7128f310c389",
    ]
    assert [hex(h) for h in hash_keys(SAMPLE, ["s"])] == [
        "0xf52a15e9a9b5e89b",
        "0x8097ca68b9cc797b",
        "0x7171b58b6430cbd1",
        "0x6fa6c371bd4f806b",
    ]
    assert [hex(h) for h in hash_keys(SAMPLE, ["i", "s"])] == [
        "0x6ee24a4e633b1942",
        "0x59ee5c401d1c358b",
        "0x53ef5e0950c168d8",
        "0x1794df217c2fc672",
    ]


def test_layout_does_not_change_a_hash() -> None:
    whole = hash_keys(SAMPLE, ["i", "s"])
    chunked = pa.concat_tables([SAMPLE.slice(0, 1), SAMPLE.slice(1, 2), SAMPLE.slice(3)])
    assert (hash_keys(chunked, ["i", "s"]) == whole).all()
    assert (hash_keys(SAMPLE.slice(2), ["i", "s"]) == whole[2:]).all()  # a sliced array keeps its offset
    large = SAMPLE.cast(pa.schema([("i", pa.int64()), ("s", pa.large_string())]))
    assert (hash_keys(large, ["s"]) == hash_keys(SAMPLE, ["s"])).all()


def test_every_key_type_hashes_distinct_values_apart() -> None:
    n = 5000
    table = pa.table(
        {
            "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=i) for i in range(n)], pa.date32()),
            "ts": pa.array([dt.datetime(2020, 1, 1) + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us")),
            "dec": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "u": pa.array(np.arange(n, dtype=np.uint64) + np.uint64(2**63), pa.uint64()),
        }
    )
    for col in table.column_names:
        assert len(np.unique(hash_keys(table, [col]))) == n, col
    # composite keys: (a, b) and (b, a) differ
    swapped = pa.table({"a": [1, 2], "b": [2, 1]})
    h = hash_keys(swapped, ["a", "b"])
    assert h[0] != h[1]
