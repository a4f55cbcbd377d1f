"""The bounds a native scan plan gives each file: every row of the file lies within them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mvtable.connector import Table
from mvtable.connector.partitions.transforms import parse_transform
from mvtable.connector.spark.native_partitions import file_bounds

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def rows(n: int) -> pa.Table:
    t0 = dt.datetime(2025, 12, 30, 22, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "id": pa.array([i * 37 - 500 for i in range(n)], pa.int64()),
            "ts": pa.array(
                [None if i % 13 == 0 else t0 + dt.timedelta(minutes=97 * i) for i in range(n)], pa.timestamp("us", tz="UTC")
            ),
            "local": pa.array(
                [dt.datetime(2026, 2, 27, 23) + dt.timedelta(minutes=53 * i) for i in range(n)], pa.timestamp("us")
            ),
            "d": pa.array([dt.date(2025, 11, 30) + dt.timedelta(days=3 * i) for i in range(n)], pa.date32()),
            "name": [["alpha", "alpine", "beta", "b", "", "zz\U0010ffff"][i % 6] for i in range(n)],
            "price": pa.array([Decimal(i * 7 - 40) / 4 for i in range(n)], pa.decimal128(9, 2)),
            "region": [["eu", "us", None][i % 3] for i in range(n)],
        }
    )


def spark_value(v: Any) -> Any:
    """A row value as Spark holds it internally (what the bounds are written in)."""
    if isinstance(v, dt.datetime):
        aware = v if v.tzinfo else v.replace(tzinfo=dt.timezone.utc)
        return (aware - EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return (v - EPOCH.date()).days
    return v


def within(value: Any, bound: dict[str, Any], column_type: pa.DataType) -> bool:
    kind = bound["kind"]
    if kind == "null":
        return value is None
    if value is None:
        return False
    if kind == "notNull":
        return True
    if kind == "bucket":
        return parse_transform(f"bucket[{bound['n']}]").apply_scalar(value, column_type) == bound["value"]
    v = spark_value(value)
    convert = Decimal if bound["type"] == "dec" else (lambda x: x)
    if kind == "eq":
        return v == convert(bound["value"])
    return convert(bound["lo"]) <= v and (bound["hi"] is None or v < convert(bound["hi"]))


def test_every_row_lies_within_its_files_bounds(tmp_path: Path) -> None:
    data = rows(240)
    t = Table.create(str(tmp_path / "t"), schema=data.schema)
    specs = [
        ["day(ts)", "region"],
        ["hour(local)", "bucket(5, id)"],
        ["month(d)", "truncate(2, name)"],
        ["year(ts)", "truncate(10, id)", "truncate(3, price)"],
        ["bucket(3, d)", "bucket(4, ts)", "name"],
    ]
    for items in specs:
        t.update_partitioning(items)
        t.append(data)
    snap = t.snapshot()
    segments = snap.visible_segments()
    bounds = file_bounds(snap, segments)
    assert set(bounds) == {seg.id for seg in segments}
    kinds = set()
    for seg in segments:
        own = pq.read_table(Path(t.uri) / seg.file.path)
        for bound in bounds[seg.id]:
            kinds.add(bound["kind"])
            column = own.column(bound["column"])
            assert all(within(v, bound, column.type) for v in column.to_pylist()), (seg.file.partition, bound)
    assert kinds == {"null", "eq", "range", "bucket"}
