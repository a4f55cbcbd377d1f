"""Partitioned tables exported as Iceberg: pyiceberg sees every spec and prunes data files by partition."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, IsNull, LessThan
from pyiceberg.table import StaticTable

from mvtable.connector import Table
from mvtable.connector.partitions.spec import spec_columns
from mvtable.connector.partitions.values import encode_value
from mvtable.connector.schema import schema_from_json
from mvtable.lineage.partitioning import PartitionSpec

from .conftest import sorted_rows

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("name", pa.string()),
        ("amount", pa.decimal128(10, 2)),
    ]
)
T0 = dt.datetime(2026, 1, 25, tzinfo=dt.timezone.utc)
REGIONS = ["eu", "us", "apac", None]


def events(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": [REGIONS[i % 4] for i in ids],
            "ts": pa.array([None if i % 97 == 5 else T0 + dt.timedelta(hours=2 * i) for i in ids], SCHEMA.field("ts").type),
            "name": [f"{'abcde'[i % 5]}{'xyz'[i % 3]}-{i}" for i in ids],
            "amount": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
        },
        schema=SCHEMA,
    )


def day(n: int) -> dt.datetime:
    return dt.datetime(2026, 2, n, tzinfo=dt.timezone.utc)


def _iso(x: dt.datetime) -> str:
    return x.isoformat()


# (partition_by, pyiceberg filter, the same filter for mvtable's rows)
CASES = {
    "identity": (["region"], EqualTo("region", "apac"), pc.field("region") == "apac"),
    "day": (
        ["day(ts)"],
        And(GreaterThanOrEqual("ts", _iso(day(3))), LessThan("ts", _iso(day(5)))),
        (pc.field("ts") >= day(3)) & (pc.field("ts") < day(5)),
    ),
    "month": (
        ["month(ts)"],
        And(GreaterThanOrEqual("ts", _iso(day(1))), LessThan("ts", _iso(day(28)))),
        (pc.field("ts") >= day(1)) & (pc.field("ts") < day(28)),
    ),
    "hour": (
        ["hour(ts)"],
        And(GreaterThanOrEqual("ts", _iso(day(3))), LessThan("ts", _iso(day(3) + dt.timedelta(hours=6)))),
        (pc.field("ts") >= day(3)) & (pc.field("ts") < day(3) + dt.timedelta(hours=6)),
    ),
    "bucket": (["bucket(8, id)"], EqualTo("id", 417), pc.field("id") == 417),
    "truncate": (["truncate(1, name)"], EqualTo("name", "cy-7"), pc.field("name") == "cy-7"),
}


def partitioned(path: Path, partition_by: list[str]) -> Table:
    t = Table.create(str(path), schema=SCHEMA, partition_by=partition_by)
    t.append(events(0, 600))
    t.append(events(600, 150))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 7), 3))  # deletion vectors in many partitions
    return t


def expected(t: Table, mask: pc.Expression) -> list[dict]:
    return sorted_rows(t.scan().to_arrow().filter(mask))


@pytest.mark.parametrize("case", sorted(CASES))
def test_pyiceberg_prunes_data_files_by_each_transform(tmp_path: Path, case: str) -> None:
    partition_by, row_filter, mask = CASES[case]
    t = partitioned(tmp_path / case, partition_by)
    segments = t.snapshot().visible_segments()
    wanted = _partitions_of(t, mask)
    matching = {_name(seg.file.path) for seg in segments if seg.file.partition in wanted}
    table = StaticTable.from_metadata(t.export_iceberg().metadata)
    all_tasks = list(table.scan().plan_files())
    assert len(all_tasks) == len(segments)
    tasks = list(table.scan(row_filter=row_filter).plan_files())
    assert 0 < len(tasks) < len(all_tasks) / 2, f"{case}: {len(tasks)} of {len(all_tasks)} files planned"
    assert {_name(task.file.file_path) for task in tasks} == matching
    assert all(task.delete_files for task in tasks if t.snapshot().dvs.get(_segment_of(t, task.file.file_path)))
    got = sorted_rows(table.scan(row_filter=row_filter).to_arrow())
    assert got == expected(t, mask) and got
    # and the whole table, with every deletion vector applied
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(t.scan().to_arrow())


def _partitions_of(t: Table, mask: pc.Expression) -> set[tuple]:
    """The partition tuples of the segments holding a row ``mask`` keeps (deleted rows too)."""
    snap = t.snapshot()
    everything = pa.concat_tables([events(0, 600), events(600, 150)])
    keys = partition_keys(snap.default_spec, snap.table_schema, everything)
    kept = everything.append_column("_k", pa.array(range(everything.num_rows))).filter(mask).column("_k").to_pylist()
    return {keys[i] for i in kept}


def partition_keys(spec: PartitionSpec, table_schema: dict[str, Any], data: pa.Table) -> list[tuple[Any, ...]]:
    """Each row's partition tuple under ``spec``, as the log stores it."""
    arrow = schema_from_json(table_schema)
    columns = []
    for _, column, transform in spec_columns(spec, table_schema):
        assert column is not None
        source = arrow.field(column).type
        values = transform.apply(data.column(column)).to_pylist()
        columns.append([encode_value(v, transform, source) for v in values])
    return list(zip(*columns)) if columns else [() for _ in range(data.num_rows)]


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _segment_of(t: Table, location: str) -> str:
    return next(seg.id for seg in t.snapshot().visible_segments() if _name(seg.file.path) == _name(location))


