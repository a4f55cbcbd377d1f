"""Partitioned tables exported as Delta: identity columns are Delta partition columns, other transforms are not."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder

from mvtable.connector import Table
from mvtable.lineage.actions import RemoveSegment
from mvtable.lineage.enums import Operation

from .conftest import sorted_rows

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("price", pa.decimal128(9, 2)),
        ("n", pa.int32()),
        ("flag", pa.bool_()),
    ]
)
T0 = dt.datetime(2026, 3, 1, 6, 30, 0, 125, tzinfo=dt.timezone.utc)


def events(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": [["eu", "us", "apac", None][i % 4] for i in ids],
            "d": pa.array([dt.date(2026, 3, 1 + i % 3) for i in ids], pa.date32()),
            "ts": pa.array([T0 + dt.timedelta(hours=7 * i) for i in ids], SCHEMA.field("ts").type),
            "price": pa.array([decimal.Decimal(i % 2) - decimal.Decimal("0.25") for i in ids], pa.decimal128(9, 2)),
            "n": pa.array([None if i % 5 == 0 else -i % 2 for i in ids], pa.int32()),
            "flag": [i % 2 == 0 for i in ids],
        },
        schema=SCHEMA,
    )


def delta_rows(uri: str, sql: str = "select * from t", version: int | None = None) -> list[dict]:
    table = DeltaTable(uri, version=version)
    return sorted_rows(pa.table(QueryBuilder().register("t", table).execute(sql).read_all()))


def log_actions(uri: str) -> list[list[dict]]:
    folder = os.path.join(uri, "_delta_log")
    return [[json.loads(line) for line in open(os.path.join(folder, name))] for name in sorted(os.listdir(folder))]


def test_identity_columns_are_delta_partition_columns_and_prune(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["region", "d"])
    t.append(events(0, 240))
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 7), 2))
    t.export_delta()
    (commit,) = log_actions(t.uri)
    meta = next(a["metaData"] for a in commit if "metaData" in a)
    assert meta["partitionColumns"] == ["region", "d"]
    adds = [a["add"] for a in commit if "add" in a]
    stored = {seg.file.path: seg.file.partition for seg in t.snapshot().visible_segments()}
    assert len(adds) == len(stored) == 12
    for add in adds:
        region, day = stored[add["path"]]  # the log keeps an identity date as ISO text, Delta's form too
        assert add["partitionValues"] == {"region": region, "d": day}
    assert any(add["partitionValues"]["region"] is None for add in adds)  # null stays null
    table = DeltaTable(t.uri)
    assert len(table.file_uris()) == 12
    eu = table.file_uris(file_pruning_predicate=[("region", "=", "eu")])
    assert len(eu) == 3 and all(stored[f"data/{os.path.basename(u)}"][0] == "eu" for u in eu)
    assert len(table.file_uris(file_pruning_predicate=[("region", "=", "eu"), ("d", "=", "2026-03-02")])) == 1
    # rows read back equal mvtable's, partition columns included (they are in the files too:
    # deltalake takes them from partitionValues, polars from the files; both agree)
    want = sorted_rows(t.scan().to_arrow())
    assert delta_rows(t.uri) == want
    assert sorted_rows(pl.read_delta(t.uri).to_arrow()) == want
    eu_rows = delta_rows(t.uri, "select * from t where region = 'eu' and d = DATE '2026-03-02'")
    assert eu_rows == sorted_rows(
        t.scan().to_arrow().filter((pc.field("region") == "eu") & (pc.field("d") == dt.date(2026, 3, 2)))
    )
    assert eu_rows


def test_identity_values_of_other_types_read_back(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["ts", "price", "n", "flag"])
    data = events(0, 12)
    t.append(data)
    t.export_delta()
    adds = [a["add"] for a in log_actions(t.uri)[0] if "add" in a]
    values = {tuple(a["partitionValues"].values()) for a in adds}
    assert ("2026-03-01T06:30:00.000125Z", "-0.25", None, "true") in values  # row 0
    assert delta_rows(t.uri) == sorted_rows(data)
    assert sorted_rows(pl.read_delta(t.uri).to_arrow()) == sorted_rows(data)
    table = DeltaTable(t.uri)
    assert len(table.file_uris(file_pruning_predicate=[("price", "=", "0.75")])) == 6
    assert delta_rows(t.uri, "select * from t where n = 1") == sorted_rows(data.filter(pc.field("n") == 1))


def test_a_table_partitioned_by_a_transform_exports_unpartitioned(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["day(ts)", "bucket(4, id)"])
    t.append(events(0, 100))
    t.export_delta()
    (commit,) = log_actions(t.uri)
    assert next(a["metaData"] for a in commit if "metaData" in a)["partitionColumns"] == []
    assert all(a["add"]["partitionValues"] == {} for a in commit if "add" in a)
    assert delta_rows(t.uri) == sorted_rows(t.scan().to_arrow())


def test_partition_columns_follow_the_specs_of_the_visible_files(tmp_path: Path) -> None:
    """Only identity columns every visible file has are listed: an unpartitioned file left over
    keeps the export unpartitioned; once it is gone the columns appear, every file re-added with them."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(events(0, 40))  # spec 0
    t.update_partitioning(["region"])
    t.append(events(40, 40))
    t.update_partitioning(["day(ts)", "region"])
    t.append(events(80, 40))
    first = t.export_delta()
    snap = t.snapshot()
    old = next(seg.id for seg in snap.visible_segments() if seg.file.spec_id is None)
    t.commit_log.commit(read=snap, operation=Operation.DELETE, build=lambda _: [RemoveSegment(segment_id=old)])
    second = t.export_delta()
    commits = log_actions(t.uri)
    assert len(commits) == 2 and first.versions and second.versions == (t.version,)
    assert next(a["metaData"] for a in commits[0] if "metaData" in a)["partitionColumns"] == []
    meta = next(a["metaData"] for a in commits[1] if "metaData" in a)
    assert meta["partitionColumns"] == ["region"]
    adds = [a["add"] for a in commits[1] if "add" in a]
    removes = [a["remove"] for a in commits[1] if "remove" in a]
    visible = t.snapshot().visible_segments()
    assert len(adds) == len(visible) and [r["path"] for r in removes] == [f"data/{old}.parquet"]
    assert all(set(a["partitionValues"]) == {"region"} for a in adds)
    assert delta_rows(t.uri, version=0) == sorted_rows(t.scan(version=first.versions[-1]).to_arrow())
    assert delta_rows(t.uri) == sorted_rows(t.scan().to_arrow())
    us = [seg for seg in visible if seg.file.partition[-1] == "us"]  # region is the last field of both specs
    assert 2 < len(us) == len(DeltaTable(t.uri).file_uris(file_pruning_predicate=[("region", "=", "us")]))


