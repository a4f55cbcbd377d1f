"""``timeline_of`` / ``Table.timeline``: each segment's state and versions on real tables, partition values as people read them, and the order along time."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.partitions.timeline import ALL_PARTITION, render_value, state_counts, timeline_of
from mvtable.errors import VersionNotFoundError
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from mvtable.lineage.snapshot import SegmentState, Snapshot

from ..conftest import orders


def by_id(t: Table, version: int | None = None) -> dict[str, object]:
    return {s.id: s for s in t.timeline(version).segments()}


@pytest.fixture
def table(table_uri) -> Table:
    return Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})


def test_appends_are_visible_with_the_versions_that_added_them(table):
    table.append(orders(0, 100))
    table.append(orders(100, 50))
    timeline = table.timeline()
    assert timeline.version == 2
    [part] = timeline.partitions
    assert (part.label, part.values, part.fields, part.spec_id) == (ALL_PARTITION, (), (), None)
    assert [(s.state, s.added_version, s.replaced_version, s.rows) for s in part.segments] == [
        ("visible", 1, None, 100),
        ("visible", 2, None, 50),
    ]
    assert (part.visible_segments, part.rows, part.overshadowed_segments, part.staged_segments, part.newest_version) == (
        2,
        150,
        0,
        0,
        2,
    )
    assert part.size_bytes == sum(s.size_bytes for s in part.segments) > 0
    assert timeline.visible_segment_ids() == set(table.snapshot().visible_segment_ids())


def test_a_consistent_push_overshadows_what_it_replaced(table):
    table.append(orders(0, 100))
    table.append(orders(100, 100))
    old = set(table.snapshot().visible_segment_ids())
    table.overwrite(orders(500, 30), consistent_push=True)
    [entry] = table.lineage()
    segments = by_id(table)
    for sid in old:
        assert segments[sid].state == "overshadowed"
        assert segments[sid].replaced_version == entry.state_version == table.version == 4  # v3 starts the push, v4 lands it
        assert segments[sid].replaced_by == entry.id
        assert segments[sid].removed_version is None
    [new] = entry.segments_to
    assert (segments[new].state, segments[new].added_version, segments[new].lineage_entry) == ("visible", 4, entry.id)
    [part] = table.timeline().partitions
    assert (part.visible_segments, part.rows, part.overshadowed_segments, part.newest_version) == (1, 30, 2, 4)


def test_a_staged_push_is_staged_until_published_and_time_travel_keeps_it_staged(table):
    table.append(orders(0, 100))
    [before] = table.snapshot().visible_segment_ids()
    table.overwrite(orders(500, 40), consistent_push=True, publish=False)
    [entry] = table.lineage()
    [staged] = entry.segments_to
    staged_version = table.version
    segments = by_id(table)
    assert (segments[staged].state, segments[staged].replaced_version, segments[staged].lineage_entry) == (
        "staged",
        None,
        entry.id,
    )
    assert segments[before].state == "visible"  # a staged push hides nothing yet
    assert table.timeline().partitions[0].staged_segments == 1

    table.publish(entry.id)
    segments = by_id(table)
    assert segments[staged].state == "visible"
    assert (segments[before].state, segments[before].replaced_version) == ("overshadowed", table.version)
    # the version before the publish still shows the push staged
    assert by_id(table, staged_version)[staged].state == "staged"
    assert by_id(table, staged_version)[before].state == "visible"


def test_a_rolled_back_push_is_reverted_and_what_it_replaced_is_visible_again(table):
    table.append(orders(0, 100))
    [before] = table.snapshot().visible_segment_ids()
    table.overwrite(orders(500, 40), consistent_push=True)
    [entry] = table.lineage()
    table.rollback(entry=entry.id)
    segments = by_id(table)
    [pushed] = entry.segments_to
    assert (segments[pushed].state, segments[pushed].replaced_version, segments[pushed].replaced_by) == (
        "reverted",
        table.version,
        entry.id,
    )
    assert (segments[before].state, segments[before].replaced_version) == ("visible", None)


def test_compaction_and_an_overwrite_remove_segments_at_their_version(table):
    for i in range(4):
        table.append(orders(i * 10, 10))
    inputs = set(table.snapshot().visible_segment_ids())
    result = table.compact(min_input_files=2)
    assert result.commits
    compacted = table.version
    segments = by_id(table)
    assert {sid for sid, s in segments.items() if s.state == "removed"} == inputs
    assert all(segments[sid].replaced_version == segments[sid].removed_version == compacted for sid in inputs)
    [output] = table.snapshot().visible_segment_ids()
    assert (segments[output].state, segments[output].added_version, segments[output].rows) == ("visible", compacted, 40)

    table.overwrite(orders(900, 5))
    segments = by_id(table)
    assert (segments[output].state, segments[output].replaced_version) == ("removed", table.version)
    assert state_counts(segments.values()) == {"visible": 1, "overshadowed": 0, "staged": 0, "reverted": 0, "removed": 5}


def test_vacuum_forgets_what_retention_removed_and_older_versions_still_show_it(table_uri):
    zero = dict.fromkeys(("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod"), "0s")
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=zero)
    t.append(orders(0, 10))
    [old] = t.snapshot().visible_segment_ids()
    t.overwrite(orders(100, 10), consistent_push=True)
    pushed = t.version
    assert t.vacuum(retention="0s", force=True).segments_pruned == 1
    assert old not in by_id(t)
    assert [s.state for s in t.timeline().segments()] == ["visible"]
    seg = by_id(t, pushed)[old]
    assert (seg.state, seg.replaced_version, seg.removed_version) == ("overshadowed", pushed, None)


def test_deleted_rows_count_per_segment_and_partition(table):
    table.append(orders(0, 100))
    assert table.delete(pc.field("status") == "cancelled").deleted_rows == 10
    [part] = table.timeline().partitions
    [seg] = part.segments
    assert (seg.rows, seg.deleted_rows, part.rows, part.deleted_rows) == (100, 10, 100, 10)


def test_every_version_lists_each_segment_once_and_its_visible_ones(table):
    table.append(orders(0, 10))
    table.overwrite(orders(100, 10), consistent_push=True)
    table.append(orders(200, 10))
    table.overwrite(orders(300, 10), consistent_push=True, publish=False)
    table.delete(pc.field("id") == 200)
    for v in range(table.version + 1):
        snapshot = table.snapshot(v)
        timeline = timeline_of(snapshot)
        ids = [s.id for s in timeline.segments()]
        assert sorted(ids) == sorted(snapshot.segments), v
        assert timeline.visible_segment_ids() == set(snapshot.visible_segment_ids()), v
        assert all(s.added_version <= v for s in timeline.segments())
        assert all(s.replaced_version is None or s.added_version < s.replaced_version <= v for s in timeline.segments())


def test_an_unknown_version_is_a_typed_error(table):
    table.append(orders(0, 10))
    with pytest.raises(VersionNotFoundError):
        table.timeline(version=99)


# -- partition values -------------------------------------------------------------------
def test_values_render_as_people_read_them():
    assert render_value(19000, "day") == "2022-01-08"
    assert render_value(19000 * 24 + 5, "hour") == "2022-01-08T05"
    assert render_value((2022 - 1970) * 12, "month") == "2022-01"
    assert render_value((2022 - 1970) * 12 + 11, "month") == "2022-12"
    assert render_value(2022 - 1970, "year") == "2022"
    assert render_value(-1, "day") == "1969-12-31"
    assert render_value(7, "bucket[16]") == "7"
    assert render_value("abcd", "truncate[4]") == "abcd"
    assert render_value("eu", "identity") == "eu"
    assert render_value(None, "day") == "null"
    assert render_value(True, "identity") == "True"
    ts = 1_641_600_000_000_000 + 5 * 3_600_000_000  # 2022-01-08T05:00:00 in microseconds
    assert render_value(ts, "identity", source_type="timestamp") == "2022-01-08T05:00:00"
    assert render_value(ts, "identity", source_type="long") == str(ts)
    assert render_value(10**12, "day") == str(10**12)  # beyond the calendar: as recorded
    assert render_value(10**6, "year") == str(10**6)


def snapshot_of(
    specs: dict[int, PartitionSpec], segments: list[tuple[int | None, tuple | None, int]], *, schema=None
) -> Snapshot:
    """A snapshot holding ``segments`` (spec id, partition tuple, added version) under ``specs``, built
    directly: a spec the log would refuse (one the snapshot does not know) can be shown too."""
    snap = Snapshot(version=max(v for *_, v in segments), table_schema=schema or {"type": "struct", "fields": []})
    for i, (spec_id, values, version) in enumerate(segments):
        desc = SegmentDescriptor(f"s{i}", f"data/s{i}.parquet", 10 + i, 1000, spec_id=spec_id, partition=values)
        snap.segments[desc.id] = SegmentState(file=desc, added_version=version)
    snap.partition_specs = {0: UNPARTITIONED, **specs}
    return snap


def Spec(spec_id: int, fields: tuple[PartitionField, ...]) -> PartitionSpec:
    return PartitionSpec(spec_id=spec_id, fields=fields)


def Field(source_id: int, field_id: int, name: str, transform: str) -> PartitionField:
    return PartitionField(source_id=source_id, field_id=field_id, name=name, transform=transform)


SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {"parquet.field.id": 1}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {"parquet.field.id": 2}},
        {"name": "id", "type": "long", "nullable": True, "metadata": {"parquet.field.id": 3}},
    ],
}
DAY = Field(1, 1000, "ts_day", "day")
REGION = Field(2, 1001, "region", "identity")


def test_partitions_are_ordered_along_time_with_nulls_last():
    snap = snapshot_of(
        {1: Spec(1, (DAY,))}, [(1, (19002,), 1), (1, (None,), 2), (1, (19000,), 3), (1, (19001,), 4), (1, (19000,), 5)]
    )
    timeline = timeline_of(snap)
    assert [p.label for p in timeline.partitions] == [
        "ts_day=2022-01-08",
        "ts_day=2022-01-09",
        "ts_day=2022-01-10",
        "ts_day=null",
    ]
    first = timeline.partitions[0]
    assert [s.id for s in first.segments] == ["s2", "s4"]
    assert (first.values, first.display_values, first.fields, first.spec_id) == ((19000,), ("2022-01-08",), ("ts_day",), 1)
    assert (first.visible_segments, first.rows, first.short_label) == (2, 12 + 14, "2022-01-08")
    assert timeline.partition("2022-01-10").segments[0].partition == (19002,)


def test_time_comes_first_whatever_the_field_order_and_grains_interleave():
    hour = Field(1, 1000, "ts_hour", "hour")
    specs = {1: Spec(1, (REGION, DAY)), 2: Spec(2, (hour,))}
    snap = snapshot_of(
        specs,
        [(1, ("us", 19001), 1), (1, ("eu", 19001), 2), (1, ("us", 19000), 3), (2, (19000 * 24 + 30,), 4), (None, None, 5)],
        schema=SCHEMA,
    )
    labels = [p.label for p in timeline_of(snap).partitions]
    assert labels == [
        ALL_PARTITION,  # segments written before the table had a spec
        "region=us, ts_day=2022-01-08",
        "region=eu, ts_day=2022-01-09",  # same day: by the other values
        "region=us, ts_day=2022-01-09",
        "ts_hour=2022-01-09T06",  # 06:00 starts after that day's partitions
    ]


def test_identity_of_a_timestamp_orders_by_time_and_unknown_specs_show_raw_values():
    ts = Field(1, 1000, "ts", "identity")
    snap = snapshot_of(
        {1: Spec(1, (ts,))},
        [(1, (2_000_000,), 1), (1, (1_000_000,), 2), (7, ("x", 3), 3)],
        schema=SCHEMA,
    )
    labels = [p.label for p in timeline_of(snap).partitions]
    assert labels == ["ts=1970-01-01T00:00:01", "ts=1970-01-01T00:00:02", "field1=x, field2=3"]


def test_month_year_and_bucket_specs():
    month, year, bucket = (
        Field(1, 1000, "ts_month", "month"),
        Field(1, 1000, "ts_year", "year"),
        Field(3, 1001, "id_bucket", "bucket[16]"),
    )
    snap = snapshot_of(
        {1: Spec(1, (month, bucket)), 2: Spec(2, (year,))},
        [(1, (625, 3), 1), (1, (624, 9), 2), (1, (624, 2), 3), (2, (51,), 4)],
        schema=SCHEMA,
    )
    assert [p.short_label for p in timeline_of(snap).partitions] == ["2021", "2022-01 / 2", "2022-01 / 9", "2022-02 / 3"]


def test_an_empty_partition_tuple_is_unpartitioned():
    snap = snapshot_of({}, [(0, (), 1), (None, None, 2)])
    [part] = timeline_of(snap).partitions
    assert (part.label, len(part.segments)) == (ALL_PARTITION, 2)


def test_a_table_without_segments_has_no_partitions(table):
    assert table.timeline().partitions == ()
    assert table.timeline().version == 0


def test_timeline_values_are_frozen(table):
    table.append(orders(0, 10))
    timeline = table.timeline()
    with pytest.raises(dataclasses.FrozenInstanceError):
        timeline.partitions[0].segments[0].state = "removed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        timeline.version = 3  # type: ignore[misc]


def test_a_schema_stored_before_field_ids_finds_source_columns_by_position():
    no_ids = {"type": "struct", "fields": [{k: v for k, v in f.items() if k != "metadata"} for f in SCHEMA["fields"]]}
    ts = Field(1, 1000, "ts", "identity")
    snap = snapshot_of({1: Spec(1, (ts,))}, [(1, (3_600_000_000,), 1)], schema=no_ids)
    assert [p.label for p in timeline_of(snap).partitions] == ["ts=1970-01-01T01:00:00"]


# -- real partitioned tables ---------------------------------------------------------------
def events(start: int, n: int, *, hours: int = 6) -> pa.Table:
    base = dt.datetime(2024, 1, 1)
    r = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(r, pa.int64()),
            "ts": pa.array([base + dt.timedelta(hours=hours * i) for i in r], pa.timestamp("us")),
            "region": [("eu", "us")[i % 2] for i in r],
        }
    )


def test_a_day_partitioned_table_with_pushes(table_uri):
    """Each day is a partition of its own; a push of the whole table overshadows every day's
    segments, an append lands in its day, and a staged push is staged in the days it writes."""
    t = Table.create(table_uri, schema=events(0, 1).schema, partition_by=["day(ts)", "region"])
    t.append(events(0, 12))  # 3 days x 2 regions
    before = set(t.snapshot().visible_segment_ids())
    t.overwrite(events(100, 8), consistent_push=True)  # days 25 and 26
    [push] = t.lineage()
    t.append(events(104, 2))  # day 26 again
    t.overwrite(events(200, 4), consistent_push=True, publish=False)  # day 50, staged
    timeline = t.timeline()
    assert [p.label for p in timeline.partitions] == [
        f"ts_day=2024-{m:02d}-{d:02d}, region={r}"
        for m, d in ((1, 1), (1, 2), (1, 3), (1, 26), (1, 27), (2, 20))
        for r in ("eu", "us")
    ]
    day1 = timeline.partition("ts_day=2024-01-01, region=eu")
    assert (day1.spec_id, day1.values, day1.display_values, day1.fields) == (
        1,
        (19723, "eu"),
        ("2024-01-01", "eu"),
        ("ts_day", "region"),
    )
    assert [(s.state, s.replaced_by) for s in day1.segments] == [("overshadowed", push.id)]
    assert {s.id for s in timeline.segments() if s.state == "overshadowed"} == before
    day27 = timeline.partition("2024-01-27 / us")
    assert [(s.state, s.added_version) for s in day27.segments] == [
        ("visible", push.state_version),
        ("visible", push.state_version + 1),
    ]
    assert (day27.visible_segments, day27.rows) == (2, 3)
    staged = timeline.partition("2024-02-20 / eu")
    assert [s.state for s in staged.segments] == ["staged"] and staged.staged_segments == 1 and staged.visible_segments == 0
    assert timeline.visible_segment_ids() == set(t.snapshot().visible_segment_ids())
