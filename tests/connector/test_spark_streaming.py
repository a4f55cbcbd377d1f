"""Structured Streaming on the local[2] session: the mvtable source feeding the mvtable sink
exactly once (also when Spark replays a batch whose commit it did not record, as after a
driver crash: apache/paimon#9666), complete mode as a revertible push, commits that stop a
stream or are skipped, and the change feed in batch and streaming reads."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.visibility import pins

from .conftest import orders
from .streaming.test_changes import collected_table, compact

pytestmark = pytest.mark.spark


def stream(spark, src: str, **options):
    r = spark.readStream.format("mvtable")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(src)


def run_available_now(df, dst: str, checkpoint: str, *, mode: str = "append") -> list[int]:
    q = (
        df.writeStream.format("mvtable")
        .outputMode(mode)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(dst)
    )
    q.awaitTermination(180)
    if q.exception() is not None:
        raise q.exception()
    return [p["numInputRows"] for p in q.recentProgress]


def ids(path: str) -> list[int]:
    return sorted(Table.open(path).to_arrow().column("id").to_pylist())


def test_source_to_sink_exactly_once_across_restarts_and_a_replayed_batch(spark, tmp_path):
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    t = Table.create(src, schema=orders(0, 1).schema)
    for i in range(3):
        t.append(orders(i * 100, 40))
    rows = run_available_now(stream(spark, src, maxRowsPerTrigger=50), dst, ck)
    assert sum(rows) == 120 and len(rows) >= 3  # one segment per batch under the limit
    assert ids(dst) == ids(src)
    t.append(orders(1000, 5))
    compact(t)  # data-neutral: skipped silently
    t.append(orders(2000, 5))
    assert sum(run_available_now(stream(spark, src, maxRowsPerTrigger=50), dst, ck)) == 10
    assert ids(dst) == ids(src)
    out = Table.open(dst)
    history = [(h.operation, h.parameters.get("batchId")) for h in out.history()]
    assert {op for op, _ in history} == {"STREAM_APPEND"}
    app_id = out.history()[0].parameters["appId"]
    assert out.snapshot().transactions == {app_id: history[-1][1]}
    # The driver died after the sink's commit, before Spark recorded the batch: Spark's
    # checkpoint then lacks commits/<last>, and the restarted query replays that batch.
    last = history[-1][1]
    for name in (str(last), f".{last}.crc"):
        Path(ck, "commits", name).unlink(missing_ok=True)
    run_available_now(stream(spark, src, maxRowsPerTrigger=50), dst, ck)
    assert ids(dst) == ids(src), "the replayed batch landed twice"
    assert Table.open(dst).version == out.version


def test_complete_mode_replaces_the_table_as_a_push(spark, tmp_path):
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    t = Table.create(src, schema=orders(0, 1).schema)
    t.append(orders(0, 30))
    counts = stream(spark, src).groupBy("status").count()
    run_available_now(counts, dst, ck, mode="complete")
    t.append(orders(30, 20))
    run_available_now(counts, dst, ck, mode="complete")
    out = Table.open(dst)
    assert dict(zip(*out.to_arrow().to_pydict().values())) == {"ok": 45, "cancelled": 5}
    assert [h.operation for h in out.history()] == ["STREAM_COMPLETE", "STREAM_COMPLETE"]
    out.rollback(entry=out.lineage()[-1].id)  # a bad batch rolls back like any push
    assert dict(zip(*out.to_arrow().to_pydict().values())) == {"ok": 27, "cancelled": 3}


def test_a_delete_stops_the_stream_unless_skipped_and_the_change_feed_follows_it(spark, tmp_path):
    src, ck = str(tmp_path / "src"), tmp_path / "ck"
    t = Table.create(src, schema=orders(0, 1).schema)
    t.append(orders(0, 10))
    t.delete(pc.field("id") < 3)  # version 2
    t.append(orders(100, 2))
    with pytest.raises(Exception, match=r"version 2 of the source table \(DELETE\).*skipChangeCommits"):
        run_available_now(stream(spark, src, startingVersion=1), str(tmp_path / "a"), str(ck / "a"))
    assert ids(str(tmp_path / "a")) == list(range(10))  # the rows before the delete were emitted
    run_available_now(stream(spark, src, startingVersion=1, skipChangeCommits="true"), str(tmp_path / "b"), str(ck / "b"))
    assert ids(str(tmp_path / "b")) == [*range(10), 100, 101]
    run_available_now(stream(spark, src, startingVersion=1, readChangeFeed="true"), str(tmp_path / "c"), str(ck / "c"))
    feed = Table.open(str(tmp_path / "c")).to_arrow().sort_by([("_commit_version", "ascending"), ("id", "ascending")])
    assert list(zip(feed["id"].to_pylist(), feed["_change_type"].to_pylist(), feed["_commit_version"].to_pylist())) == [
        *((i, "insert", 1) for i in range(10)),
        *((i, "delete", 2) for i in range(3)),
        (100, "insert", 3),
        (101, "insert", 3),
    ]


def test_change_feed_batch_read_matches_the_python_api(spark, tmp_path):
    src = str(tmp_path / "src")
    t = Table.create(src, schema=orders(0, 1).schema)
    t.append(orders(0, 50))
    t.delete(pc.field("status") == "cancelled")
    t.overwrite(orders(500, 3), consistent_push=True)
    df = (
        spark.read.format("mvtable")
        .option("readChangeFeed", "true")
        .option("startingVersion", "2")
        .option("endingVersion", "4")
        .option("columns", "id")
        .load(src)
    )
    assert df.columns == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted((r.id, r._change_type, r._commit_version) for r in df.collect())
    want = t.changes(2, 4, columns=["id"])
    assert got == sorted(zip(want["id"].to_pylist(), want["_change_type"].to_pylist(), want["_commit_version"].to_pylist()))
    stamps = {r._commit_timestamp for r in df.collect()}
    assert len(stamps) == 2  # versions 2 and 4 (3 only starts the push)
    with pytest.raises(Exception, match="needs startingVersion or startingTimestamp"):
        spark.read.format("mvtable").option("readChangeFeed", "true").load(src).collect()
    with pytest.raises(Exception, match="maxRowsPerTrigger: for spark.readStream only"):
        spark.read.format("mvtable").option("maxRowsPerTrigger", "5").load(src).collect()


def test_a_sink_without_a_checkpoint_location_option_is_a_typed_error(spark, tmp_path):
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(pa.Table.from_batches(orders(0, 3).to_batches()))
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "ckroot"))
    try:
        q = stream(spark, src).writeStream.format("mvtable").trigger(availableNow=True).start(str(tmp_path / "dst"))
        with pytest.raises(Exception, match=r"InvalidOptionError.*needs .option\('checkpointLocation', …\).*txnAppId"):
            q.awaitTermination(120)
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
    assert not os.path.exists(tmp_path / "dst" / "_mvtable")


def test_a_change_feed_of_a_table_without_rows_is_empty(spark, tmp_path):
    """No units to read: PySpark reads one placeholder InputPartition(None) instead."""
    src = str(tmp_path / "src")
    spark.range(0).write.format("mvtable").mode("append").save(src)
    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", "0").load(src)
    assert feed.count() == 0
    assert feed.columns == ["id", "_change_type", "_commit_version", "_commit_timestamp"]


@pytest.mark.parametrize("option", [{"versionAsOf": "0"}, {"withRowAddress": "true"}, {"lineageEntry": "e"}])
@pytest.mark.parametrize("user_schema", [False, True])
def test_snapshot_options_on_a_stream_fail_with_our_error_alone(spark, tmp_path, option, user_schema):
    """Raised in streamReader(), PySpark's runner would chain an UnboundLocalError ('reader')."""
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(orders(0, 3))
    r = spark.readStream.format("mvtable").options(**option)
    df = (r.schema("id bigint") if user_schema else r).load(src)
    with pytest.raises(
        Exception,
        match=f"InvalidOptionError: \\[MVTABLE_INVALID_OPTION\\] {next(iter(option))} cannot be used with spark.readStream",
    ) as exc:
        run_available_now(df, str(tmp_path / "dst"), str(tmp_path / "ck"))
    assert "UnboundLocalError" not in str(exc.value)


