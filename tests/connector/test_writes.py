"""The three-step write protocol: the read snapshot a plan carries within one process, and
what happens when the plan crosses a process boundary (a Spark driver's Python worker)."""

from __future__ import annotations

import pickle

import pyarrow.compute as pc

from mvtable.connector import Table, writes

from .conftest import orders


def _plan(uri: str) -> writes.WritePlan:
    return writes.begin_write(uri, storage_options=None, incoming=orders(0, 1).schema, mode=writes.APPEND)


def test_plan_keeps_its_read_snapshot_but_never_pickles_it(small_table):
    plan = _plan(small_table.uri)
    assert plan.read_snapshot is not None and plan.read_snapshot.version == plan.read_version == 2
    shipped = pickle.loads(pickle.dumps(plan))
    assert shipped.read_snapshot is None
    assert shipped.read_version == plan.read_version and shipped.uri == plan.uri
    writes.abort_write(plan, [])


def test_finish_from_a_pickled_plan_reads_the_log(small_table):
    plan = pickle.loads(pickle.dumps(_plan(small_table.uri)))
    segments = writes.write_data(plan, orders(5000, 10).to_batches())
    result = writes.finish_write(plan, segments)
    assert result.commit.version == 3 and result.commit.read_version == 2
    assert Table.open(small_table.uri).scan().to_arrow().num_rows == 2010


def test_commits_between_begin_and_finish_are_caught_up_not_lost(small_table):
    plan = _plan(small_table.uri)  # keeps the snapshot at version 2
    small_table.append(orders(3000, 5))  # version 3 lands meanwhile
    small_table.delete(pc.field("id") < 10)  # version 4 too
    segments = writes.write_data(plan, orders(4000, 7).to_batches())
    result = writes.finish_write(plan, segments)
    assert result.commit.version == 5 and result.commit.read_version == 2
    ids = sorted(Table.open(small_table.uri).scan().to_arrow().column("id").to_pylist())
    assert ids == list(range(10, 2000)) + list(range(3000, 3005)) + list(range(4000, 4007))
    assert result.snapshot.version == 5 and len(result.snapshot.dvs) >= 1
