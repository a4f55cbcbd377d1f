"""Scoped consistent pushes on partitioned tables (``partition_by``): a predicate on the
partition column, or a range of whole days under ``day(ts)``, is a metadata change decided
from the partition values; dynamic partition overwrite replaces exactly the data's
partitions; the last push of every day can be rolled back after pushes of other days; a
staged push of one day does not hold up pushes of another."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, scoped_push, writes
from mvtable.errors import DuplicateKeyError, StagedPushError

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def on_day(day: dt.date) -> pc.Expression:
    return pc.field("day") == day


def days(tmp_path: Path) -> Table:
    """Three days in one append: the writer splits them, one segment per day."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(DAY_C, 5, 6)]))
    return t


def last_push_parameters(t: Table) -> dict:
    return [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters


def hidden_data(t: Table, tmp_path: Path):
    """Every data file out of the table's way while the block runs: a push that opened one fails."""

    class Hidden:
        def __enter__(self):
            self.data, self.away = Path(t.uri) / "data", tmp_path / "away"
            self.data.rename(self.away)

        def __exit__(self, *exc):
            if self.data.exists():  # the push wrote its own files there
                for f in self.data.iterdir():
                    f.rename(self.away / f.name)
                self.data.rmdir()
            self.away.rename(self.data)

    return Hidden()


def test_a_push_of_one_partition_opens_no_data_file_and_records_the_partition(tmp_path):
    t = days(tmp_path)
    with hidden_data(t, tmp_path):
        t.overwrite(rows(DAY_B, 30, v="new"), consistent_push=True, replace_where=on_day(DAY_B))
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 2)] + [("2024-01-06", 30, "new")] + [
        ("2024-01-07", i, "old") for i in (5, 6)
    ]
    params = last_push_parameters(t)
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (1, 0, 0)
    assert params["partitions"] == ["day=2024-01-06"]
    (entry,) = t.lineage()
    assert entry.partitions == ("day=2024-01-06",)


def test_a_range_of_whole_days_under_day_ts_is_decided_by_the_partitions(tmp_path):
    schema = pa.schema([("ts", pa.timestamp("us")), ("id", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, partition_by=["day(ts)"])
    stamps = [dt.datetime(2024, 1, d, h) for d in (5, 6, 7) for h in (1, 23)]
    t.append(pa.table({"ts": stamps, "id": list(range(len(stamps)))}, schema=schema))
    new = pa.table({"ts": [dt.datetime(2024, 1, 6, 12), dt.datetime(2024, 1, 7, 12)], "id": [100, 101]}, schema=schema)
    window = (pc.field("ts") >= pa.scalar(dt.datetime(2024, 1, 6))) & (pc.field("ts") < pa.scalar(dt.datetime(2024, 1, 8)))
    with hidden_data(t, tmp_path):
        t.overwrite(new, consistent_push=True, replace_where=window)
    assert sorted(t.to_arrow().column("id").to_pylist()) == [0, 1, 100, 101]
    params = last_push_parameters(t)
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (2, 0, 0)
    assert params["partitions"] == ["ts_day=2024-01-06", "ts_day=2024-01-07"]


def test_dynamic_partition_overwrite_replaces_exactly_the_datas_partitions(tmp_path):
    t = days(tmp_path)
    with hidden_data(t, tmp_path):
        result = t.overwrite(
            pa.concat_tables([rows(DAY_A, 10, v="new"), rows(DAY_C, 30, v="new")]),
            consistent_push=True,
            partition_overwrite="dynamic",
        )
    assert content(t) == [
        ("2024-01-05", 10, "new"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 30, "new"),
    ]
    params = last_push_parameters(t)
    assert params["partitionOverwriteMode"] == "dynamic"
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (2, 0, 0)
    (entry,) = t.lineage()
    assert entry.scope == "dynamic partition overwrite" and entry.partitions == ("day=2024-01-05", "day=2024-01-07")
    t.rollback(entry=result.entry)
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 2)] + [("2024-01-06", i, "old") for i in (3, 4)] + [
        ("2024-01-07", i, "old") for i in (5, 6)
    ]