@pytest.mark.parametrize("user_schema", [False, True])
def test_a_bad_starting_timestamp_names_its_option(spark, tmp_path, user_schema):
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(orders(0, 3))
    with pytest.raises(
        Exception, match="InvalidOptionError: \\[MVTABLE_INVALID_OPTION\\] startingTimestamp: cannot read 'nope'"
    ) as exc:
        r = spark.readStream.format("mvtable").option("startingTimestamp", "nope")
        df = (r.schema("id bigint") if user_schema else r).load(src)  # without a schema, load() fails
        run_available_now(df, str(tmp_path / "dst"), str(tmp_path / "ck"))
    assert "timestampAsOf" not in str(exc.value) and "UnboundLocalError" not in str(exc.value)


@pytest.mark.parametrize("requested", ["id string", "id bigint, _commit_version string"])
def test_a_change_feed_with_a_schema_of_other_types_is_refused(spark, tmp_path, requested):
    """A change feed binds to no one version, so the batch read's check of a user schema
    runs against the newest version's (change columns included): read as text, the ids
    would have come back as strings without a word."""
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(orders(0, 3))
    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", "0").schema(requested)
    column = requested.split(",")[-1].split()[0]
    with pytest.raises(
        Exception, match=rf"SchemaMismatchError: \[MVTABLE_SCHEMA_MISMATCH\] column '{column}' is bigint in the table"
    ):
        feed.load(src).collect()
    same = feed.schema("id bigint, _commit_version bigint").load(src)
    assert sorted(r.id for r in same.collect()) == [0, 1, 2]


