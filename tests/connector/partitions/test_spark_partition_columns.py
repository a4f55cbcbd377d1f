"""Columns that every file's partition fixes (identity, ``day`` of a date, a null value) are Spark
partition columns of the native scan: not read from the files, filtered per partition (exactly:
Spark does not test those filters on the rows again), and given back in the table's column order."""

from __future__ import annotations

import datetime as dt
import os
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from tests.support.spark_session import assert_route, plan_of

pytestmark = pytest.mark.spark

D0 = dt.date(2026, 3, 1)
REGIONS = ["eu", "us", None]


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "d": pa.array([D0 + dt.timedelta(days=i % 6) for i in ids], pa.date32()),
            "region": [REGIONS[i % 3] for i in ids],
            "amount": pa.array([i * 0.5 for i in ids], pa.float64()),
        }
    )


@pytest.fixture
def table(tmp_path) -> Table:
    """Six days by ``day(d)``, three regions (one null) by identity, two buckets of ``id``; every seventh row deleted."""
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema, partition_by=["day(d)", "region", "bucket(2, id)"])
    t.append(rows(0, 900))
    t.append(rows(900, 900))
    t.delete(pc.field("id").isin(list(range(0, 1800, 7))))
    return t


def scan_node(df) -> str:
    [line] = [x for x in plan_of(df).splitlines() if "FileScan" in x]
    return line


def read_columns(df) -> list[str]:
    """The columns the scan reads from the files (its ``ReadSchema``)."""
    fields = re.search(r"ReadSchema: struct<([^>]*)>", scan_node(df)).group(1)
    return [f.split(":")[0] for f in fields.split(",")]


def expected(table: Table, where: pc.Expression | None = None) -> list[tuple]:
    got = table.scan(filter=where).to_arrow() if where is not None else table.to_arrow()
    return sorted(zip(*[got.column(c).to_pylist() for c in ("id", "d", "region", "amount")]), key=lambda r: r[0])


def collected(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=lambda r: r[0])


@pytest.mark.parametrize("how", ["format", "read_native", "create_view"])
def test_fixed_columns_are_partition_values_and_filters_on_them_are_exact(spark, table, how) -> None:
    if how == "format":
        df = spark.read.format("mvtable").load(table.uri)
    elif how == "read_native":
        df = mvtable.read_native(spark, table.uri)
    else:
        mvtable.create_view(spark, "mv_fixed_columns", table.uri)
        df = spark.table("mv_fixed_columns")
    everything = expected(table)
    try:
        assert_route(df, "native")
        assert df.columns == ["id", "d", "region", "amount"]
        assert collected(df) == everything
        assert read_columns(df) == ["id", "amount", "_mv_deleted"]

        day2 = D0 + dt.timedelta(days=2)
        cases = {
            "region = 'eu'": pc.field("region") == "eu",
            "region IS NULL": pc.field("region").is_null(),
            f"d = date'{day2}'": pc.field("d") == day2,
            f"d >= date'{day2}' AND region <> 'us'": (pc.field("d") >= day2) & (pc.field("region") != "us"),
            # a filter on a served column and a read one is tested on the rows
            "region = 'eu' OR id < 20": (pc.field("region") == "eu") | (pc.field("id") < 20),
            "coalesce(region, 'none') = 'none' AND amount > 100": pc.field("region").is_null() & (pc.field("amount") > 100),
        }
        for sql, arrow in cases.items():
            assert collected(df.where(sql)) == expected(table, arrow), sql
        node = scan_node(df.where("region = 'eu'"))
        assert re.search(r"PartitionFilters: \[[^\]]*region", node), node

        # a filter on served columns only never opens another partition's file
        keep = {s.file.path for s in table.snapshot().visible_segments() if s.file.partition[1] == "eu"}
        for seg in table.snapshot().visible_segments():
            if seg.file.path not in keep:
                os.remove(os.path.join(table.uri, seg.file.path))
        assert collected(df.where("region = 'eu'")) == [r for r in everything if r[2] == "eu"]
    finally:
        if how == "create_view":
            mvtable.drop_view(spark, "mv_fixed_columns")


def test_a_column_an_older_spec_does_not_fix_is_read_from_the_files(spark, table) -> None:
    """After ``month(d)`` replaces ``day(d)``, the new files hold a month of ``d``: it is read from
    every file again, while ``region``, which both specs fix, stays a partition value."""
    table.update_partitioning(["month(d)", "region"])
    table.append(rows(1800, 300))
    df = spark.read.format("mvtable").load(table.uri)
    assert read_columns(df) == ["id", "d", "amount", "_mv_deleted"]
    day2 = D0 + dt.timedelta(days=2)
    assert collected(df) == expected(table)
    where = (pc.field("d") == day2) & pc.field("region").is_null()
    assert collected(df.where(f"d = date'{day2}' AND region IS NULL")) == expected(table, where)