def test_a_renamed_partition_column_keeps_partitioning_under_column_mapping(tmp_path: Path) -> None:
    """After a rename Delta maps columns by id: partitionColumns name the column, partitionValues its physical name."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["region"])
    t.append(events(0, 40))
    t.export_delta()
    with t.update_schema() as u:
        u.rename_column("region", "area")
    t.append(events(40, 8).rename_columns([*(n if n != "region" else "area" for n in SCHEMA.names)]))
    t.export_delta()
    meta = next(a["metaData"] for a in log_actions(t.uri)[-1] if "metaData" in a)
    assert meta["partitionColumns"] == ["area"] and meta["configuration"]["delta.columnMapping.mode"] == "id"
    adds = [a["add"] for a in log_actions(t.uri)[-1] if "add" in a]
    assert adds and all(set(a["partitionValues"]) == {"region"} for a in adds)  # the physical name
    assert delta_rows(t.uri) == sorted_rows(t.scan().to_arrow())
    eu = DeltaTable(t.uri).file_uris(file_pruning_predicate=[("area", "=", "eu")])
    assert len(eu) == 2
    assert delta_rows(t.uri, "select * from t where area = 'eu'") == sorted_rows(
        t.scan().to_arrow().filter(pc.field("area") == "eu")
    )


def test_a_binary_identity_column_is_not_a_delta_partition_column(tmp_path: Path) -> None:
    """delta-rs reads a binary partition value back as the UTF-8 bytes of its string form: b"\\xff" as b"\\xc3\\xbf"."""
    schema = pa.schema([("id", pa.int64()), ("b", pa.binary()), ("region", pa.string())])
    data = pa.table({"id": [1, 2, 3], "b": [b"\x00\xff", b"k", None], "region": ["eu", "us", "eu"]}, schema=schema)
    t = Table.create(str(tmp_path / "t"), schema=schema, partition_by=["b", "region"])
    t.append(data)
    t.export_delta()
    (commit,) = log_actions(t.uri)
    assert next(a["metaData"] for a in commit if "metaData" in a)["partitionColumns"] == ["region"]
    assert delta_rows(t.uri) == sorted_rows(data)
