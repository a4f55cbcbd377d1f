"""Every Python read path resolves columns by field id after add, rename, drop + re-add and widen.

Old segments read with nulls for added columns, under the new names after a rename, without dropped
columns, widened to the new type, and a column dropped and added again under its old name reads null
for old rows — never the old values."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.stats import Predicate
from mvtable.errors import ConcurrentSchemaChangeError

OLD = pa.schema(
    [
        ("id", pa.int64()),
        ("a", pa.int32()),
        ("b", pa.string()),
        ("c", pa.float64()),
        ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])),
    ]
)


def old_rows(lo: int, hi: int) -> pa.Table:
    r = range(lo, hi)
    return pa.table(
        {
            "id": pa.array(r, pa.int64()),
            "a": pa.array(r, pa.int32()),
            "b": [f"b{i}" for i in r],
            "c": [i * 1.5 for i in r],  # dropped later: these values must never come back
            "s": [{"x": i, "y": f"y{i}"} for i in r],
        },
        schema=OLD,
    )


def evolve(t: Table) -> None:
    with t.update_schema() as u:
        u.add_column("d", pa.string())
        u.rename_column("b", "bee")
        u.drop_column("c")
        u.update_column("a", pa.int64())
        u.add_column("s.z", pa.int32())
        u.rename_column("s.y", "why")
    with t.update_schema() as u:
        u.add_column("c", pa.float64())  # the old name, a new id


NEW = pa.schema(
    [
        ("id", pa.int64()),
        ("a", pa.int64()),
        ("bee", pa.string()),
        ("s", pa.struct([("x", pa.int64()), ("why", pa.string()), ("z", pa.int32())])),
        ("d", pa.string()),
        ("c", pa.float64()),
    ]
)


def new_rows(lo: int, hi: int) -> pa.Table:
    r = range(lo, hi)
    return pa.table(
        {
            "id": pa.array(r, pa.int64()),
            "a": pa.array([i + 2**40 for i in r], pa.int64()),
            "bee": [f"B{i}" for i in r],
            "s": [{"x": i, "why": f"w{i}", "z": i} for i in r],
            "d": [f"d{i}" for i in r],
            "c": [-1.0 for _ in r],
        },
        schema=NEW,
    )


def expected(ids: range) -> list[dict]:
    out = []
    for i in ids:
        if i < 20:
            out.append({"id": i, "a": i, "bee": f"b{i}", "s": {"x": i, "why": f"y{i}", "z": None}, "d": None, "c": None})
        else:
            out.append({"id": i, "a": i + 2**40, "bee": f"B{i}", "s": {"x": i, "why": f"w{i}", "z": i}, "d": f"d{i}", "c": -1.0})
    return out


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=OLD, properties={"rowGroupRows": "5"})
    table.append(old_rows(0, 10))
    table.append(old_rows(10, 20))
    table.delete(pc.field("id") == 3)
    evolve(table)
    table.append(new_rows(20, 25))
    return table


def live() -> range:
    return [i for i in range(25) if i != 3]  # type: ignore[return-value]


def test_to_arrow_reads_old_segments_by_id(t):
    out = t.to_arrow()
    assert out.schema.names == NEW.names and out.schema.field("a").type == pa.int64()
    assert out.sort_by("id").to_pylist() == expected(live())


def test_scan_projection_filter_and_predicates(t):
    sel = t.to_arrow(columns=["bee", "c"], filter=pc.field("bee") == "b7")
    assert sel.to_pylist() == [{"bee": "b7", "c": None}]
    # ``c`` of old rows is null: statistics of the old ``c`` (values 0 … 28.5) must not prune them
    nulls = t.to_arrow(columns=["id"], predicates=[Predicate("c", "is_null")])
    assert sorted(nulls.column("id").to_pylist()) == [i for i in range(20) if i != 3]
    big = t.to_arrow(columns=["id"], predicates=[Predicate("c", ">", 1.0)])
    assert big.num_rows == 0  # the old values (up to 28.5) never come back


def test_to_reader_and_to_duckdb(t):
    reader = t.scan().to_reader(chunk_rows=4)
    assert reader.read_all().sort_by("id").to_pylist() == expected(live())
    con = duckdb.connect()
    rel = t.scan(columns=["id", "bee", "c", "d"]).to_duckdb(con)
    got = sorted(rel.fetchall())
    assert got == [(r["id"], r["bee"], r["c"], r["d"]) for r in expected(live())]


def test_old_version_reads_its_own_schema(t):
    v_before = [h.version for h in t.history() if h.operation.value == "UPDATE_SCHEMA"][0] - 1
    old = t.to_arrow(version=v_before).sort_by("id")
    assert old.schema.names == OLD.names
    assert old.column("c").to_pylist()[:2] == [0.0, 1.5]


def test_delete_by_a_renamed_column(t):
    t.delete(pc.field("bee") == "b5")
    assert 5 not in t.to_arrow().column("id").to_pylist()


def test_compaction_rewrites_old_segments_into_the_new_schema(t):
    result = t.compact(min_input_files=2)
    assert result.input_segments == 3 and result.output_segments == 1
    assert len(t.snapshot().visible_segments()) == 1
    assert t.to_arrow().sort_by("id").to_pylist() == expected(live())
    # the output carries the current field ids: the dropped column is gone from the file
    import pyarrow.parquet as pq

    seg = t.snapshot().visible_segments()[0]
    names = pq.ParquetFile(f"{t.uri}/{seg.file.path}").schema_arrow.names
    assert names == NEW.names


def test_change_feed_reads_every_version_by_id(t):
    changes = t.changes(0).sort_by("id")
    inserts = changes.filter(pc.field("_change_type") == "insert")
    assert inserts.column("bee").to_pylist()[:2] == ["b0", "b1"]
    assert inserts.column("c").to_pylist()[:20] == [None] * 20
    assert "b" not in changes.column_names


def test_a_write_that_read_before_a_rename_fails_typed(t):
    from mvtable.connector import writes

    plan = writes.begin_write(t.uri, storage_options=None, incoming=NEW, mode="append")
    with t.update_schema() as u:
        u.rename_column("d", "dee")
    segs = writes.write_data(plan, new_rows(30, 31).to_batches())
    with pytest.raises(ConcurrentSchemaChangeError, match="renamed, dropped or retyped"):
        writes.finish_write(plan, segs)
    writes.abort_write(plan, segs)
    assert 30 not in t.to_arrow().column("id").to_pylist()


def test_a_write_that_read_before_an_addition_lands_and_reads_right(t):
    from mvtable.connector import writes

    plan = writes.begin_write(t.uri, storage_options=None, incoming=NEW, mode="append")
    with t.update_schema() as u:
        u.add_column("e", pa.int8())
    segs = writes.write_data(plan, new_rows(30, 31).to_batches())
    writes.finish_write(plan, segs)
    row = t.to_arrow(filter=pc.field("id") == 30).to_pylist()[0]
    assert row["e"] is None and row["bee"] == "B30"


def test_a_compaction_racing_a_rename_drops_its_bins_and_one_racing_an_addition_lands(tmp_path):
    from mvtable.connector.compaction import compact

    from ..test_compaction import during

    t = Table.create(str(tmp_path / "c"), schema=OLD, properties={"rowGroupRows": "5"})
    for i in range(4):
        t.append(old_rows(i * 5, i * 5 + 5))

    def rename() -> None:
        with t.update_schema() as u:
            u.rename_column("b", "bee")

    report = compact(t.io, t.commit_log, rewriter=during(t, rename), min_input_files=2)
    assert report.dropped and "renamed" in report.dropped[0].reason
    assert len(t.snapshot().visible_segments()) == 4  # nothing compacted, no file left behind
    assert sorted(p.name for p in (tmp_path / "c" / "data").glob("*.parquet")) == sorted(
        s.file.path.split("/")[-1] for s in t.snapshot().visible_segments()
    )

    def add() -> None:
        with t.update_schema() as u:
            u.add_column("z", pa.int8())

    compact(t.io, t.commit_log, rewriter=during(t, add), min_input_files=2)
    assert len(t.snapshot().visible_segments()) == 1
    out = t.to_arrow().sort_by("id")
    assert out.column("bee").to_pylist() == [f"b{i}" for i in range(20)] and out.column("z").null_count == 20


def test_a_restore_after_a_drop_and_re_add_never_prunes_by_old_statistics(tmp_path):
    t = Table.create(str(tmp_path / "r"), schema=OLD, properties={"rowGroupRows": "5"})
    t.append(old_rows(0, 10))
    before = t.version
    with t.update_schema() as u:
        u.drop_column("c")
    with t.update_schema() as u:
        u.add_column("c", pa.float64())
    t.overwrite(pa.table({"id": pa.array([99], pa.int64()), "a": pa.array([1], pa.int32()), "b": ["x"],
                          "s": [{"x": 1, "y": "y"}], "c": [5.0]}, schema=t.schema))  # fmt: skip
    t.restore(version=before)  # the old segment comes back as a clone, newer than the re-add
    nulls = t.to_arrow(columns=["id"], predicates=[Predicate("c", "is_null")])
    assert sorted(nulls.column("id").to_pylist()) == list(range(10))
    assert t.to_arrow(columns=["id"], predicates=[Predicate("c", ">", 1.0)]).num_rows == 0
