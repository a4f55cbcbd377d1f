"""Row-group statistics and pruning: sound (never skips a matching row group)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mvtable.connector.stats import Predicate, column_stats, may_match, row_groups_to_read
from mvtable.lineage.actions import RowGroupInfo


def rg_of(table: pa.Table) -> RowGroupInfo:
    return RowGroupInfo(num_rows=table.num_rows, first_row=0, total_byte_size=0, stats=column_stats(table))


def test_stats_encode_each_type():
    t = pa.table(
        {
            "i": pa.array([3, 1, None], pa.int32()),
            "d": pa.array([dt.date(2026, 1, 5), dt.date(2026, 1, 1), None]),
            "dec": pa.array([Decimal("1.10"), Decimal("-2.00"), None], pa.decimal128(5, 2)),
            "ts": pa.array([dt.datetime(2026, 1, 1), None, None], pa.timestamp("ms", tz="UTC")),
            "f": pa.array([1.0, float("nan"), None]),
            "bin": pa.array([b"a", b"b", None]),
        }
    )
    s = column_stats(t)
    assert (s["i"].min, s["i"].max, s["i"].null_count) == (1, 3, 1)
    assert (s["d"].min, s["d"].max) == ("2026-01-01", "2026-01-05")
    assert (s["dec"].min, s["dec"].max) == ("-2.00", "1.10")
    assert s["ts"].min == s["ts"].max == 1767225600000000  # microseconds
    assert s["f"].min is None and s["f"].max is None  # NaN: no bounds, never pruned
    assert "bin" not in s


def test_pruning_by_date_and_decimal():
    t = pa.table(
        {"d": pa.array([dt.date(2026, 1, 1), dt.date(2026, 1, 31)]), "dec": pa.array([Decimal("1.00"), Decimal("2.00")])}
    )
    rg = rg_of(t)
    schema = t.schema
    assert may_match(rg, [Predicate("d", ">=", dt.date(2026, 1, 31))], schema)
    assert not may_match(rg, [Predicate("d", ">", dt.date(2026, 1, 31))], schema)
    assert not may_match(rg, [Predicate("dec", "<", Decimal("1.00"))], schema)
    assert may_match(rg, [Predicate("dec", "in", (Decimal("5"), Decimal("1.5")))], schema)


def test_null_predicates():
    t = pa.table({"x": pa.array([None, None], pa.int64())})
    rg = rg_of(t)
    assert may_match(rg, [Predicate("x", "is_null")], t.schema)
    assert not may_match(rg, [Predicate("x", "not_null")], t.schema)
    assert not may_match(rg, [Predicate("x", "==", 1)], t.schema)


OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "is_null", "not_null"]


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=30),
    op=st.sampled_from(OPS),
    literal=st.integers(-60, 60),
    others=st.lists(st.integers(-60, 60), min_size=1, max_size=4),
)
def test_pruning_is_sound(values, op, literal, others):
    """If any row satisfies the predicate (evaluated exactly by Arrow), the row group is kept;
    and the exact Arrow filter agrees with a Python evaluation."""
    t = pa.table({"x": pa.array(values, pa.int64())})
    p = Predicate("x", op, tuple(others) if op == "in" else literal)
    exact = t.filter(p.expression()).num_rows
    py = sum(1 for v in values if _py_eval(op, v, p.value))
    assert exact == py
    if exact:
        assert row_groups_to_read([rg_of(t)], [p], t.schema) == [0]


def _py_eval(op, v, lit):
    if op == "is_null":
        return v is None
    if op == "not_null":
        return v is not None
    if v is None:
        return False
    if op == "in":
        return v in lit
    return {"==": v == lit, "!=": v != lit, "<": v < lit, "<=": v <= lit, ">": v > lit, ">=": v >= lit}[op]


@pytest.mark.parametrize("op,lit,keep", [(">", 10, False), (">=", 10, True), ("<", 1, False), ("==", 5, True), ("!=", 5, True)])
def test_integer_bounds(op, lit, keep):
    t = pa.table({"x": pa.array(range(1, 11), pa.int64())})
    assert may_match(rg_of(t), [Predicate("x", op, lit)], t.schema) is keep