def test_the_metadata_carries_the_spec_with_iceberg_field_ids(tmp_path: Path) -> None:
    t = partitioned(tmp_path / "t", ["day(ts)", "region", "bucket(4, id)"])
    result = t.export_iceberg()
    meta = json.loads(Path(result.metadata.removeprefix("file://")).read_text())
    ids = {f["name"]: f["id"] for f in meta["schemas"][-1]["fields"]}
    assert meta["default-spec-id"] == 1 and meta["last-partition-id"] == 1002
    assert meta["partition-specs"] == [
        {"spec-id": 0, "fields": []},
        {
            "spec-id": 1,
            "fields": [
                {"source-id": ids["ts"], "field-id": 1000, "name": "ts_day", "transform": "day"},
                {"source-id": ids["region"], "field-id": 1001, "name": "region", "transform": "identity"},
                {"source-id": ids["id"], "field-id": 1002, "name": "id_bucket", "transform": "bucket[4]"},
            ],
        },
    ]
    table = StaticTable.from_metadata(result.metadata)
    spec = table.spec()
    assert spec.spec_id == 1 and [f.transform.__class__.__name__ for f in spec.fields] == [
        "DayTransform",
        "IdentityTransform",
        "BucketTransform",
    ]
    # each file's partition is its segment's, in Iceberg's types (a day is a date, a bucket an int)
    stored = {_name(seg.file.path): seg.file.partition for seg in t.snapshot().visible_segments()}
    for task in table.scan().plan_files():
        days, region, bucket = stored[_name(task.file.file_path)]
        assert tuple(task.file.partition) == (days, region, bucket)
    # null partition values: rows without a ts are in the partition whose day is null
    nulls = list(table.scan(row_filter=IsNull("ts")).plan_files())
    assert nulls and all(task.file.partition[0] is None for task in nulls)
    assert len(table.scan(row_filter=IsNull("ts")).to_arrow()) == t.scan().to_arrow().filter(pc.is_null(pc.field("ts"))).num_rows


def test_manifest_list_summarises_each_partition_field(tmp_path: Path) -> None:
    t = partitioned(tmp_path / "t", ["day(ts)"])
    table = StaticTable.from_metadata(t.export_iceberg().metadata)
    manifests = table.current_snapshot().manifests(table.io)
    days = [seg.file.partition[0] for seg in t.snapshot().visible_segments()]
    data = [m for m in manifests if m.content == 0]
    assert len(data) == 1 and data[0].partition_spec_id == 1
    (summary,) = data[0].partitions
    assert summary.contains_null is True  # rows without a ts
    present = [d for d in days if d is not None]
    assert struct.unpack("<i", summary.lower_bound)[0] == min(present)
    assert struct.unpack("<i", summary.upper_bound)[0] == max(present)
    assert all(m.partition_spec_id == 1 for m in manifests)  # the deletion vectors' manifest too


def test_identity_values_of_each_type_round_trip(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("d", pa.date32()),
            ("price", pa.decimal128(12, 3)),
            ("flag", pa.bool_()),
            ("small", pa.int16()),
            ("at", pa.timestamp("us")),
            ("ratio", pa.float64()),
            ("blob", pa.binary()),
        ]
    )
    n = 12
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "d": pa.array([dt.date(1969, 12, 30) + dt.timedelta(days=i % 3) for i in range(n)], pa.date32()),
            "price": pa.array([decimal.Decimal("-12.345") * (i % 2) for i in range(n)], pa.decimal128(12, 3)),
            "flag": [i % 2 == 0 for i in range(n)],
            "small": pa.array([-3 if i % 3 else None for i in range(n)], pa.int16()),
            "at": pa.array([dt.datetime(2026, 3, 1, 12, 30, 0, 250) for _ in range(n)], pa.timestamp("us")),
            "ratio": [0.5 if i % 4 else -2.25 for i in range(n)],
            "blob": [b"\x00\xff" if i % 2 else b"k" for i in range(n)],
        },
        schema=schema,
    )
    t = Table.create(str(tmp_path / "t"), schema=schema, partition_by=["d", "price", "flag", "small", "at", "ratio", "blob"])
    t.append(data)
    assert len(t.snapshot().visible_segments()) == 9  # d by i % 3, the others by i % 2 and i % 4
    table = StaticTable.from_metadata(t.export_iceberg().metadata)
    got = {tuple(task.file.partition) for task in table.scan().plan_files()}
    want = {
        (
            (r["d"] - dt.date(1970, 1, 1)).days,
            r["price"],
            r["flag"],
            r["small"],
            (r["at"] - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1),
            r["ratio"],
            r["blob"],
        )
        for r in data.to_pylist()
    }
    assert got == want
    assert sorted_rows(table.scan(row_filter=EqualTo("price", decimal.Decimal("-12.345"))).to_arrow()) == sorted_rows(
        data.filter(pc.field("price") == decimal.Decimal("-12.345"))
    )
    assert len(list(table.scan(row_filter=EqualTo("d", "1969-12-31")).plan_files())) == 3  # of rows 1, 4, 7, 10