def test_dynamic_overwrite_of_a_new_partition_replaces_nothing(tmp_path):
    t = days(tmp_path)
    t.overwrite(rows(dt.date(2024, 2, 1), 99, v="new"), consistent_push=True, partition_overwrite="dynamic")
    assert len(content(t)) == 7
    assert last_push_parameters(t)["replacedSegments"] == 0


def test_rollback_of_one_days_push_after_pushes_of_another_day(tmp_path):
    """Push day A; append to day B; push day B three times; roll back A's push: A's old rows back, B untouched."""
    t = days(tmp_path)
    push_a = t.overwrite(rows(DAY_A, 7, v="A1"), consistent_push=True, replace_where=on_day(DAY_A)).entry
    t.append(rows(DAY_B, 10, v="appended"))
    for i in range(3):
        t.overwrite(rows(DAY_B, 20 + i, v=f"B{i}"), consistent_push=True, replace_where=on_day(DAY_B))
    day_b = [r for r in content(t) if r[0] == "2024-01-06"]
    assert day_b == [("2024-01-06", 22, "B2")]
    assert len(t.lineage()) == 3  # A's push, and day B's two newest: retention dropped B's first
    t.rollback(entry=push_a)
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 2)] + day_b + [("2024-01-07", i, "old") for i in (5, 6)]


def test_a_staged_push_of_one_day_is_published_or_rolled_back_while_other_days_push(tmp_path):
    t = days(tmp_path)
    staged = t.overwrite(rows(DAY_A, 7, v="staged"), consistent_push=True, publish=False, replace_where=on_day(DAY_A)).entry
    before = content(t)
    assert ("2024-01-05", 7, "staged") not in before
    assert t.scan(lineage_entry=staged).count() == 5  # day A as it will be, the other days as they are
    t.overwrite(rows(DAY_B, 8, v="B"), consistent_push=True, replace_where=on_day(DAY_B))  # another day passes
    with pytest.raises(StagedPushError, match="staged push over partition day=2024-01-05"):
        t.overwrite(rows(DAY_A, 9), consistent_push=True, replace_where=on_day(DAY_A))
    t.publish(staged)
    assert [r for r in content(t) if r[0] != "2024-01-07"] == [("2024-01-05", 7, "staged"), ("2024-01-06", 8, "B")]
    t.rollback(entry=staged)
    assert [r for r in content(t) if r[0] != "2024-01-07"] == [("2024-01-05", i, "old") for i in (1, 2)] + [
        ("2024-01-06", 8, "B")
    ]


def test_a_predicate_that_cuts_a_partition_rewrites_only_that_partitions_segment(tmp_path):
    t = days(tmp_path)
    t.overwrite(rows(DAY_C, 6, v="new"), consistent_push=True, replace_where=on_day(DAY_C) & (pc.field("id") == 6))
    params = last_push_parameters(t)
    # day A and B are dropped by their partition values, day C's one segment is read and copied
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (0, 1, 1)
    assert params["partitions"] == ["day=2024-01-07"]
    assert [r for r in content(t) if r[0] == "2024-01-07"] == [("2024-01-07", 5, "old"), ("2024-01-07", 6, "new")]


