"""The streaming sink without Spark: a batch lands exactly once when it is replayed, when
its writer was killed right after its commit landed (apache/paimon#9666), and when two
processes commit it at the same time; complete mode is a revertible push."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pyarrow as pa
import pytest

from mvtable.connector import Table, writes
from mvtable.connector.streaming import commit_batch, plan_batch, query_app_id
from mvtable.errors import DuplicateKeyError, InvalidOptionError, NothingToCommit

from ..conftest import orders


def write_batch(uri: str, data: pa.Table, *, batch_id: int, app_id: str = "query-1", complete: bool = False):
    """What Spark does per micro-batch: plan (no side effects), executors write, driver commits."""
    plan = plan_batch(uri, storage_options=None, incoming=data.schema, complete=complete, properties={"rowGroupRows": "50"})
    segments = writes.write_data(plan, data.to_batches(max_chunksize=40))
    return commit_batch(plan, segments, app_id=app_id, batch_id=batch_id)


def data_files(uri: str) -> set[str]:
    return set(os.listdir(os.path.join(uri, "data")))


def test_a_replayed_batch_is_skipped_and_its_files_removed(table_uri):
    first = write_batch(table_uri, orders(0, 100), batch_id=0)
    assert not first.skipped and first.version == 0 and first.rows == 100
    files = data_files(table_uri)
    replay = write_batch(table_uri, orders(0, 100), batch_id=0)
    assert replay.skipped and replay.version is None
    assert data_files(table_uri) == files
    write_batch(table_uri, orders(100, 10), batch_id=1)
    t = Table.open(table_uri)
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(110))
    assert t.snapshot().transactions == {"query-1": 1}
    assert [(h.operation, h.parameters.get("batchId")) for h in t.history()] == [("STREAM_APPEND", 0), ("STREAM_APPEND", 1)]
    assert t.snapshot().properties == {"rowGroupRows": "50"}  # set by the first batch, ignored later


def test_a_skipped_batch_is_a_warning_naming_the_version_that_recorded_it(table_uri, caplog):
    for batch_id in range(3):  # the first stream: versions 0, 1, 2
        write_batch(table_uri, orders(batch_id * 10, 10), batch_id=batch_id, app_id="reused")
    write_batch(table_uri, orders(500, 1), batch_id=0, app_id="other")  # version 3
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mvtable.connector"):
        # a new stream (new checkpoint) reusing the app id starts again at batch 0
        assert write_batch(table_uri, orders(900, 10), batch_id=1, app_id="reused").skipped
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    assert "batch 1 of application reused" in message and "version 1" in message and "txnAppId" in message
    assert 900 not in Table.open(table_uri).to_arrow().column("id").to_pylist()  # dropped, as warned


def test_two_applications_are_independent(table_uri):
    write_batch(table_uri, orders(0, 5), batch_id=3, app_id="a")
    assert not write_batch(table_uri, orders(5, 5), batch_id=0, app_id="b").skipped
    assert write_batch(table_uri, orders(10, 5), batch_id=2, app_id="a").skipped
    assert Table.open(table_uri).snapshot().transactions == {"a": 3, "b": 0}


def test_complete_mode_replaces_the_table_and_can_be_rolled_back(table_uri):
    write_batch(table_uri, orders(0, 10), batch_id=0, complete=True)
    write_batch(table_uri, orders(100, 3), batch_id=1, complete=True)
    t = Table.open(table_uri)
    assert sorted(t.to_arrow().column("id").to_pylist()) == [100, 101, 102]
    assert write_batch(table_uri, orders(7, 1), batch_id=1, complete=True).skipped
    bad = t.lineage()[-1]
    assert bad.state == "COMPLETED" and t.history()[-1].operation == "STREAM_COMPLETE"
    t.rollback(entry=bad.id)
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(10))


def _race(uri: str, start: int) -> bool:
    return write_batch(uri, orders(start, 20), batch_id=7).skipped


def test_two_processes_committing_one_batch_land_it_once(table_uri):
    write_batch(table_uri, orders(0, 1), batch_id=6)
    with ProcessPoolExecutor(3, mp_context=get_context("spawn")) as pool:
        skipped = list(pool.map(_race, [table_uri] * 3, [1000, 2000, 3000]))
    assert sorted(skipped) == [False, True, True]
    ids = Table.open(table_uri).to_arrow().column("id").to_pylist()
    assert len(ids) == 21 and len({i // 1000 for i in ids if i}) == 1


def test_a_writer_killed_after_its_commit_landed_does_not_commit_the_batch_again(table_uri):
    """Paimon #9666: the commit lands, the process dies before the engine records the batch
    as done, the engine replays the batch with the same id after the restart."""
    write_batch(table_uri, orders(0, 10), batch_id=0)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))!r})
        from tests.connector.streaming.test_sink import write_batch
        from tests.connector.conftest import orders
        write_batch({table_uri!r}, orders(10, 10), batch_id=1)
        """
    )
    env = {**os.environ, "MVTABLE_FAULT": "commit.STREAM_APPEND.after_put"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert Table.open(table_uri).snapshot().transactions == {"query-1": 1}  # it had landed
    assert write_batch(table_uri, orders(10, 10), batch_id=1).skipped
    assert sorted(Table.open(table_uri).to_arrow().column("id").to_pylist()) == list(range(20))


def test_the_application_id_is_the_query_id_in_the_checkpoint(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "metadata").write_text(json.dumps({"id": "5f1c-aa"}) + "\n")
    assert query_app_id(str(tmp_path / "ckpt")) == "5f1c-aa"
    assert query_app_id("file://" + str(tmp_path / "ckpt")) == "5f1c-aa"
    with pytest.raises(InvalidOptionError, match="no 'metadata' file"):
        query_app_id(str(tmp_path / "missing"))
    (tmp_path / "ckpt" / "metadata").write_text("[1]")
    with pytest.raises(InvalidOptionError, match="holds no query id"):
        query_app_id(str(tmp_path / "ckpt"))


@pytest.fixture
def keyed_uri(tmp_path) -> str:
    uri = str(tmp_path / "keyed")
    Table.create(uri, schema=orders(0, 1).schema, primary_key=["id"]).append(orders(0, 10))
    return uri


def test_a_batch_into_a_keyed_table_is_checked_as_a_keyed_append(keyed_uri):
    with pytest.raises(DuplicateKeyError, match="already in the table") as exc:
        write_batch(keyed_uri, orders(5, 10), batch_id=0)  # keys 5..9 are in the table
    assert (5,) in exc.value.keys
    with pytest.raises(DuplicateKeyError):
        write_batch(keyed_uri, pa.concat_tables([orders(100, 3), orders(100, 3)]), batch_id=0)  # repeated in the batch
    t = Table.open(keyed_uri)
    assert t.snapshot().transactions == {} and sorted(t.to_arrow().column("id").to_pylist()) == list(range(10))
    assert not write_batch(keyed_uri, orders(10, 5), batch_id=0).skipped
    with pytest.raises(DuplicateKeyError):  # the batch's keys now count for every later write
        Table.open(keyed_uri).append(orders(12, 1))


def test_a_replayed_keyed_batch_is_skipped_not_refused_for_its_own_keys(keyed_uri):
    assert not write_batch(keyed_uri, orders(10, 5), batch_id=0).skipped
    assert write_batch(keyed_uri, orders(10, 5), batch_id=0).skipped
    assert sorted(Table.open(keyed_uri).to_arrow().column("id").to_pylist()) == list(range(15))


def test_a_complete_batch_into_a_keyed_table_needs_unique_keys_only(keyed_uri):
    with pytest.raises(DuplicateKeyError):
        write_batch(keyed_uri, pa.concat_tables([orders(200, 3), orders(200, 3)]), batch_id=0, complete=True)
    assert not write_batch(keyed_uri, orders(5, 10), batch_id=0, complete=True).skipped  # replaces keys 0..9
    assert sorted(Table.open(keyed_uri).to_arrow().column("id").to_pylist()) == list(range(5, 15))


def _race_keyed(uri: str) -> bool:
    return write_batch(uri, orders(1000, 20), batch_id=7).skipped  # attempts of one batch carry the same keys


def test_attempts_of_one_keyed_batch_racing_land_it_once_and_skip_the_rest(keyed_uri):
    with ProcessPoolExecutor(3, mp_context=get_context("spawn")) as pool:
        skipped = list(pool.map(_race_keyed, [keyed_uri] * 3))
    assert sorted(skipped) == [False, True, True]
    assert sorted(Table.open(keyed_uri).to_arrow().column("id").to_pylist()) == [*range(10), *range(1000, 1020)]


def test_a_keyed_batch_whose_other_attempt_lands_during_its_commit_is_a_replay(keyed_uri):
    """The window inside ``commit_batch``: the other attempt lands after this one caught up.
    Its keys then look like a racing duplicate; the batch id says it is this batch."""
    from mvtable.connector.streaming.sink import _commit_keyed
    from mvtable.lineage import operations as ops
    from mvtable.lineage.enums import Operation

    data = orders(1000, 20)
    plan = plan_batch(keyed_uri, storage_options=None, incoming=data.schema, complete=False)
    segments = writes.write_data(plan, data.to_batches())
    commit_log = plan.commit_log()
    stale = commit_log.snapshot()
    assert not write_batch(keyed_uri, data, batch_id=7).skipped  # the other attempt
    with pytest.raises(NothingToCommit):
        _commit_keyed(
            commit_log,
            plan,
            segments,
            app_id="query-1",
            batch_id=7,
            read=stale,
            current=stale,
            operation=Operation.STREAM_APPEND,
            build=lambda cur: ops.stream_batch(cur, segments, app_id="query-1", batch_id=7),
            parameters={},
            metrics={},
        )