def test_an_evolved_spec_exports_every_spec_and_prunes_both(tmp_path: Path) -> None:
    """Unpartitioned, then day(ts), then bucket(4, id) + month(ts): each file keeps its own spec."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(events(0, 100))  # spec 0
    t.update_partitioning(["day(ts)"])  # spec 1
    t.append(events(100, 300))
    t.update_partitioning(["month(ts)", "bucket(4, id)"])  # spec 2
    t.append(events(400, 300))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 7), 1))
    result = t.export_iceberg(all_versions=True)
    meta = json.loads(Path(result.metadata.removeprefix("file://")).read_text())
    assert [s["spec-id"] for s in meta["partition-specs"]] == [0, 1, 2]
    assert meta["default-spec-id"] == 2 and meta["last-partition-id"] == 1002
    assert [f["transform"] for f in meta["partition-specs"][2]["fields"]] == ["month", "bucket[4]"]
    table = StaticTable.from_metadata(result.metadata)
    manifests = table.current_snapshot().manifests(table.io)
    assert sorted((m.content, m.partition_spec_id) for m in manifests) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    segments = t.snapshot().visible_segments()
    all_tasks = list(table.scan().plan_files())
    assert len(all_tasks) == len(segments)
    # a two-day range: the unpartitioned file, two day files, and spec 2's files of that month
    row_filter = And(GreaterThanOrEqual("ts", _iso(day(10))), LessThan("ts", _iso(day(12))))
    mask = (pc.field("ts") >= day(10)) & (pc.field("ts") < day(12))
    tasks = list(table.scan(row_filter=row_filter).plan_files())
    by_spec = {0: 0, 1: 0, 2: 0}
    for task in tasks:
        by_spec[task.file.spec_id] += 1
    spec2 = sum(1 for seg in segments if seg.file.spec_id == 2 and seg.file.partition[0] == 673)  # Feb 2026
    assert by_spec == {0: 1, 1: 2, 2: spec2} and len(tasks) < len(all_tasks) / 3
    assert sorted_rows(table.scan(row_filter=row_filter).to_arrow()) == expected(t, mask)
    # older versions read under the specs they had
    for v in range(t.version + 1):
        assert sorted_rows(table.scan(snapshot_id=v + 1).to_arrow()) == sorted_rows(t.scan(version=v).to_arrow())


def test_a_renamed_source_column_still_prunes(tmp_path: Path) -> None:
    """A spec names its column by field id: after a rename pyiceberg prunes by the new name."""
    t = partitioned(tmp_path / "t", ["region", "day(ts)"])
    with t.update_schema() as u:
        u.rename_column("region", "area")
    table = StaticTable.from_metadata(t.export_iceberg(all_versions=True).metadata)
    tasks = list(table.scan(row_filter=EqualTo("area", "eu")).plan_files())
    eu = [seg for seg in t.snapshot().visible_segments() if seg.file.partition[0] == "eu"]
    assert len(tasks) == len(eu) < len(t.snapshot().visible_segments()) / 3
    got = sorted_rows(table.scan(row_filter=EqualTo("area", "eu")).to_arrow())
    assert got and got == sorted_rows(t.scan().to_arrow().filter(pc.field("area") == "eu"))


def test_compaction_into_a_new_grain_exports_every_version(tmp_path: Path) -> None:
    """hour(ts) files compacted into day(ts) after update_partitioning: each version reads as it was."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["hour(ts)"])
    t.append(events(0, 300))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 7), 1))
    t.update_partitioning(["day(ts)"])
    t.append(events(300, 100))
    t.compact()
    assert {seg.file.spec_id for seg in t.snapshot().visible_segments()} == {2}
    table = StaticTable.from_metadata(t.export_iceberg(all_versions=True).metadata)
    for v in range(t.version + 1):
        assert sorted_rows(table.scan(snapshot_id=v + 1).to_arrow()) == sorted_rows(t.scan(version=v).to_arrow()), v
    row_filter = And(GreaterThanOrEqual("ts", _iso(day(3))), LessThan("ts", _iso(day(4))))
    assert len(list(table.scan(row_filter=row_filter).plan_files())) == 1
    assert sorted_rows(table.scan(row_filter=row_filter).to_arrow()) == expected(
        t, (pc.field("ts") >= day(3)) & (pc.field("ts") < day(4))
    )
