"""SQL procedures (Python UDTFs) through ``spark.sql``: rows, idempotency, typed errors,
and that the table really changed (read back with ``Table`` and ``format("mvtable")``)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, register

from .conftest import orders

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sql(spark):
    register(spark, filter_pushdown=False)
    return lambda text: spark.sql(text).collect()


@pytest.fixture
def pushed(table_uri):
    """v1/v2 appends (1000 + 500 rows), v3 delete (150 rows), v4/v5 consistent push A
    (300 rows, COMPLETED), v6/v7 staged push B (200 rows, IN_PROGRESS)."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.append(orders(0, 1000))
    t.append(orders(1000, 500))
    t.delete(pc.field("status") == "cancelled")
    t.overwrite(orders(5000, 300), consistent_push=True)
    t.overwrite(orders(6000, 200), consistent_push=True, publish=False)
    a, b = t.lineage()
    return t, a.id, b.id


def spark_ids(spark, uri: str) -> list[int]:
    return sorted(r.id for r in spark.read.format("mvtable").load(uri).select("id").collect())


def test_lineage_and_history(sql, spark, pushed):
    t, a, b = pushed
    rows = sql(f"SELECT * FROM mvtable_lineage('{t.uri}')")
    assert [r.id for r in rows] == [a, b]
    assert rows[0].__fields__ == [
        *("id", "segments_from", "segments_to", "state", "timestamp", "started_version", "state_version"),
        *("owner", "lease_expires", "status", "revert_reason"),  # push recovery: who holds an IN_PROGRESS push
    ]
    assert rows[1].owner and rows[1].status.startswith("staged")  # b: staged, waits for a person (no lease)
    for row, view in zip(rows, t.lineage()):
        assert (row.state, row.segments_from, row.segments_to) == (view.state, list(view.segments_from), list(view.segments_to))
        assert (row.started_version, row.state_version) == (view.started_version, view.state_version)
        assert isinstance(row.timestamp, dt.datetime)

    history = sql(f"SELECT * FROM mvtable_history(table => '{t.uri}', options => '{{}}')")
    assert history[0].__fields__ == ["version", "timestamp", "operation", "parameters", "metrics", "writer"]
    assert [(h.version, h.operation) for h in history] == [(h.version, h.operation) for h in t.history()]
    delete = history[3]
    assert delete.operation == "DELETE" and json.loads(delete.metrics)["deleted_rows"] == 150
    assert json.loads(history[5].parameters)["entry"] == a


def test_publish_then_rollback_entry_twice(sql, spark, pushed):
    t, a, b = pushed
    [first] = sql(f"SELECT * FROM mvtable_publish(table => '{t.uri}', entry => '{b}')")
    assert (first.operation, first.changed, first.version) == ("PUBLISH", True, t.version)
    [again] = sql(f"SELECT * FROM mvtable_publish(table => '{t.uri}', entry => '{b}')")
    assert (again.changed, again.version) == (False, first.version) and "already COMPLETED" in again.message
    assert spark_ids(spark, t.uri) == list(range(6000, 6200))

    # the same query collected twice runs the UDTF twice: the second run changes nothing
    df = spark.sql(f"SELECT * FROM mvtable_rollback(table => '{t.uri}', entry => '{b}')")
    [rolled] = df.collect()
    [repeat] = df.collect()
    assert (rolled.operation, rolled.changed, rolled.version) == ("ROLLBACK", True, first.version + 1)
    assert (repeat.operation, repeat.changed, repeat.version) == ("ROLLBACK", False, rolled.version)
    assert "already REVERTED" in repeat.message
    assert t.version == rolled.version and t.lineage()[1].state == "REVERTED"
    assert spark_ids(spark, t.uri) == list(range(5000, 5300))  # push A's snapshot is back


def test_rollback_to_version_and_restore(sql, spark, pushed):
    t, _, b = pushed
    sql(f"SELECT * FROM mvtable_rollback(table => '{t.uri}', entry => '{b}')")
    [first] = sql(f"SELECT * FROM mvtable_rollback(table => '{t.uri}', version => 3)")
    assert (first.operation, first.changed, first.version) == ("RESTORE", True, t.version)
    expected = [i for i in range(1500) if i % 10]
    assert spark_ids(spark, t.uri) == expected
    [again] = sql(f"SELECT * FROM mvtable_restore(table => '{t.uri}', version => 3)")
    assert (again.changed, again.version) == (False, first.version)
    assert t.version == first.version
    assert sorted(t.to_arrow(columns=["id"]).column("id").to_pylist()) == expected

    [back] = sql(f"SELECT * FROM mvtable_restore('{t.uri}', 5)")  # positional arguments work too
    assert back.changed and spark_ids(spark, t.uri) == list(range(5000, 5300))


def error_of(sql, query: str) -> str:
    with pytest.raises(Exception) as info:
        sql(query)
    return str(info.value)


