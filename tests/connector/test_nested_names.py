"""Struct fields named in another case than the table's are written under the table's
names, their values kept (Arrow's cast alone would store nulls, or fail in the executor)."""

from __future__ import annotations

import pyarrow as pa

from mvtable.connector import Table, writes
from mvtable.connector.nested_names import with_table_names

ST = pa.struct([("a", pa.int32()), ("b", pa.string())])
SCHEMA = pa.schema([("id", pa.int64()), ("st", ST), ("tags", pa.list_(ST)), ("m", pa.map_(pa.string(), ST))])
ROWS = [
    {"id": 1, "st": {"a": 1, "b": "x"}, "tags": [{"a": 2, "b": "y"}], "m": [("k", {"a": 3, "b": "z"})]},
    {"id": 2, "st": None, "tags": [], "m": []},
]


def shouted(rows: list[dict]) -> pa.Table:
    """``rows`` with the struct fields upper-cased (``A`` not null, as Spark's
    ``named_struct('A', 1, …)`` makes it), and the top-level columns renamed too."""
    up = pa.struct([pa.field("A", pa.int32(), nullable=False), ("b", pa.string())])
    out = {
        "ID": pa.array([r["id"] for r in rows], pa.int64()),
        "st": pa.array([r["st"] and {"A": r["st"]["a"], "b": r["st"]["b"]} for r in rows], up),
        "Tags": pa.array([[{"A": t["a"], "b": t["b"]} for t in r["tags"]] for r in rows], pa.list_(up)),
        "m": pa.array([[(k, {"A": v["a"], "b": v["b"]}) for k, v in r["m"]] for r in rows], pa.map_(pa.string(), up)),
    }
    return pa.table(out)


def test_append_keeps_the_values_of_struct_fields_named_in_another_case(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(shouted(ROWS))
    got = t.to_arrow()
    assert got.schema.equals(SCHEMA)
    assert got.to_pylist() == [{**ROWS[0], "m": [("k", {"a": 3, "b": "z"})]}, {**ROWS[1], "st": None}]


def test_the_executor_write_renames_nested_fields_too(tmp_path) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA)
    data = shouted(ROWS)
    plan = writes.begin_write(uri, storage_options=None, incoming=data.schema, mode=writes.APPEND)
    segments = writes.write_data(plan, data.to_batches())  # what each Spark task runs
    writes.finish_write(plan, segments)
    assert Table.open(uri).to_arrow().column("st").to_pylist() == [{"a": 1, "b": "x"}, None]


def test_a_sliced_chunked_column_keeps_its_rows() -> None:
    column = shouted(ROWS * 3).column("Tags").slice(1, 3)
    renamed = with_table_names(column, pa.list_(ST))
    assert renamed.type.value_type.field(0).name == "a"
    assert [[t["a"] for t in v] for v in renamed.to_pylist()] == [[], [2], []]
