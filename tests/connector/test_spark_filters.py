"""Spark's pushed filters as ``Predicate``s (pure: no Spark session needed)."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualNullSafe, EqualTo, In, LessThan

from mvtable.connector.predicates import check_predicates
from mvtable.connector.spark.filters import pushdown_predicate

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
