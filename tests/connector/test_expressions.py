"""The columns a delete filter needs come from the expression itself, exactly."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, deletes, expressions
from mvtable.connector.expressions import check_filter, referenced_columns
from mvtable.errors import InvalidFilterError, InvalidOptionError

# names that are substrings of each other, a struct with a field named like a column, a
# column whose name is an expression's text
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("paid", pa.float64()),
        ("i", pa.int64()),
        ("name", pa.string()),
        ("st", pa.struct([("id", pa.string()), ("n", pa.int64())])),
        ("id > 1", pa.int64()),
        ("ts", pa.timestamp("us")),
    ]
)


@pytest.mark.parametrize(
    ("expression", "columns"),
    [
        (pc.field("paid") > 3, ["paid"]),
        (pc.field("id") == 1, ["id"]),
        (pc.field("i") == 1, ["i"]),
        (pc.field("name") == "id paid", ["name"]),  # a literal naming columns reads none of them
        (pc.field("st", "id") == "x", ["st"]),  # nested: its top-level column only
        (pc.field("st", "n").is_null() | (pc.field("paid") < 0), ["paid", "st"]),
        (pc.field("id > 1") == 2, ["id > 1"]),
        ((pc.field("id") > 1) & (pc.field("paid") < 2), ["id", "paid"]),
        (pc.field("id").cast(pa.float64()) > pc.field("paid"), ["id", "paid"]),  # a safe cast
        (pc.utf8_lower(pc.field("name")) == "a", ["name"]),  # functions Substrait cannot express
        (pc.year(pc.field("ts")) == 2026, ["ts"]),
        (pc.field("id").isin([1, 2]), ["id"]),
        (pc.scalar(True), []),
    ],
    ids=str,
)
def test_referenced_columns_are_exact(expression, columns):
    assert referenced_columns(expression, SCHEMA) == columns


def test_unattributable_expressions_read_every_column():
    assert referenced_columns(pc.field(1) > 2, SCHEMA) is None  # by position
    assert referenced_columns(pc.field("nope") > 2, SCHEMA) is None  # evaluation raises pyarrow's error


def test_delete_reads_exactly_the_filter_columns(table_uri, monkeypatch):
    t = Table.create(table_uri, schema=pa.schema([("id", pa.int64()), ("paid", pa.float64()), ("valid", pa.bool_())]))
    t.append(pa.table({"id": list(range(100)), "paid": [i / 2 for i in range(100)], "valid": [i % 2 == 0 for i in range(100)]}))
    read: list[list[str] | None] = []
    real = deletes.open_parquet

    def spy(io, path, *, row_groups=None, columns=None, **kwargs):
        read.append(None if columns is None else list(columns))
        return real(io, path, row_groups=row_groups, columns=columns, **kwargs)

    monkeypatch.setattr(deletes, "open_parquet", spy)
    assert t.delete(pc.field("paid") >= 40).deleted_rows == 20  # "id" is a substring of "paid" and of "valid"
    assert t.delete(pc.field(0) < 5).deleted_rows == 5  # by position: every column, so position 0 is "id"
    assert read == [["paid"], None]
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(5, 80))


def test_scan_filter_on_a_column_outside_the_projection(small_table):
    out = small_table.scan(columns=["price"], filter=pc.field("id") < 3).to_arrow()
    assert out.schema.names == ["price"] and sorted(out.column("price").to_pylist()) == [0.0, 1.5, 3.0]


@pytest.fixture
def planned(monkeypatch) -> list[int]:
    """The width of every schema ``referenced_columns`` plans an expression over."""
    widths: list[int] = []
    real = expressions._bound_type

    def spy(expression, schema):
        widths.append(len(schema))
        return real(expression, schema)

    monkeypatch.setattr(expressions, "_bound_type", spy)
    return widths


def test_referenced_columns_of_a_wide_schema_plan_the_referenced_columns_only(planned):
    """One plan over the whole schema, then plans over the columns found so far: not one
    plan of every column per column (quadratic: 41 s for a 3,000-column delete)."""
    wide = pa.schema([(f"c{i}", pa.int64()) for i in range(2000)] + [("a) in b", pa.int64()), ("a", pa.string())])
    assert referenced_columns(pc.field("c1999") == 1, wide) == ["c1999"]
    assert planned == [2002, 0, 1]
    planned.clear()
    assert referenced_columns((pc.field("c7") > 1) & (pc.field("a") == "x") & (pc.field("c3") < 2), wide) == ["c3", "c7", "a"]
    assert planned == [2002, 0, 1, 2, 3]
    # a name pyarrow's message leaves ambiguous (one name plus ")" starts the other) adds both
    assert referenced_columns(pc.field("a) in b") == 1, wide) == ["a) in b", "a"]


def test_a_wide_tables_delete_plans_linearly(tmp_path, planned):
    schema = pa.schema([("id", pa.int64())] + [(f"c{i}", pa.int64()) for i in range(2000)])
    t = Table.create(str(tmp_path / "wide"), schema=schema)
    t.append(pa.table({name: [1, 2] for name in schema.names}, schema=schema))
    planned.clear()
    assert t.delete(pc.field("c1500") == 2).deleted_rows == 1
    assert len(planned) <= 4 and sum(planned) <= 2 * len(schema) + 2  # was 2,001 plans of 2,001 columns
    assert t.to_arrow(columns=["id"]).column("id").to_pylist() == [1]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (pc.field("nope") == 1, r"reads column 'nope', which the table does not have.*'id' int64"),
        (pc.field("st", "nope") == 1, r"FieldRef.Nested.*'st' struct"),
        (pc.field("id") == "1", r"\(id == \"1\"\) does not fit the types.*\(int64, string\).*'name' string"),
        (pc.utf8_lower(pc.field("id")) == "a", r"utf8_lower.*int64"),
        (pc.field("id") + 1, "must be a boolean condition, it is int64"),
        ("id == 1", "must be a pyarrow.compute.Expression"),
    ],
    ids=str,
)
def test_a_filter_that_does_not_fit_the_schema_is_a_typed_error(expression, message):
    with pytest.raises(InvalidFilterError, match=message):
        check_filter(expression, SCHEMA)


def test_scan_and_delete_raise_the_typed_error_and_delete_nothing(small_table):
    before = small_table.version
    for bad in (pc.field("nope") == 1, pc.field("id") == "1"):
        with pytest.raises(InvalidFilterError, match="the table's columns are: 'id' int64, 'status' string"):
            small_table.scan(filter=bad)
        with pytest.raises(InvalidFilterError, match=r"^\[MVTABLE_INVALID_FILTER\] delete filter"):
            small_table.delete(bad)
    with pytest.raises(InvalidOptionError, match="boolean"):  # as before: an InvalidFilterError is an InvalidOptionError
        small_table.delete(pc.field("id") + 1)
    assert small_table.version == before and small_table.scan().count() == 2000
