"""``Table.scan(predicates=…)``: predicates select rows exactly (not only row groups), and a
predicate that does not fit the table is a typed error naming it, before anything is read."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.predicates import check_predicates
from mvtable.connector.stats import Predicate
from mvtable.errors import InvalidFilterError

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32())])


@pytest.fixture
def three(table_uri) -> Table:
    """Three rows in one row group: statistics cannot skip anything."""
    t = Table.create(table_uri, schema=SCHEMA)
    t.append(pa.table({"id": [1, 2, 3], "s": ["x1", "x2", "y3"], "d": [dt.date(2026, 1, d) for d in (1, 2, 3)]}, schema=SCHEMA))
    return t


@pytest.mark.parametrize("use_threads", [True, False])
def test_predicates_filter_rows_exactly(three: Table, use_threads: bool) -> None:
    def ids(*predicates: Predicate, columns: list[str] | None = None) -> list[int]:
        out = three.to_arrow(predicates=list(predicates), columns=columns, use_threads=use_threads)
        return sorted(out.column("id").to_pylist())

    assert ids(Predicate("id", "==", 2)) == [2]
    assert ids(Predicate("id", ">", 1), Predicate("s", "starts_with", "x")) == [2]
    assert ids(Predicate("id", "in", (1, 3))) == [1, 3]
    assert ids(Predicate("d", "<", dt.date(2026, 1, 3)), columns=["id"]) == [1, 2]  # a column outside the projection
    out = three.to_arrow(predicates=[Predicate("s", "==", "y3")], columns=["id"], use_threads=use_threads)
    assert out.schema.names == ["id"] and out.num_rows == 1
    assert three.scan(predicates=[Predicate("id", "!=", 2)]).count() == 2
    assert three.scan(predicates=[Predicate("id", "==", 2)], with_row_address=True).to_arrow().num_rows == 1


def test_predicates_filter_rows_of_a_streaming_reader(three: Table) -> None:
    reader = three.scan(predicates=[Predicate("s", "==", "x2")]).to_reader(dictionary_strings=True)
    assert reader.read_all().column("id").to_pylist() == [2]


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        (Predicate("nope", "==", 2), r"no column 'nope'.*\['id', 's', 'd'\]"),
        (Predicate("id", "~", 2), r"unknown operator '~'.*== != <"),
        (Predicate("id", "==", "2"), r"Predicate\(column='id', op='==', value='2'\).*int64, string"),
        (Predicate("d", ">", "2026-01-01"), r"value='2026-01-01'.*date32"),
        (Predicate("id", "==", None), "use op 'is_null'"),
        (Predicate("id", "in", 2), "'in' takes a list or tuple"),
        (Predicate("id", "in", ["a"]), r"value=\['a'\]"),
        (Predicate("s", "starts_with", 1), "takes a string"),
        (Predicate("id", "starts_with", "1"), r"op='starts_with'.*int64"),
    ],
    ids=str,
)
def test_a_predicate_that_does_not_fit_is_a_typed_error(three: Table, predicate: Predicate, message: str) -> None:
    with pytest.raises(InvalidFilterError, match=message):
        three.scan(predicates=[predicate])


def test_tuples_are_refused_with_the_way_to_write_them(three: Table) -> None:
    with pytest.raises(InvalidFilterError, match=r"use Predicate\(column, op, value\).*Predicate\('id', '==', 2\)"):
        three.to_arrow(predicates=[("id", "==", 2)])  # type: ignore[list-item]
    with pytest.raises(InvalidFilterError, match="a list of Predicate objects"):
        three.to_arrow(predicates=Predicate("id", "==", 2))  # type: ignore[arg-type]


def test_check_predicates_returns_them_as_a_tuple() -> None:
    ps = [Predicate("id", ">=", 1), Predicate("s", "not_null")]
    assert check_predicates(ps, SCHEMA) == tuple(ps)
    assert check_predicates([], SCHEMA) == ()