def test_errors_surface_with_the_typed_message(sql, pushed, tmp_path):
    t, a, b = pushed
    version = t.version
    msg = error_of(sql, f"SELECT * FROM mvtable_rollback(table => '{t.uri}', entry => 'no-such-entry')")
    assert "InvalidLineageTransitionError: [MVTABLE_INVALID_LINEAGE_TRANSITION] no lineage entry 'no-such-entry'" in msg
    msg = error_of(sql, f"SELECT * FROM mvtable_rollback(table => '{t.uri}', entry => '{a}')")
    assert "InvalidLineageTransitionError" in msg and a in msg  # B (staged) holds A's output
    msg = error_of(sql, f"SELECT * FROM mvtable_rollback(table => '{t.uri}')")
    assert "InvalidOptionError: [MVTABLE_INVALID_OPTION] mvtable_rollback takes exactly one of entry" in msg
    msg = error_of(sql, f"SELECT * FROM mvtable_restore(table => '{t.uri}', version => 999)")
    assert "VersionNotFoundError" in msg
    msg = error_of(sql, f"SELECT * FROM mvtable_history(table => '{tmp_path / 'nope'}')")
    assert "TableNotFoundError: [MVTABLE_TABLE_NOT_FOUND] no mvtable table at" in msg
    msg = error_of(sql, f"SELECT * FROM mvtable_lineage(table => '{t.uri}', options => 'not json')")
    assert "InvalidOptionError: [MVTABLE_INVALID_OPTION] mvtable_lineage: options is not valid JSON" in msg
    msg = error_of(sql, f"SELECT * FROM mvtable_vacuum(table => '{t.uri}', retention => '0s')")
    assert "RetentionTooShortError" in msg
    assert t.version == version  # nothing was committed


def test_vacuum_dry_run_then_vacuum_twice(sql, spark, table_uri):
    t = Table.create(
        table_uri,
        schema=orders(0, 1).schema,
        properties={
            "replacedSegmentsRetentionPeriod": "0s",
            "lineageEntryCleanupRetentionPeriod": "0s",
            "checkpointInterval": "2",
        },
    )
    t.append(orders(0, 1000))
    t.overwrite(orders(5000, 300), consistent_push=True)
    t.overwrite(orders(6000, 200), consistent_push=True)
    version = t.version

    [dry] = sql(f"SELECT * FROM mvtable_vacuum(table => '{table_uri}', dry_run => true, retention => '0s', force => true)")
    assert dry.dry_run is True and dry.changed is False
    assert dry.files == len(dry.paths) > 0 and dry.segments_expired == 2
    assert t.version == version and len(t.snapshot().segments) == 3

    query = f"SELECT * FROM mvtable_vacuum(table => '{table_uri}', retention => '0s', force => true)"
    [done] = sql(query)
    assert done.dry_run is False and done.changed is True and done.paths is None
    assert done.files > 0 and done.bytes > 0 and done.segments_expired == 2 and done.entries_purged == 2 and done.complete
    [dry] = sql(query.replace("force => true", "force => true, dry_run => true"))
    [repeat] = sql(query)  # only the log files the first run's own retention commit freed
    assert repeat.files == len(dry.paths or []) and all(p.startswith("_mvtable/log/") for p in dry.paths or [])
    assert repeat.segments_expired == 0 and repeat.entries_purged == 0
    [again] = sql(query)
    assert again.changed is False and again.files == 0 and again.message == "nothing to vacuum"
    assert t.lineage() == [] and spark_ids(spark, table_uri) == list(range(6000, 6200))


def test_gc_dry_run_then_gc_twice(sql, spark, table_uri):
    t = Table.create(
        table_uri,
        schema=orders(0, 1).schema,
        properties={"rowGroupRows": "100", "dvInlineMaxBytes": "0", "versionRetentionPeriod": "0s"},
    )
    t.append(orders(0, 1000))
    t.delete(pc.field("id") < 10)
    first_dv = next(iter(t.snapshot().dvs.values())).path
    t.delete(pc.field("id") < 20)

    [dry] = sql(f"SELECT * FROM mvtable_gc(table => '{table_uri}', dry_run => true)")
    assert dry.dry_run and not dry.changed and first_dv in dry.paths and dry.dv_files_deleted >= 1
    assert t.io.exists(first_dv)
    [done] = sql(f"SELECT * FROM mvtable_gc('{table_uri}')")
    assert done.changed and done.dv_files_deleted == dry.dv_files_deleted and done.paths is None
    assert not t.io.exists(first_dv)
    [repeat] = sql(f"SELECT * FROM mvtable_gc('{table_uri}')")
    assert not repeat.changed and repeat.files == 0 and repeat.message.startswith("nothing to collect; kept because: ")
    assert "no checkpoint at or below the safe version 3" in repeat.message  # why the log keeps its files
    assert spark_ids(spark, table_uri) == list(range(20, 1000))
