"""Schema evolution on a partitioned table: the current spec's columns cannot be dropped or
retyped, a rename keeps partitioning (specs name columns by field id), and an overwritten
schema carries the spec over to its columns' new ids."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.scan import plan_scan
from mvtable.connector.schema import schema_to_json
from mvtable.connector.schema_evolution.field_ids import fresh_ids
from mvtable.connector.schema_evolution.partition_sources import check_partition_sources
from mvtable.errors import SchemaEvolutionError
from mvtable.lineage.partitioning import UNPARTITIONED, PartitionField, PartitionSpec

START = dt.datetime(2024, 1, 1)
TS = pa.timestamp("us")


def rows(lo: int, hi: int, *, ts: str = "ts") -> pa.Table:
    """One row every 6 hours."""
    r = range(lo, hi)
    return pa.table(
        {
            "id": pa.array(r, pa.int64()),
            ts: pa.array([START + dt.timedelta(hours=6 * i) for i in r], TS),
            "region": [("eu", "us")[i % 2] for i in r],
            "qty": pa.array([i for i in r], pa.int32()),
        }
    )


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=rows(0, 1).schema, partition_by=["day(ts)", "region"])
    t.append(rows(0, 16))  # 4 days x 2 regions
    return t


def test_the_current_spec_columns_cannot_be_dropped_or_retyped(table) -> None:
    version = table.version
    with pytest.raises(SchemaEvolutionError) as info, table.update_schema() as u:
        u.drop_column("ts")
    message = info.value.message
    assert "'ts'" in message and "'ts_day'" in message and "day(ts)" in message and "Table.update_partitioning" in message
    assert table.version == version
    # nor widened, by update_schema or merge_schema; other columns change freely
    t2 = Table.create(str(table.uri) + "-2", schema=rows(0, 1).schema, partition_by=["qty"])
    t2.append(rows(0, 4))
    v2 = t2.version
    refused = r"partition field 'qty' \(qty\).*keeps its type, integer"
    with pytest.raises(SchemaEvolutionError, match=refused), t2.update_schema() as u:
        u.add_column("note", pa.string())
        u.update_column("qty", pa.int64())
    assert t2.version == v2  # nothing committed, not even the column added in the same block
    wider = rows(4, 8).set_column(3, "qty", pa.array(range(4, 8), pa.int64()))
    with pytest.raises(SchemaEvolutionError, match="'qty'.*Table.update_partitioning"):
        t2.append(wider, merge_schema=True)
    assert t2.to_arrow().num_rows == 4
    with table.update_schema() as u:
        u.drop_column("qty")
        u.update_column("id", pa.int64())
    assert table.to_arrow().column_names == ["id", "ts", "region"]


def test_a_renamed_source_column_keeps_partitioning_and_pruning(table) -> None:
    with table.update_schema() as u:
        u.rename_column("ts", "at")
        u.rename_column("region", "zone")
    more = rows(16, 24, ts="at").rename_columns(["id", "at", "zone", "qty"])
    table.append(more)  # days 4 and 5
    snapshot = table.snapshot()
    new = [s for s in snapshot.visible_segments() if s.added_version == snapshot.version]
    assert sorted(s.file.partition for s in new) == [(19727, "eu"), (19727, "us"), (19728, "eu"), (19728, "us")]
    day = (pc.field("at") >= pa.scalar(START + dt.timedelta(days=4), TS)) & (pc.field("zone") == "eu")
    plan = plan_scan(snapshot, filter=day)
    assert len(snapshot.visible_segments()) - plan.pruned_segments == 2  # days 4 and 5 of eu
    got = table.to_arrow(filter=day)
    assert sorted(got.column("id").to_pylist()) == [16, 18, 20, 22]


def test_overwrite_schema_carries_the_spec_to_the_new_columns(table) -> None:
    before = table.version
    old_spec = table.snapshot().default_spec
    data = rows(100, 108).append_column("note", pa.array(["x"] * 8)).select(["note", "region", "ts", "id"])
    table.overwrite(data, overwrite_schema=True)
    snapshot = table.snapshot()
    spec = snapshot.default_spec
    assert spec.spec_id == 2 and [(f.name, f.transform) for f in spec.fields] == [("ts_day", "day"), ("region", "identity")]
    assert [f.source_id for f in spec.fields] != [f.source_id for f in old_spec.fields]  # the columns' new ids
    assert snapshot.partition_specs[1] == old_spec  # the old versions keep theirs
    assert {s.file.spec_id for s in snapshot.visible_segments()} == {2}
    assert sorted(s.file.partition for s in snapshot.visible_segments()) == [
        (19723 + d, r) for d in (25, 26) for r in ("eu", "us")
    ]
    day = pc.field("ts") >= pa.scalar(START + dt.timedelta(days=26), TS)
    assert plan_scan(snapshot, filter=day).pruned_segments == 2
    assert sorted(table.to_arrow(filter=day).column("id").to_pylist()) == list(range(104, 108))
    assert table.to_arrow(version=before).num_rows == 16  # time travel reads the old spec's segments
    # a new schema without a source column (or of a type its transform does not take) is refused, nothing written
    with pytest.raises(SchemaEvolutionError, match="no column 'ts'.*Table.update_partitioning"):
        table.overwrite(rows(0, 4).drop_columns(["ts"]), overwrite_schema=True)
    stringly = rows(0, 4).set_column(1, "ts", pa.array(["2024-01-01"] * 4))
    with pytest.raises(SchemaEvolutionError, match="'ts_day' cannot follow column 'ts'"):
        table.overwrite(stringly, overwrite_schema=True)
    assert table.version == snapshot.version


def _doc(schema: pa.Schema) -> dict:
    return fresh_ids(schema_to_json(schema))[0]


def test_an_older_spec_keeps_a_date_its_values_were_made_of() -> None:
    """A widening keeps the partition values older segments hold, except a date under identity or bucket."""
    old = _doc(pa.schema([("d", pa.date32()), ("n", pa.int32())]))
    widened = _doc(pa.schema([("d", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]))
    specs = {
        0: UNPARTITIONED,
        1: PartitionSpec(spec_id=1, fields=(PartitionField(source_id=1, field_id=1000, name="d", transform="identity"),)),
        2: PartitionSpec(spec_id=2, fields=(PartitionField(source_id=1, field_id=1001, name="d_day", transform="day"),)),
        3: PartitionSpec(spec_id=3, fields=(PartitionField(source_id=2, field_id=1002, name="n", transform="identity"),)),
    }
    with pytest.raises(SchemaEvolutionError, match="'d' is the source of partition field 'd' .* of spec 1.*stays a date"):
        check_partition_sources(specs, 0, old, widened)
    del specs[1]
    check_partition_sources(specs, 0, old, widened)  # day of a date is day of its midnight; an int is a long
    with pytest.raises(SchemaEvolutionError, match="current partitioning"):
        check_partition_sources(specs, 3, old, widened)
