"""``Table.update_schema``: one commit per block, every rule a typed error naming the column, time travel and history."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.errors import SchemaEvolutionError, SchemaMismatchError
from mvtable.lineage.enums import Operation
from mvtable.lineage.schema_ids import FIELD_ID_KEY, iter_fields

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.float32()),
        ("info", pa.struct([("a", pa.int16()), ("b", pa.string())])),
    ]
)


def rows(lo: int, hi: int) -> pa.Table:
    r = range(lo, hi)
    return pa.table(
        {
            "id": pa.array(r, pa.int64()),
            "name": [f"n{i}" for i in r],
            "qty": pa.array([i * 10 for i in r], pa.int32()),
            "price": pa.array([i / 2 for i in r], pa.float32()),
            "info": [{"a": i, "b": f"b{i}"} for i in r],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, primary_key=["id"])
    table.append(rows(0, 3))
    return table


def ids(doc) -> dict[str, int]:
    return {".".join(p): f["metadata"][FIELD_ID_KEY] for p, f in iter_fields(doc)}


def test_new_tables_get_ids_by_position_and_record_the_highest(t):
    snap = t.snapshot()
    assert ids(snap.table_schema) == {"id": 1, "name": 2, "qty": 3, "price": 4, "info": 5, "info.a": 6, "info.b": 7}
    assert snap.last_field_id == 7 and snap.schema_id == 0


def test_a_block_is_one_commit_and_each_change_is_in_it(t):
    before = t.version
    with t.update_schema() as u:
        u.add_column("note", pa.string(), doc="free text")
        u.rename_column("name", "label")
        u.update_column("qty", pa.int64())
        u.add_column("info.c", pa.float64())
        u.drop_column("price")
    assert t.version == before + 1
    h = t.history()[-1]
    assert h.operation is Operation.UPDATE_SCHEMA
    assert h.parameters["changes"] == ["add note", "rename name to label", "widen qty to int64", "add info.c", "drop price"]
    snap = t.snapshot()
    assert snap.schema_id == 1
    assert ids(snap.table_schema) == {
        "id": 1, "label": 2, "qty": 3, "info": 5, "info.a": 6, "info.b": 7, "note": 8, "info.c": 9,
    }  # fmt: skip
    assert snap.last_field_id == 9
    assert next(f for f in snap.table_schema["fields"] if f["name"] == "note")["metadata"]["comment"] == "free text"
    assert t.schema.field("qty").type == pa.int64()


def test_an_exception_inside_the_block_commits_nothing(t):
    before = t.version
    with pytest.raises(RuntimeError), t.update_schema() as u:
        u.add_column("x", pa.int64())
        raise RuntimeError("boom")
    assert t.version == before and "x" not in t.schema.names


def test_a_dropped_id_is_never_reused(t):
    with t.update_schema() as u:
        u.drop_column("price")
    with t.update_schema() as u:
        u.add_column("price", pa.float64())
    snap = t.snapshot()
    assert ids(snap.table_schema)["price"] == 8  # not 4
    assert snap.last_field_id == 8


@pytest.mark.parametrize(
    ("change", "column", "rule"),
    [
        (lambda u: u.update_column("qty", pa.int16()), "qty", "only widenings"),
        (lambda u: u.update_column("price", pa.int64()), "price", "only widenings"),
        (lambda u: u.update_column("name", pa.int64()), "name", "only widenings"),
        (lambda u: u.add_column("NAME", pa.int64()), "NAME", "names are unique"),
        (lambda u: u.rename_column("qty", "Name"), "qty", "names are unique"),
        (lambda u: u.rename_column("qty", "_mv_row"), "qty", "reserved"),
        (lambda u: u.add_column("_mv_segment", pa.string()), "_mv_segment", "reserved"),
        (lambda u: u.drop_column("id"), "id", "key columns cannot be dropped"),
        (lambda u: u.update_column("id", pa.float64()), "id", "key columns keep their type"),
        (lambda u: u.make_optional("id"), "id", "key columns are never null"),
        (lambda u: u.drop_column("nope"), "nope", "must exist"),
        (lambda u: u.add_column("qty.x", pa.int64()), "qty.x", "nested fields live in structs"),
        (lambda u: u.drop_column("info.a").drop_column("info.b"), "info.b", "at least one field"),
    ],
)
def test_each_rule_is_a_typed_error_naming_the_column(t, change, column, rule):
    before = t.version
    with pytest.raises(SchemaEvolutionError) as err, t.update_schema() as u:
        change(u)
    assert repr(column) in err.value.message and rule in err.value.message
    assert err.value.message.startswith("[MVTABLE_SCHEMA_EVOLUTION]") or "MVTABLE_SCHEMA_EVOLUTION" in str(err.value)
    assert t.version == before


def test_allowed_widenings(tmp_path):
    schema = pa.schema(
        [("b", pa.int8()), ("s", pa.int16()), ("f", pa.float32()), ("d", pa.decimal128(5, 2)), ("day", pa.date32())]
    )
    t = Table.create(str(tmp_path / "w"), schema=schema)
    t.append(pa.table({"b": pa.array([1], pa.int8()), "s": pa.array([2], pa.int16()), "f": pa.array([1.5], pa.float32()),
                       "d": pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2)), "day": pa.array([1], pa.date32())}))  # fmt: skip
    with t.update_schema() as u:
        u.update_column("b", pa.int16()).update_column("s", pa.int64()).update_column("f", pa.float64())
        u.update_column("d", pa.decimal128(10, 2)).update_column("day", pa.timestamp("us", tz="UTC"))
    out = t.to_arrow()
    assert out.schema.field("b").type == pa.int16() and out.schema.field("s").type == pa.int64()
    assert out.schema.field("d").type == pa.decimal128(10, 2)
    assert out.column("day")[0].as_py().isoformat() == "1970-01-02T00:00:00+00:00"
    with pytest.raises(SchemaEvolutionError, match="decimal"), t.update_schema() as u:
        u.update_column("d", pa.decimal128(12, 3))  # another scale


def test_renaming_a_key_column_renames_the_key(t):
    with t.update_schema() as u:
        u.rename_column("id", "order_id")
    assert t.primary_key == ("order_id",)
    t.upsert(rows(1, 2).rename_columns(["order_id", "name", "qty", "price", "info"]).set_column(1, "name", pa.array(["new"])))
    out = {r["order_id"]: r["name"] for r in t.to_arrow().to_pylist()}
    assert out == {0: "n0", 1: "new", 2: "n2"}


def test_time_travel_keeps_each_versions_schema(t):
    v0 = t.version
    with t.update_schema() as u:
        u.rename_column("name", "label").drop_column("price")
    assert [f["name"] for f in t.snapshot(v0).table_schema["fields"]] == ["id", "name", "qty", "price", "info"]
    old = t.to_arrow(version=v0)
    assert old.column_names == ["id", "name", "qty", "price", "info"]
    assert old.column("name").to_pylist() == ["n0", "n1", "n2"]
    assert t.to_arrow().column_names == ["id", "label", "qty", "info"]
    assert t.to_arrow().column("label").to_pylist() == ["n0", "n1", "n2"]


def test_writes_that_do_not_fit_say_how_to_evolve(t):
    data = rows(5, 6).append_column("extra", pa.array([1]))
    with pytest.raises(SchemaMismatchError) as err:
        t.append(data)
    assert "merge_schema=True" in err.value.message and "update_schema()" in err.value.message


def test_nothing_to_change_commits_nothing(t):
    before = t.version
    with t.update_schema() as u:
        u.update_column("qty", pa.int32())  # its own type
    assert t.version == before


def test_nested_fields_inside_lists_and_maps(tmp_path):
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("items", pa.list_(pa.struct([("p", pa.int32())]))),
            ("m", pa.map_(pa.string(), pa.struct([("u", pa.string())]))),
        ]
    )
    t = Table.create(str(tmp_path / "n"), schema=schema)
    t.append(pa.table({"id": [1], "items": [[{"p": 1}, None, {"p": 2}]], "m": [[("a", {"u": "x"})]]}, schema=schema))
    with t.update_schema() as u:
        u.add_column("items.element.q", pa.string())
        u.add_column("m.value.w", pa.int8())
        u.rename_column("items.element.p", "price")
        u.update_column("items.element.price", pa.int64())
    assert t.to_arrow().to_pylist() == [
        {"id": 1, "items": [{"price": 1, "q": None}, None, {"price": 2, "q": None}], "m": [("a", {"u": "x", "w": None})]}
    ]
    with pytest.raises(SchemaEvolutionError, match="items.element"), t.update_schema() as u:
        u.add_column("items.q", pa.string())
