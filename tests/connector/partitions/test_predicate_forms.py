"""The two readers of a scoped push's predicate: Spark's ``replaceWhere`` SQL text
(``sql_predicate``) and a pyarrow expression's conjuncts (``conjuncts``), checked on the rows
they select and on what they refuse."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector.partitions.conjuncts import conjuncts
from mvtable.connector.partitions.sql_predicate import parse_replace_where
from mvtable.connector.stats import Predicate
from mvtable.errors import InvalidOptionError

SCHEMA = pa.schema(
    [("day", pa.date32()), ("ts", pa.timestamp("us")), ("Region", pa.string()), ("n", pa.int64()), ("x", pa.float64())]
)
DATA = pa.table(
    {
        "day": [dt.date(2024, 1, 5), dt.date(2024, 1, 6), None, dt.date(2024, 1, 5)],
        "ts": [dt.datetime(2024, 1, 5, 10), dt.datetime(2024, 1, 6, 0), dt.datetime(2024, 1, 7), None],
        "Region": ["eu", "us", "it's", None],
        "n": [1, 5, 10, None],
        "x": [0.5, 1.5, 2.5, 3.5],
    },
    schema=SCHEMA,
)


def selected(text: str) -> list[int]:
    mask = DATA.filter(parse_replace_where(text, SCHEMA))
    return mask.column("n").to_pylist()


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("day = '2024-01-05'", [1, None]),
        ("day = DATE '2024-01-05' AND n IS NOT NULL", [1]),
        ("ts >= TIMESTAMP '2024-01-05 00:00:00' and ts < '2024-01-06'", [1]),
        ("region IN ('eu', 'it''s')", [1, 10]),
        ("n BETWEEN 2 AND 10", [5, 10]),
        ("n NOT IN (1, 5)", [10]),
        ("(x > 1.0 AND x <= 2.5)", [5, 10]),
        ("`Region` <> 'eu'", [5, 10]),
        ("day IS NULL", [10]),
        ("n >= -1e1", [1, 5, 10]),
    ],
)
def test_sql_predicates_select_what_spark_would(text, rows):
    assert selected(text) == rows


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("day = '2024-01-05' OR n = 1", "OR is not read"),
        ("upper(region) = 'EU'", "function call"),
        ("n = x", "where a literal was expected"),
        ("n = 1.5", "not a value of column n"),
        ("day = 'yesterday'", "not a value of column day"),
        ("nope = 1", "the table has no column 'nope'"),
        ("n =", "it ends where a literal was expected"),
        ("n = NULL", "write n IS NULL"),
        ("n = 1 n = 2", "after a complete condition"),
        ("1 = n", "where a column was expected"),
        ("n ; drop", "cannot read"),
    ],
)
def test_what_the_sql_reader_refuses_says_why(text, problem):
    with pytest.raises(InvalidOptionError, match="replaceWhere") as err:
        parse_replace_where(text, SCHEMA)
    assert problem in err.value.message
    assert "it reads a conjunction (AND)" in err.value.message


def test_an_empty_predicate_is_refused():
    with pytest.raises(InvalidOptionError, match="needs a predicate"):
        parse_replace_where("  ", SCHEMA)


def test_conjuncts_of_a_conjunction_of_simple_conditions():
    f = pc.field
    e = (f("ts") >= pa.scalar(dt.datetime(2024, 1, 5))) & (f("day") == dt.date(2024, 1, 5)) & f("Region").isin(["a", "b"])
    assert conjuncts(e & ~f("n").is_null() & f("x").is_valid(), SCHEMA) == (
        Predicate("ts", ">=", dt.datetime(2024, 1, 5)),
        Predicate("day", "==", dt.date(2024, 1, 5)),
        Predicate("Region", "in", ("a", "b")),
        Predicate("n", "not_null"),
        Predicate("x", "not_null"),
    )
    assert conjuncts(f("n") > 5, SCHEMA) == (Predicate("n", ">", 5),)  # the literal first
    assert conjuncts(f("day").is_null(), SCHEMA) == (Predicate("day", "is_null"),)
    # what the SQL reader makes is read back the same way
    assert conjuncts(parse_replace_where("n BETWEEN 1 AND 3 AND region = 'eu'", SCHEMA), SCHEMA) == (
        Predicate("n", ">=", 1),
        Predicate("n", "<=", 3),
        Predicate("Region", "==", "eu"),
    )


@pytest.mark.parametrize(
    "expression",
    [
        (pc.field("n") > 1) | (pc.field("n") < 0),  # not a conjunction
        (pc.field("n") + 1) > 3,  # arithmetic
        pc.field("Region").isin(["a", None]),  # a null in the set
        pc.field("n") == pc.field("x"),  # two columns
        pc.field("s", "y").is_valid(),  # a nested field
        pc.field("x").is_null(nan_is_null=True),
        pc.field("nope") == 1,  # not a column of the table
    ],
)
def test_conjuncts_of_anything_else_is_none(expression):
    assert conjuncts(expression, SCHEMA) is None
