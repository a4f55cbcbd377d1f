"""A small events table for the partition tests: a timestamp, a date, a region, ids and names."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

START = dt.datetime(2024, 1, 1)


def events(n: int = 200, *, start: int = 0, hours: int = 5, nulls: bool = False) -> pa.Table:
    """``n`` rows, one every ``hours`` hours from 2024-01-01; with ``nulls`` every 7th ts and region is null."""
    idx = range(start, start + n)
    ts = [None if nulls and i % 7 == 0 else START + dt.timedelta(hours=hours * i) for i in idx]
    return pa.table(
        {
            "id": pa.array(list(idx), pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "day": pa.array([None if t is None else t.date() for t in ts], pa.date32()),
            "region": pa.array([None if nulls and i % 7 == 0 else ("eu", "us", "apac")[i % 3] for i in idx]),
            "name": pa.array([f"name-{i:04d}" for i in idx]),
            "amount": pa.array([Decimal(i) / 4 for i in idx], pa.decimal128(10, 2)),
        }
    )