def test_a_keyed_table_keeps_its_keys_unique_across_scoped_pushes(tmp_path):
    t = Table.create(str(tmp_path / "k"), schema=SCHEMA, primary_key=["id"], partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, v="a1"), rows(DAY_A, 2, v="a2"), rows(DAY_B, 3, 4)]))
    # the day's own keys may come back: the rows holding them are replaced
    t.overwrite(
        pa.concat_tables([rows(DAY_A, 1, v="a1"), rows(DAY_A, 2, v="a2")]), consistent_push=True, replace_where=on_day(DAY_A)
    )
    before = content(t)
    # a key another day holds is a duplicate
    with pytest.raises(DuplicateKeyError, match="already in the table"):
        t.overwrite(rows(DAY_A, 3), consistent_push=True, replace_where=on_day(DAY_A))
    # so is the key of a row the push keeps (it rewrites day A's segment and keeps id 2)
    with pytest.raises(DuplicateKeyError):
        t.overwrite(rows(DAY_A, 2, v="a1"), consistent_push=True, replace_where=on_day(DAY_A) & (pc.field("v") == "a1"))
    assert content(t) == before
    assert [e.state for e in t.lineage()][-2:] == ["REVERTED", "REVERTED"]
    # replacing the row with key 1 alone, keeping key 2
    t.overwrite(rows(DAY_A, 1, 9, v="a1"), consistent_push=True, replace_where=on_day(DAY_A) & (pc.field("v") == "a1"))
    assert [r for r in content(t) if r[0] == "2024-01-05"] == [
        ("2024-01-05", 1, "a1"),
        ("2024-01-05", 2, "a2"),
        ("2024-01-05", 9, "a1"),
    ]


def test_an_upsert_into_another_day_does_not_conflict_with_a_running_push(tmp_path):
    t = Table.create(str(tmp_path / "k"), schema=SCHEMA, primary_key=["id"], partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    data = rows(DAY_A, 1, 5, v="pushed")
    plan = writes.begin_write(
        t.uri,
        storage_options=None,
        incoming=SCHEMA,
        mode="overwrite",
        consistent_push=True,
        scope=scoped_push.request(data, replace_where=on_day(DAY_A), partition_overwrite=None),
    )
    result = t.upsert(pa.concat_tables([rows(DAY_B, 3, v="updated"), rows(DAY_B, 6, v="inserted")]))
    assert (result.updated_rows, result.inserted_rows) == (1, 1)
    segments = writes.write_data(plan, data.to_batches())
    writes.finish_write(plan, segments)
    assert content(t) == [
        ("2024-01-05", 1, "pushed"),
        ("2024-01-05", 5, "pushed"),
        ("2024-01-06", 3, "updated"),
        ("2024-01-06", 4, "old"),
        ("2024-01-06", 6, "inserted"),
    ]


def test_the_write_protocol_checks_a_scoped_pushs_keys_at_its_commit(tmp_path):
    """``begin_write``/``write_data``/``finish_write`` (the path Spark's writers build on) read the keys back and check them."""
    t = Table.create(str(tmp_path / "k"), schema=SCHEMA, primary_key=["id"], partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    data = rows(DAY_A, 4, v="pushed")  # key 4 lives in day B, which the push leaves alone
    plan = writes.begin_write(
        t.uri,
        storage_options=None,
        incoming=SCHEMA,
        mode="overwrite",
        consistent_push=True,
        scope=scoped_push.request(data, replace_where=on_day(DAY_A), partition_overwrite=None),
    )
    segments = writes.write_data(plan, data.to_batches())
    with pytest.raises(DuplicateKeyError, match="already in the table"):
        writes.finish_write(plan, segments)
    writes.abort_write(plan, segments)
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-06", 3, "old"), ("2024-01-06", 4, "old")]


def test_dynamic_overwrite_after_the_grain_changed_rewrites_old_grain_segments(tmp_path):
    """Month segments of the old spec hold several days: a dynamic overwrite of one day under
    the new day spec reads their partition column and keeps their other days' rows."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["month(day)"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))  # one January segment
    t.update_partitioning(["day"])
    t.append(rows(DAY_C, 5))  # a segment of the new grain
    result = t.overwrite(rows(DAY_B, 30, v="new"), consistent_push=True, partition_overwrite="dynamic")
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-06", 30, "new"), ("2024-01-07", 5, "old")]
    params = last_push_parameters(t)
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (0, 1, 1)
    assert params["partitions"] == ["day=2024-01-06"]
    t.rollback(entry=result.entry)
    assert content(t) == [
        ("2024-01-05", 1, "old"),
        ("2024-01-05", 2, "old"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 5, "old"),
    ]
