"""partitionRetention: vacuum drops whole time partitions past it, in one commit, by metadata alone."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from mvtable import Table
from mvtable.connector.partitions.retention import plan_partition_drop, range_end_ms
from mvtable.errors import SettingsError
from mvtable.lineage.enums import Operation

_DAY_MS = 86_400_000
_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("region", pa.string())])


def _rows(days: list[int], *, per_day: int = 3, start_id: int = 0) -> pa.Table:
    ts, ids = [], []
    for d in days:
        for i in range(per_day):
            ts.append(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=d, hours=i))
            ids.append(start_id + len(ids))
    return pa.table({"id": ids, "ts": ts, "region": ["eu"] * len(ids)}, schema=_SCHEMA)


def _table(uri: str, *, partition_by: list[str], retention: str = "10d") -> Table:
    return Table.create(uri, schema=_SCHEMA, partition_by=partition_by, properties={"partitionRetention": retention})


def test_range_ends_follow_the_transform() -> None:
    assert range_end_ms("day", 0) == _DAY_MS
    assert range_end_ms("hour", -1) == 0
    assert range_end_ms("month", 0) == 31 * _DAY_MS  # January 1970
    assert range_end_ms("month", 11) == 365 * _DAY_MS
    assert range_end_ms("year", 0) == 365 * _DAY_MS
    assert range_end_ms("day", None) is None
    assert range_end_ms("identity", 5) is None


def test_vacuum_drops_the_days_past_retention_in_one_commit(tmp_path) -> None:
    t = _table(str(tmp_path / "t"), partition_by=["day(ts)"])
    t.append(_rows([100, 101, 102, 110, 111]))
    before = t.version
    now = 121 * _DAY_MS + 1  # days ending on or before day 111 (its end) are 10 days old
    dry = t.vacuum(dry_run=True, now_ms=now)
    assert dry.partitions_dropped == ("ts_day=1970-04-11", "ts_day=1970-04-12", "ts_day=1970-04-13", "ts_day=1970-04-21")
    assert t.version == before  # a dry run commits nothing
    result = t.vacuum(now_ms=now)
    assert result.partitions_dropped == dry.partitions_dropped
    assert result.partition_drop_version == before + 1
    history = t.history()
    drop = next(h for h in history if h.version == before + 1)
    assert drop.operation == Operation.DROP_PARTITIONS
    rows = t.scan().to_arrow()
    assert sorted(rows["id"].to_pylist()) == list(range(12, 15))  # day 111 stays: it ended 10 days minus 1 ms before
    # time travel still reads the dropped rows: their files wait for versionRetentionPeriod
    assert t.scan(version=before).to_arrow().num_rows == 15


def test_a_partition_without_time_or_retention_is_kept(tmp_path) -> None:
    t = _table(str(tmp_path / "t"), partition_by=["region"])
    t.append(_rows([1, 2]))
    assert t.vacuum(now_ms=10_000 * _DAY_MS).partitions_dropped == ()
    assert t.scan().to_arrow().num_rows == 6
    u = Table.create(str(tmp_path / "u"), schema=_SCHEMA, partition_by=["day(ts)"])
    u.append(_rows([1]))
    assert u.vacuum(now_ms=10_000 * _DAY_MS).partitions_dropped == ()


def test_null_time_partitions_stay(tmp_path) -> None:
    t = _table(str(tmp_path / "t"), partition_by=["day(ts)"])
    t.append(pa.table({"id": [1, 2], "ts": [None, None], "region": ["x", "y"]}, schema=_SCHEMA))
    t.append(_rows([1], start_id=10))
    result = t.vacuum(now_ms=1000 * _DAY_MS)
    assert len(result.partitions_dropped) == 1
    assert sorted(t.scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_the_plan_is_a_pure_function_of_the_snapshot(tmp_path) -> None:
    t = _table(str(tmp_path / "t"), partition_by=["month(ts)", "region"])
    t.append(_rows([0, 40]))
    snap = t.snapshot()
    drop = plan_partition_drop(snap, now_ms=31 * _DAY_MS + 10 * _DAY_MS, retention_s=10 * 86400)
    assert [p.partition for p in drop.partitions] == [(0, "eu")]
    assert drop.rows == 3
    assert t.snapshot().version == snap.version


def test_a_bad_retention_is_refused_at_create(tmp_path) -> None:
    with pytest.raises(SettingsError, match="partitionRetention"):
        _table(str(tmp_path / "t"), partition_by=["day(ts)"], retention="ninety days")


def test_the_cli_names_the_dropped_partitions(tmp_path, capsys) -> None:
    from mvtable.connector.cli import main

    uri = str(tmp_path / "t")
    t = _table(uri, partition_by=["day(ts)"])
    t.append(_rows([100, 101]))
    assert main(["vacuum", uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would drop 2 partition(s) past partitionRetention: ts_day=1970-04-11, ts_day=1970-04-12" in out
