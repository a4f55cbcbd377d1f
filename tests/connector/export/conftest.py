"""A table with a history worth exporting: appends, file and inline deletion vectors, a
consistent push and a restore, with decimals, timestamps and nested columns."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("price", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tags", pa.list_(pa.string())),
        ("small", pa.int16()),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"n{i}" for i in ids],
            "price": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
            "ts": pa.array([t0 + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "tags": [[f"t{i % 3}"] * (i % 3) for i in ids],
            "small": pa.array([i % 1000 for i in ids], pa.int16()),
        },
        schema=SCHEMA,
    )


def sorted_rows(table: pa.Table) -> list[dict]:
    """Rows as dicts ordered by id, values as Python objects (types compared by value)."""
    return sorted(table.to_pylist(), key=lambda r: r["id"])


@pytest.fixture
def history_table(tmp_path: Path) -> Table:
    """Versions: 0 create, 1-2 appends, 3 a large delete (a DV file), 4 a one-row delete
    (an inline DV), 5-6 a consistent push replacing everything (start, end), 7 a restore of
    version 4 (the old segments come back as clones, with their DVs)."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, properties={"rowGroupRows": "700"})
    t.append(rows(0, 3000))
    t.append(rows(3000, 1000))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 3), 1) & (pc.field("id") < 3000))
    t.delete(pc.field("id") == 3002)
    t.overwrite(rows(5000, 500), consistent_push=True)
    t.restore(version=4)
    assert t.version == 7
    return t


def tree(root: str, *folders: str) -> dict[str, str]:
    """Relative path -> sha1 of every file under ``folders`` of ``root``."""
    out = {}
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, root)] = hashlib.sha1(f.read()).hexdigest()
    return out
