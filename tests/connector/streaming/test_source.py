"""The streaming source without Spark: offsets, admission limits, availableNow, commits
that must stop or be skipped, the change feed as a stream, restarts and pins."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.streaming import Position, SourceOptions, StreamSource, read_unit
from mvtable.connector.streaming.source import parse_offset
from mvtable.errors import (
    ChangeCommitInStreamError,
    InvalidStreamOffsetError,
    StreamTableReplacedError,
    VersionNotFoundError,
)
from mvtable.visibility import pins

from ..conftest import orders
from .test_changes import collected_table, compact


def drain(src: StreamSource, start: Position, *, limited: bool = True) -> tuple[list[list[int]], Position]:
    """Run micro-batches until the source has nothing new; ids of each batch."""
    batches = []
    while True:
        end = src.latest_position(start, limited=limited)
        if end == start:
            return batches, start
        units = src.units_between(start, end)
        batches.append(
            [i for u in units for t in read_unit(src.io, u, columns=["id"], with_meta=False) for i in t.column("id").to_pylist()]
        )
        src.committed(end)
        start = end


def source(t: Table, **options) -> StreamSource:
    return StreamSource(t.io, SourceOptions(**options))


def test_initial_snapshot_then_appends_in_version_order(small_table):
    t = small_table
    t.delete(pc.field("id") < 100)  # the initial snapshot is read with its deletes applied
    src = source(t)
    start = src.initial_position()
    assert start == Position(3, phase=0) and start.initial
    batches, pos = drain(src, start)
    assert sorted(batches[0]) == list(range(100, 2000))
    t.append(orders(5000, 7))
    t.append(orders(6000, 3))
    batches, pos = drain(src, pos)
    assert batches == [list(range(5000, 5007)) + list(range(6000, 6003))]
    assert pos == Position(t.version + 1)


def test_starting_version_latest_and_timestamp(small_table):
    t = small_table
    t.append(orders(3000, 4))  # 3
    assert source(t, starting_version=2).initial_position() == Position(2)
    assert drain(source(t, starting_version=3), Position(3))[0] == [list(range(3000, 3004))]
    assert source(t, starting_latest=True).initial_position() == Position(4)
    ts3 = int(t.history()[3].timestamp.timestamp() * 1000)
    assert source(t, starting_timestamp_ms=ts3).initial_position() == Position(3)
    assert source(t, starting_timestamp_ms=ts3 + 10**9).initial_position() == Position(4)
    with pytest.raises(VersionNotFoundError, match="startingVersion 9"):
        source(t, starting_version=9).initial_position()


def test_max_rows_admits_whole_segments_and_at_least_one(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    for i in range(5):
        t.append(orders(i * 100, 30 + i))  # versions 1..5, one segment each
    src = source(t, starting_version=1, max_rows=65)
    batches, _ = drain(src, src.initial_position())
    assert [len(b) for b in batches] == [30 + 31, 32 + 33, 34]  # whole segments, never over 65
    src = source(t, starting_version=1, max_rows=5)  # smaller than any segment: still progresses
    assert [len(b) for b in drain(src, src.initial_position())[0]] == [30, 31, 32, 33, 34]
    src = source(t, starting_version=1, max_rows=5)
    assert [len(b) for b in drain(src, src.initial_position(), limited=False)[0]] == [160]  # ReadAllAvailable
    sizes = [s.file.size_bytes for s in t.snapshot().visible_segments()]
    src = source(t, starting_version=1, max_bytes=sizes[0] + sizes[1])
    assert [len(b) for b in drain(src, src.initial_position())[0]][0] == 61


def test_available_now_stops_at_the_version_newest_when_it_started(small_table):
    t = small_table
    src = source(t, starting_version=1)
    src.prepare_available_now()
    t.append(orders(4000, 5))  # after the target: not part of this run
    batches, pos = drain(src, src.initial_position())
    assert sorted(i for b in batches for i in b) == list(range(2000))
    assert pos == Position(3)


def test_a_change_commit_stops_the_stream_after_the_rows_before_it(small_table):
    t = small_table
    src = source(t, starting_version=1)
    t.delete(pc.field("id") == 5)  # version 3
    t.append(orders(4000, 2))  # version 4
    start = src.initial_position()
    end = src.latest_position(start, limited=True)
    assert end == Position(3)  # versions 1 and 2 are emitted first
    src.committed(end)
    with pytest.raises(ChangeCommitInStreamError) as err:
        src.latest_position(end, limited=True)
    assert err.value.version == 3 and err.value.option == "skipChangeCommits"
    assert "version 3" in str(err.value) and "skipChangeCommits" in str(err.value) and "DELETE" in str(err.value)


def test_skip_change_commits_ignores_them_and_compaction_is_skipped_silently(small_table):
    t = small_table
    t.delete(pc.field("id") == 5)  # 3
    t.overwrite(orders(8000, 3), consistent_push=True)  # 4, 5
    t.append(orders(4100, 1))  # 6
    t.append(orders(4200, 1))  # 7
    compact(t)  # 8: merges 6 and 7 (never with the push's segment)
    t.append(orders(4000, 2))  # 9
    batches, _ = drain(source(t, starting_version=3, skip_change_commits=True), Position(3))
    assert batches == [[4100, 4200, 4000, 4001]]
    t2 = Table.create(t.uri + "-2", schema=orders(0, 1).schema)
    t2.append(orders(0, 3))
    t2.append(orders(3, 2))
    compact(t2)
    t2.append(orders(5, 2))
    assert sorted(i for b in drain(source(t2, starting_version=1), Position(1))[0] for i in b) == list(range(7))


def test_read_change_feed_streams_deletes(small_table):
    t = small_table
    t.delete(pc.field("id") < 3)  # 3
    t.append(orders(4000, 1))  # 4
    src = source(t, starting_version=3, change_feed=True)
    units = src.units_between(Position(3), src.latest_position(Position(3), limited=False))
    out = pa.concat_tables(x for u in units for x in read_unit(t.io, u, columns=["id"], with_meta=True))
    assert list(zip(out["id"].to_pylist(), out["_change_type"].to_pylist(), out["_commit_version"].to_pylist())) == [
        (0, "delete", 3),
        (1, "delete", 3),
        (2, "delete", 3),
        (4000, "insert", 4),
    ]


def test_a_restarted_source_replays_the_same_batch(small_table):
    t = small_table
    t.append(orders(4000, 10))
    first = source(t, max_rows=1500)
    start = first.initial_position()
    end = first.latest_position(start, limited=True)
    before = [(u.version, u.changes[0].segment.id) for u in first.units_between(start, end)]
    offsets = (start.to_offset(first.table_id), end.to_offset(first.table_id))
    again = source(t, max_rows=1500)  # a new process after a crash: same offsets, same units
    s2, e2 = (parse_offset(o, table_id=again.table_id) for o in offsets)
    assert [(u.version, u.changes[0].segment.id) for u in again.units_between(s2, e2)] == before


def test_offsets_are_checked(small_table, table_uri):
    src = source(small_table)
    offset = Position(2).to_offset(src.table_id)
    assert offset == {"tableId": src.table_id, "version": 2, "index": 0, "initial": False}
    assert parse_offset(offset, table_id=src.table_id) == Position(2)
    with pytest.raises(InvalidStreamOffsetError):
        parse_offset({"version": "2"}, table_id=src.table_id)
    with pytest.raises(InvalidStreamOffsetError):
        parse_offset({**offset, "index": -1}, table_id=src.table_id)
    with pytest.raises(StreamTableReplacedError, match="new checkpointLocation"):
        parse_offset({**offset, "tableId": "another"}, table_id=src.table_id)


def test_the_source_pins_what_it_reads_next_and_gc_keeps_it(table_uri):
    props = {"versionRetentionPeriod": "0s", "checkpointInterval": "3"}
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=props)
    t.append(orders(0, 5))  # 1
    src = source(t, starting_version=1)
    start = src.initial_position()
    src.latest_position(start, limited=True)
    assert [p.version for p in pins.live_pins(t.io)] == [0]
    end = src.latest_position(start, limited=True)
    src.committed(end)
    assert [p.version for p in pins.live_pins(t.io)] == [1]  # the old pin is released
    for i in range(6):
        t.append(orders(100 + i, 1))  # 2..7, checkpoints at 3 and 6
    t.delete(pc.field("id") == 0)  # 8
    t.overwrite(orders(900, 2))  # 9: every earlier segment removed
    t.vacuum(retention="0s", force=True)
    t.collect_garbage()
    batches, _ = drain(source(t, starting_version=1, change_feed=True), end)  # a restarted query from its offset
    # 2..7 inserted, 8 deletes id 0, 9 deletes everything left and inserts 900, 901
    assert sorted(i for b in batches for i in b) == sorted([*range(100, 106), 0, *range(1, 5), *range(100, 106), 900, 901])


def test_close_releases_the_pin_and_twice_or_without_a_pin_does_nothing(small_table):
    t = small_table
    source(t).close()  # never pinned: nothing to release
    src = source(t, starting_version=1)
    start = src.initial_position()
    src.latest_position(start, limited=True)
    assert [p.version for p in pins.live_pins(t.io)] == [0]
    src.close()
    assert pins.live_pins(t.io) == []
    src.close()
    assert pins.live_pins(t.io) == []
    src.latest_position(start, limited=True)  # a source used again pins again
    assert [p.version for p in pins.live_pins(t.io)] == [0]
    src.close()
    assert pins.live_pins(t.io) == []


def test_close_logs_a_pin_it_cannot_release_instead_of_failing(small_table, monkeypatch, caplog):
    from mvtable.connector.streaming import source as source_module

    src = source(small_table, starting_version=1)
    src.latest_position(src.initial_position(), limited=True)

    def unreachable(io, pin):
        raise OSError("storage unreachable")

    monkeypatch.setattr(source_module, "release", unreachable)
    src.close()  # the query is over either way: the pin expires by itself
    assert "could not be released" in caplog.text and "pinTtl" in caplog.text
    src.close()  # forgotten: not tried again
    assert caplog.text.count("could not be released") == 1


def test_a_starting_timestamp_before_the_collected_log_starts_at_the_oldest_readable_version(table_uri):
    t = collected_table(table_uri)
    src = source(t, starting_timestamp_ms=0)
    start = src.initial_position()
    assert start == Position(4)  # not 0: versions 0..3 can no longer be diffed
    batches, end = drain(src, start)
    assert sorted(i for b in batches for i in b) == list(range(30, 70)) and end == Position(8)
    src.close()
    stamps = [int(h.timestamp.timestamp() * 1000) for h in t.history()]
    first_at_ts5 = min(v for v, ts in enumerate(stamps) if ts >= stamps[5])  # 5, unless 4 shares its millisecond
    assert source(t, starting_timestamp_ms=stamps[5]).initial_position() == Position(first_at_ts5)  # inside: as before
    for start_version in (0, 3):  # an explicit start is not moved: refused, naming the way out
        with pytest.raises(VersionNotFoundError, match=f"startingVersion {start_version} can no longer be read.*is 4"):
            source(t, starting_version=start_version).initial_position()
    assert source(t, starting_version=4).initial_position() == Position(4)