def test_a_stream_with_a_schema_of_other_types_fails_with_our_error_alone(spark, tmp_path):
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(orders(0, 3))
    df = spark.readStream.format("mvtable").schema("id string").load(src)
    with pytest.raises(
        Exception, match="SchemaMismatchError: \\[MVTABLE_SCHEMA_MISMATCH\\] column 'id' is bigint in the table"
    ) as exc:
        run_available_now(df, str(tmp_path / "dst"), str(tmp_path / "ck"))
    assert "UnboundLocalError" not in str(exc.value)
    ok = spark.readStream.format("mvtable").schema("id bigint").load(src)
    assert run_available_now(ok, str(tmp_path / "dst2"), str(tmp_path / "ck2"))
    assert sorted(Table.open(str(tmp_path / "dst2")).to_arrow().column("id").to_pylist()) == [0, 1, 2]


def test_a_change_feed_schema_may_name_change_columns_in_any_order_and_case(spark, tmp_path):
    src = str(tmp_path / "src")
    Table.create(src, schema=orders(0, 1).schema).append(orders(0, 3))
    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", "0")
    got = feed.schema("_COMMIT_VERSION bigint, _change_type string, ID bigint").load(src).collect()
    assert sorted(tuple(r) for r in got) == [(1, "insert", 0), (1, "insert", 1), (1, "insert", 2)]


def stream_pins(t: Table) -> list[int]:
    """Versions pinned by stream sources (sinks and batch reads pin under other owners)."""
    return [p.version for p in pins.live_pins(t.io) if p.owner.startswith("stream")]


