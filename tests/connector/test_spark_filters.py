"""Spark's pushed filters as ``Predicate``s (pure: no Spark session needed)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualNullSafe, EqualTo, GreaterThanOrEqual, In, IsNull, LessThan

from mvtable.connector.predicates import check_predicates
from mvtable.connector.spark.filters import pushdown_predicate
from mvtable.connector.stats import Predicate

SCHEMA = pa.schema([("x", pa.decimal128(15, 2)), ("id", pa.int64())])
ROWS = pa.table({"x": pa.array([Decimal("1.50"), Decimal("24.00"), Decimal("30.00")], SCHEMA.field("x").type), "id": [1, 2, 3]})


@pytest.mark.parametrize(
    ("spark_filter", "kept"),
    [
        (LessThan(("x",), 24), [1]),
        (EqualTo(("x",), 24), [2]),
        (EqualNullSafe(("x",), 30), [3]),
        (In(("x",), (24, 30)), [2, 3]),
        (LessThan(("x",), Decimal("24.5")), [1, 2]),
    ],
)
def test_integer_literals_against_a_decimal_column_compare_as_decimals(spark_filter, kept):
    """Spark may push ``x < 24`` with an int; Arrow refuses to compare decimal128 with int64."""
    predicate, claim = pushdown_predicate(spark_filter, SCHEMA)
    assert predicate is not None and claim
    check_predicates([predicate], SCHEMA)  # what planning the scan checks
    assert ROWS.filter(predicate.expression()).column("id").to_pylist() == kept


ZONED = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("wall", pa.timestamp("us"))])


def test_time_literals_prune_but_are_not_claimed():
    """Spark hands a ``timestamp`` literal as an aware datetime (its instant) and a
    ``timestamp_ntz`` one as a naive datetime; each is pushed only against the column kind it
    fits, as the same instant or wall-clock time."""
    paris = dt.timezone(dt.timedelta(hours=1))
    instant = dt.datetime(2024, 1, 5, 1, 0, tzinfo=paris)  # 00:00 UTC
    predicate, claim = pushdown_predicate(GreaterThanOrEqual(("ts",), instant), ZONED)
    assert predicate == Predicate("ts", ">=", dt.datetime(2024, 1, 5, tzinfo=dt.timezone.utc)) and not claim
    assert predicate.value.utcoffset() == dt.timedelta(0)
    wall = dt.datetime(2024, 1, 5, 1, 0)
    assert pushdown_predicate(LessThan(("wall",), wall), ZONED) == (Predicate("wall", "<", wall), False)
    assert pushdown_predicate(In(("wall",), (wall,)), ZONED) == (Predicate("wall", "in", (wall,)), False)
    # the wrong kind of time for the column is not pushed: what instant it means is unknown
    assert pushdown_predicate(LessThan(("ts",), wall), ZONED) == (None, False)
    assert pushdown_predicate(LessThan(("wall",), instant), ZONED) == (None, False)
    assert pushdown_predicate(IsNull(("ts",)), ZONED) == (Predicate("ts", "is_null"), True)
    rows = pa.table(
        {
            "ts": pa.array([dt.datetime(2024, 1, 4, 23, tzinfo=dt.timezone.utc), instant], ZONED.field("ts").type),
            "wall": pa.array([wall, wall], pa.timestamp("us")),
        }
    )
    assert rows.filter(predicate.expression()).num_rows == 1
