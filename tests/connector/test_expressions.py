"""The columns a delete filter needs come from the expression itself, exactly."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, deletes
from mvtable.connector.expressions import referenced_columns

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

    def spy(io, path, *, row_groups=None, columns=None):
        read.append(None if columns is None else list(columns))
        return real(io, path, row_groups=row_groups, columns=columns)

    monkeypatch.setattr(deletes, "open_parquet", spy)
    assert t.delete(pc.field("paid") >= 40) == 20  # "id" is a substring of "paid" and of "valid"
    assert t.delete(pc.field(0) < 5) == 5  # by position: every column, so position 0 is "id"
    assert read == [["paid"], None]
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(5, 80))


def test_scan_filter_on_a_column_outside_the_projection(small_table):
    out = small_table.scan(columns=["price"], filter=pc.field("id") < 3).to_arrow()
    assert out.schema.names == ["price"] and sorted(out.column("price").to_pylist()) == [0.0, 1.5, 3.0]
