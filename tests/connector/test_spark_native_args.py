"""The shapes of ``read_native`` / ``create_view``'s ``columns`` and ``filters``, checked
without Spark: each wrong shape is named, with the shape to use."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvtable.connector.spark.native_args import checked_columns, to_predicates
from mvtable.connector.stats import Predicate
from mvtable.errors import InvalidOptionError

SCHEMA = pa.schema([("id", pa.int64()), ("status", pa.string())])


def test_columns_are_a_list_of_names() -> None:
    assert checked_columns(["status"], SCHEMA).names == ["status"]
    assert checked_columns(None, SCHEMA) is SCHEMA
    with pytest.raises(InvalidOptionError, match=r"columns must be a list of names, e.g. \['id'\]"):
        checked_columns("id", SCHEMA)  # not the columns 'i' and 'd'
    with pytest.raises(InvalidOptionError, match="names no column"):
        checked_columns([], SCHEMA)
    with pytest.raises(InvalidOptionError, match=r"unknown columns \['nope'\]"):
        checked_columns(["nope"], SCHEMA)


def test_flat_filters_become_predicates() -> None:
    got = to_predicates([("id", ">", 3), ["status", "in", ["ok"]], ("status", "is null")], SCHEMA)
    assert got == [Predicate("id", ">", 3), Predicate("status", "in", ("ok",)), Predicate("status", "is_null")]
    assert to_predicates(None, SCHEMA) == [] and to_predicates((), SCHEMA) == []


@pytest.mark.parametrize(
    ("filters", "says"),
    [
        ("id > 3", r"filters must be a list of \(column, op, value\) tuples, e.g. \[\('id', '>', 3\)"),
        (("id", ">", 3), r"wrap the one filter, \[\('id', '>', 3\)\]"),
        ([("id", ">")], r"has no value: '>' compares with one, \('id', '>', value\); two-item filters are only for 'is null'"),
        ([("id", "==", None)], r"compares with null; use \('id', 'is null'\)"),
        (
            [[("id", ">", 3), ("status", "==", "ok")]],
            r"DNF .* not supported.*flat: \[\('id', '>', 3\), \('status', '==', 'ok'\)\]",
        ),
        ([[("id", ">", 3)], [("status", "==", "ok")]], r"DNF .* an OR of 2 terms .*\.where"),
        ([3], r"each filter is a \(column, op, value\) tuple"),
        (list("id > 3"), r"each filter is a \(column, op, value\) tuple, e.g. \('id', '>', 3\), not 'i'; filters is a list"),
        ([("id", "in", 3)], r"needs a collection of values, e.g. \('id', 'in', \[1, 2\]\)"),
        ([("id", "~", 3)], "unknown filter operator"),
    ],
)
def test_a_wrong_filter_shape_says_which_shape_to_use(filters, says) -> None:
    with pytest.raises(InvalidOptionError, match=says):
        to_predicates(filters, SCHEMA)
