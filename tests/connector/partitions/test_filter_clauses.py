"""Filters pruned by their simple comparisons (``filter_clauses``) keep exactly the partitions
Arrow's simplification keeps, and never a partition less than the rows need."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.expression_tree import Call, FieldRef, Literal, expression_tree
from mvtable.connector.partitions.filter_clauses import AnyOf, Leaf, parse_filter
from mvtable.connector.partitions.pruning import ExpressionPruner, partitioned_columns, prune_segments
from mvtable.connector.schema import schema_from_json
from mvtable.connector.segments import ROW_ADDRESS_SEGMENT
from mvtable.connector.stats import Predicate

from .conftest import START, events

UTC = dt.timezone.utc
SPECS = {
    "day_region": ["day(ts)", "region"],
    "month_bucket": ["month(day)", "bucket(4, id)"],
    "hour_trunc": ["hour(at)", "truncate(3, name)"],
    "truncates": ["truncate(10, id)", "truncate(100, amount)"],
    "year_date": ["year(at)", "day"],
}


def rows() -> pa.Table:
    data = events(120, hours=7, nulls=True)
    at = pc.assume_timezone(data.column("ts"), "UTC")
    return data.append_column("at", at)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, tuple[Table, Table]]:
    root = tmp_path_factory.mktemp("clauses")
    data = rows()
    out = {}
    plain = Table.create(str(root / "plain"), schema=data.schema)
    plain.append(data)
    for name, spec in SPECS.items():
        t = Table.create(str(root / name), schema=data.schema, partition_by=spec)
        t.append(data)
        out[name] = (t, plain)
    return out


def literal(rng: random.Random, column: str) -> object:
    hours = rng.choice([0, 24 * rng.randrange(-2, 40), 7 * rng.randrange(0, 130), rng.randrange(0, 900)])
    when = START + dt.timedelta(hours=hours)
    if column == "ts":
        return rng.choice([pa.scalar(when, pa.timestamp("us")), when.date(), pa.scalar(when, pa.timestamp("ms"))])
    if column == "at":
        return rng.choice([pa.scalar(when.replace(tzinfo=UTC), pa.timestamp("us", "UTC")), when.date()])
    if column == "day":
        return when.date()
    if column == "id":
        return rng.choice([rng.randrange(-5, 130), pa.scalar(rng.randrange(0, 130), pa.int32()), float(rng.randrange(0, 130))])
    if column == "amount":
        return Decimal(rng.randrange(-4, 130 * 25)) / 100
    if column == "region":
        return rng.choice(["eu", "us", "apac", "zz", "a"])
    return rng.choice(["name-", "name-00", f"name-{rng.randrange(0, 130):04d}", "nam", "z"])


COLUMNS = ["ts", "at", "day", "id", "amount", "region", "name"]


def leaf(rng: random.Random) -> pc.Expression:
    column = rng.choice(COLUMNS)
    f = pc.field(column)
    kind = rng.randrange(12)
    if kind < 7:
        value = literal(rng, column)
        op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
        left, right = (f, value) if rng.random() < 0.8 else (pc.scalar(value), f)
        if left is not f:
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
            left, right = right, left
            return {
                "==": right == left,
                "!=": right != left,
                "<": right > left,
                "<=": right >= left,
                ">": right < left,
                ">=": right <= left,
            }[op]
        return {"==": f == value, "!=": f != value, "<": f < value, "<=": f <= value, ">": f > value, ">=": f >= value}[op]
    if kind < 9:
        values = [literal(rng, column) for _ in range(rng.randrange(1, 4))]
        if column not in ("ts", "at", "id"):
            return f.isin(values + ([None] if rng.random() < 0.3 else []))
        return f.isin(pa.array([v.as_py() if isinstance(v, pa.Scalar) else v for v in values[:1]]))
    if kind == 9:
        return f.is_null() if rng.random() < 0.5 else f.is_valid()
    if kind == 10:
        return ~f.is_null() if rng.random() < 0.5 else ~f.is_valid()
    return pc.utf8_length(f.cast(pa.string())) > 3  # no simple comparison: Arrow's to decide


def random_filter(rng: random.Random, depth: int = 0) -> pc.Expression:
    if depth >= 2 or rng.random() < 0.4:
        return leaf(rng)
    parts = [random_filter(rng, depth + 1) for _ in range(rng.randrange(2, 4))]
    out = parts[0]
    for p in parts[1:]:
        out = out & p if rng.random() < 0.6 else out | p
    return out


def bindable(table: Table, expression: pc.Expression) -> bool:
    try:
        table.scan(filter=expression)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("name", sorted(SPECS))
def test_clauses_prune_as_arrow_and_keep_every_matching_row(tables, name) -> None:
    """Random filters: the partitions kept are those Arrow's simplification keeps (fewer for
    ``bucket``, which Arrow cannot see through but a predicate can), and every segment holding a
    matching row is among them."""
    table, _ = tables[name]
    snapshot = table.snapshot()
    arrow = schema_from_json(snapshot.table_schema)
    segments = snapshot.visible_segments()
    keys = [(s.file.spec_id, s.file.partition) for s in segments]
    partition_of = {s.id: (s.file.spec_id, s.file.partition) for s in segments}
    everything = table.to_arrow(with_row_address=True)
    has_bucket = any("bucket" in item for item in SPECS[name])
    rng = random.Random(name)
    checked = fast = 0
    while checked < 150:
        expression = random_filter(rng)
        if not bindable(table, expression):
            continue  # a literal Arrow cannot compare with the column: check_filter refuses it
        checked += 1
        kept, _ = prune_segments(
            segments, specs=snapshot.partition_specs, table_schema=snapshot.table_schema, arrow=arrow, filter=expression
        )
        got = {(s.file.spec_id, s.file.partition) for s in kept}
        by_arrow = ExpressionPruner(snapshot.partition_specs, snapshot.table_schema, arrow, expression).matching(keys)
        if has_bucket:
            assert got <= by_arrow, str(expression)
        else:
            assert got == by_arrow, str(expression)
        matching = everything.filter(expression).column(ROW_ADDRESS_SEGMENT).to_pylist()
        assert {partition_of[s] for s in matching} <= got, str(expression)
        split = parse_filter(expression, arrow, partitioned_columns(snapshot.partition_specs, snapshot.table_schema))
        fast += not split.rest
    assert fast > 50  # most filters never reach Arrow


def test_a_scan_by_filter_reads_the_rows_of_an_unpartitioned_table(tables) -> None:
    rng = random.Random(7)
    for name in sorted(SPECS):
        table, plain = tables[name]
        for _ in range(6):
            expression = random_filter(rng)
            if bindable(table, expression):
                got = table.to_arrow(filter=expression).sort_by("id")
                assert got.equals(plain.to_arrow(filter=expression).sort_by("id")), str(expression)


def test_the_tree_of_an_expression() -> None:
    e = (pc.field("ts") >= dt.date(2024, 1, 1)) & pc.field("r").isin(["a", None])
    tree = expression_tree(e)
    assert isinstance(tree, Call) and tree.name == "and_kleene"
    compare, is_in = tree.args
    assert isinstance(compare, Call) and compare.name == "greater_equal"
    assert compare.args[0] == FieldRef("ts")
    assert isinstance(compare.args[1], Literal) and compare.args[1].value == pa.scalar(dt.date(2024, 1, 1))
    assert isinstance(is_in, Call) and is_in.options is not None and is_in.options["value_set"].as_py() == ["a", None]
    assert expression_tree(pc.field("s", "a") > 1) is None  # nested references are not serialized: Arrow decides
    assert expression_tree(pc.field(0) > 1) is None


def test_literals_as_arrow_compares_them() -> None:
    schema = rows().schema
    parts = {"ts", "at", "id", "region"}

    def clauses(e: pc.Expression):
        return parse_filter(e, schema, parts)

    split = clauses((pc.field("ts") >= dt.date(2024, 1, 2)) & (pc.field("amount") > 3) & (pc.scalar(5) > pc.field("id")))
    assert not split.rest
    assert split.clauses == (
        Leaf(Predicate("ts", ">=", dt.datetime(2024, 1, 2))),  # a date is its midnight, as Arrow casts it
        Leaf(Predicate("id", "<", 5)),  # amount is not partitioned: nothing to decide
    )
    assert clauses(pc.field("id") < 2.5).rest  # not an exact int: Arrow compares as floats
    assert clauses(pc.field("id") < 2.0).clauses == (Leaf(Predicate("id", "<", 2)),)
    f32 = pa.schema([("x", pa.float32())])
    assert parse_filter(pc.field("x") > 0.1, f32, {"x"}).rest  # 0.1 is no float32: 0.1f > 0.1 as Arrow compares them
    assert parse_filter(pc.field("x") > 0.5, f32, {"x"}).clauses == (Leaf(Predicate("x", ">", 0.5)),)
    assert clauses(pc.field("ts") < pa.scalar(1, pa.timestamp("ns"))).rest  # a nanosecond the column cannot hold
    assert clauses(pc.utf8_lower(pc.field("region")) == "eu").rest
    assert clauses(pc.field("region").isin(["eu", None])).clauses == (
        AnyOf((Leaf(Predicate("region", "in", ("eu",))), Leaf(Predicate("region", "is_null")))),
    )
    assert clauses((pc.field("id") == 1) | (pc.field("amount") == 2)).clauses == ()  # either side may match anything
    assert clauses(pc.field("nope") == 1).rest  # a column the table lacks: Arrow's (and check_filter's) to judge