def eventually(check: Callable[[], bool], *, timeout_s: float = 30.0) -> bool:
    """Whether ``check`` holds within ``timeout_s``: the runner process releases the pin
    as it exits, just after the JVM has stopped the query."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_query_that_ends_or_is_stopped_releases_its_pin(spark, tmp_path):
    zero = ("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod", "versionRetentionPeriod")
    src = str(tmp_path / "src")
    t = Table.create(src, schema=orders(0, 1).schema, properties=dict.fromkeys(zero, "0s"))
    for i in range(3):
        t.append(orders(i * 10, 10))
    assert sum(run_available_now(stream(spark, src), str(tmp_path / "dst"), str(tmp_path / "ck"))) == 30
    assert eventually(lambda: stream_pins(t) == []), f"the finished query still pins {stream_pins(t)}"

    q = (
        stream(spark, src)
        .writeStream.format("mvtable")
        .option("checkpointLocation", str(tmp_path / "ck2"))
        .start(str(tmp_path / "dst2"))
    )
    try:
        assert eventually(lambda: q.lastProgress is not None and stream_pins(t) == [3])  # running: pinned
    finally:
        q.stop()
    assert q.exception() is None
    assert eventually(lambda: stream_pins(t) == []), f"the stopped query still pins {stream_pins(t)}"
    t.overwrite(orders(100, 5))
    assert t.vacuum(retention="0s", force=True).files  # nothing holds the replaced segments any more


def test_stopping_a_stream_reader_that_never_read_does_nothing(small_table):
    from mvtable.connector.spark.source import MvTableDataSource

    ds = MvTableDataSource({"path": small_table.uri})
    reader = ds.streamReader(ds.schema())
    reader.stop()
    reader.stop()
    assert pins.live_pins(small_table.io) == [] and reader._source is None  # stop built nothing
    before = signal.getsignal(signal.SIGTERM)
    reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
    assert stream_pins(small_table) == [2]
    assert signal.getsignal(signal.SIGTERM) is before  # SIGTERM is only taken over in PySpark's runner
    reader.stop()
    reader.stop()
    assert pins.live_pins(small_table.io) == []


def test_a_starting_timestamp_before_the_collected_log_reads_from_the_oldest_readable_version(spark, tmp_path):
    src = str(tmp_path / "src")
    collected_table(src)  # log: checkpoint 3, commits 4..7; history still lists 0..7
    old = "1970-01-01 00:00:00"
    feed = spark.read.format("mvtable").option("readChangeFeed", "true").option("startingTimestamp", old).load(src)
    got = feed.select("id", "_commit_version").collect()
    assert sorted(r.id for r in got) == list(range(30, 70)) and {r._commit_version for r in got} == {4, 5, 6, 7}
    assert sum(run_available_now(stream(spark, src, startingTimestamp=old), str(tmp_path / "dst"), str(tmp_path / "ck"))) == 40
    assert ids(str(tmp_path / "dst")) == list(range(30, 70))
    with pytest.raises(
        Exception, match="VersionNotFoundError: \\[MVTABLE_VERSION_NOT_FOUND\\] startingVersion 2 can no longer be read.*is 4"
    ):
        spark.read.format("mvtable").option("readChangeFeed", "true").option("startingVersion", "2").load(src).collect()
    with pytest.raises(
        Exception, match="VersionNotFoundError: \\[MVTABLE_VERSION_NOT_FOUND\\] startingVersion 0 can no longer be read.*is 4"
    ):
        run_available_now(stream(spark, src, startingVersion=0), str(tmp_path / "dst2"), str(tmp_path / "ck2"))


def test_a_change_feed_starting_after_its_range_names_starting_timestamp(spark, tmp_path):
    src = str(tmp_path / "src")
    t = Table.create(src, schema=orders(0, 1).schema)
    t.append(orders(0, 5))  # 1
    time.sleep(0.01)  # version 2's millisecond is its own
    t.append(orders(5, 5))  # 2
    newest = t.history()[-1].timestamp

    def feed(**options):
        r = spark.read.format("mvtable").option("readChangeFeed", "true")
        for k, v in options.items():
            r = r.option(k, v)
        return r.load(src).collect()

    with pytest.raises(
        Exception,
        match="InvalidOptionError: \\[MVTABLE_INVALID_OPTION\\] startingTimestamp '2999-01-01' is after the latest version",
    ) as exc:
        feed(startingTimestamp="2999-01-01")
    assert f"at or before {newest.isoformat()}" in str(exc.value) and "start_version" not in str(exc.value)
    at2 = str(int(newest.timestamp() * 1000))  # version 2's own commit time
    with pytest.raises(Exception, match="startingTimestamp '[0-9]+' starts at version 2 .* after endingVersion 1"):
        feed(startingTimestamp=at2, endingVersion="1")
    assert sorted(r.id for r in feed(startingTimestamp=at2)) == list(range(5, 10))
    with pytest.raises(Exception, match="startingVersion 2 is after endingVersion 1"):
        feed(startingVersion="2", endingVersion="1")


def test_a_change_feed_of_a_log_cut_to_its_newest_version_says_nothing_since_is_readable(table_uri):
    from mvtable.connector.options import read_options
    from mvtable.connector.spark.stream import feed_start
    from mvtable.errors import VersionNotFoundError

    zero = ("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod", "versionRetentionPeriod")
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"checkpointInterval": "1", **dict.fromkeys(zero, "0s")})
    t.append(orders(0, 5))
    t.append(orders(5, 5))  # 2
    t.collect_garbage()
    listing = t.commit_log.listing()
    assert (listing.commits, listing.checkpoints) == ([2], [2])  # what version 2 needs, no more
    opts = read_options({"path": table_uri, "readChangeFeed": "true", "startingTimestamp": "1970-01-01"})
    with pytest.raises(VersionNotFoundError, match="startingTimestamp '1970-01-01': the changes of every version since"):
        feed_start(t.commit_log, opts)
