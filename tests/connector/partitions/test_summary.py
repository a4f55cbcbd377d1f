"""``Table.partitions()`` and ``mvtable partitions``: one row per partition from the log, and
the partition model surviving checkpoints."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.connector import Table

from ..test_cli import run
from .conftest import events


def made(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema, partition_by=["day(ts)", "region"])
    t.append(events(36, hours=2, nulls=True))  # days 0-2, three regions, a null partition
    t.append(events(12, start=36, hours=2))  # day 3
    t.delete(pc.field("id") < 4)
    return t


def test_partitions_table(tmp_path) -> None:
    t = made(tmp_path)
    parts = t.partitions()
    assert parts.schema.names == [
        "ts_day",
        "region",
        "spec_id",
        "segments",
        "rows",
        "deleted_rows",
        "bytes",
        "last_modified_version",
    ]
    assert parts.schema.field("ts_day").type == pa.date32() and parts.schema.field("region").type == pa.string()
    rows = parts.to_pylist()
    assert len(rows) == 13 and rows[0]["ts_day"] is None and rows[0]["region"] is None  # nulls first
    assert sum(r["rows"] for r in rows) == t.to_arrow().num_rows == 48 - 4
    assert sum(r["deleted_rows"] for r in rows) == 4
    day0_eu = next(r for r in rows if r["ts_day"] == dt.date(2024, 1, 1) and r["region"] == "eu")
    assert day0_eu["segments"] == 1 and day0_eu["spec_id"] == 1 and day0_eu["bytes"] > 0
    assert {r["last_modified_version"] for r in rows if r["ts_day"] == dt.date(2024, 1, 4)} == {2}
    assert {r["last_modified_version"] for r in rows if r["ts_day"] == dt.date(2024, 1, 1)} == {1}
    # time travel: version 1 had no day 3
    assert len(t.partitions(version=1)) == 10


def test_an_unpartitioned_table_is_one_row(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema)
    t.append(events(10))
    assert t.partitions().to_pylist() == [
        {
            "spec_id": 0,
            "segments": 1,
            "rows": 10,
            "deleted_rows": 0,
            "bytes": t.snapshot().visible_segments()[0].file.size_bytes,
            "last_modified_version": 1,
        }
    ]


def test_cli_partitions(tmp_path) -> None:
    t = made(tmp_path)
    proc = run("partitions", t.uri)
    assert proc.returncode == 0, proc.stderr
    assert "ts_day" in proc.stdout and "2024-01-04" in proc.stdout and "apac" in proc.stdout
    out = run("partitions", t.uri, "--json")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert len(records) == 13 and records[1]["ts_day"] == "2024-01-01"
    assert set(records[1]) == {
        "ts_day",
        "region",
        "spec_id",
        "segments",
        "rows",
        "deleted_rows",
        "bytes",
        "last_modified_version",
    }
    assert json.loads(run("partitions", t.uri, "--json", "--version", "1").stdout)[-1]["ts_day"] == "2024-01-03"


def test_partitions_survive_a_checkpoint(tmp_path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=events(1).schema, partition_by=["month(ts)"], properties={"checkpointInterval": "2"})
    for i in range(5):
        t.append(events(20, start=20 * i, hours=30))
    assert any(p.name.endswith(".checkpoint.parquet") for p in (tmp_path / "t" / "_mvtable" / "log").iterdir())
    fresh = Table(uri)  # reads the newest checkpoint and the commits after it
    s, before = fresh.snapshot(), t.snapshot()
    assert s.partition_specs == before.partition_specs and s.default_spec_id == 1
    assert [seg.file.partition for seg in s.visible_segments()] == [seg.file.partition for seg in before.visible_segments()]
    assert fresh.partitions().equals(t.partitions())
