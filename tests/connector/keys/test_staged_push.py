"""A staged consistent push of a keyed table (``publish=False``) is published only if no key
it holds was committed to the table while it waited: publishing keeps the segments appended
meanwhile, so the publish checks the push's keys against every commit since it was staged."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from mvtable.connector import Table, writes
from mvtable.connector.key_hashing import hash_keys
from mvtable.connector.keys.commit import write_keyed
from mvtable.connector.keys.publish import commit_publish
from mvtable.connector.segments import write_segments
from mvtable.errors import DuplicateKeyError, VersionNotFoundError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import InsertedKeys
from mvtable.lineage.key_filters import KeyBloom
from tests.connector.keys.test_key_races import SCHEMA, rows


@pytest.fixture
def keyed(table_uri) -> Table:
    t = Table.create(table_uri, schema=SCHEMA, primary_key=["id"], properties={"rowGroupRows": "100"})
    t.append(rows(range(100), "seed"))
    return t


def stage(t: Table, data: pa.Table) -> str:
    """Stage a consistent push of ``data``; its lineage entry id."""
    result = t.overwrite(data, consistent_push=True, publish=False)
    assert result.entry is not None
    return result.entry


def state(t: Table) -> tuple[int, list[tuple[int, str]]]:
    return t.version, sorted((r["id"], r["who"]) for r in Table.open(t.uri).to_arrow().to_pylist())


def assert_unique_keys(t: Table) -> list[int]:
    ids = Table.open(t.uri).to_arrow().column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a key is held twice"
    return ids


def test_publish_refuses_a_key_appended_while_the_push_waited(keyed: Table) -> None:
    entry = stage(keyed, rows([*range(50), 200, 201], "push"))
    keyed.append(rows([200, 300], "late"))  # 200 is free in what readers see: the push is hidden
    before = state(keyed)
    with pytest.raises(DuplicateKeyError, match=f"staged push {entry}.*200") as exc:
        keyed.publish(entry)
    assert exc.value.keys == [(200,)]
    assert state(keyed) == before  # nothing committed
    [staged] = [e for e in keyed.lineage() if e.id == entry]
    assert staged.state == "IN_PROGRESS"
    # fixed by deleting the late row: the publish then lands, every key once
    keyed.delete(keys=[200])
    assert keyed.publish(entry).changed
    final = dict(sorted((r["id"], r["who"]) for r in Table.open(keyed.uri).to_arrow().to_pylist()))
    assert sorted(assert_unique_keys(keyed)) == [*range(50), 200, 201, 300]
    assert final[200] == "push" and final[300] == "late" and final[10] == "push"


def test_publish_refuses_a_key_an_upsert_wrote_while_the_push_waited(keyed: Table) -> None:
    entry = stage(keyed, rows(range(40), "push"))
    keyed.upsert(rows([10, 500], "upsert"))  # 10 replaces the seed row, which the push replaces too
    before = state(keyed)
    with pytest.raises(DuplicateKeyError) as exc:
        keyed.publish(entry)
    assert exc.value.keys == [(10,)]
    assert state(keyed) == before
    assert keyed.rollback(entry=entry).changed  # the other way out
    assert sorted(assert_unique_keys(keyed)) == [*range(100), 500]


def test_publish_refuses_a_key_another_process_appended(keyed: Table) -> None:
    entry = stage(keyed, rows(range(100, 120), "push"))
    script = (
        "import sys, pyarrow as pa\n"
        "from mvtable.connector import Table\n"
        "Table.open(sys.argv[1]).append(pa.table({'id': pa.array([115, 900], pa.int64()), 'who': ['other', 'other']}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script, keyed.uri], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    before = state(keyed)
    with pytest.raises(DuplicateKeyError) as exc:
        keyed.publish(entry)
    assert exc.value.keys == [(115,)]
    assert state(keyed) == before


def test_publish_with_other_keys_appended_meanwhile_keeps_both(keyed: Table) -> None:
    entry = stage(keyed, rows(range(60), "push"))
    keyed.append(rows(range(1000, 1010), "late"))
    keyed.delete(keys=[5])  # a delete of a replaced row changes nothing the publish keeps
    result = keyed.publish(entry)
    assert result.changed
    ids = assert_unique_keys(keyed)
    assert sorted(ids) == [*range(60), *range(1000, 1010)]
    last = keyed.history()[-1]
    assert last.operation == "PUBLISH"


def test_a_rival_landing_during_the_publish_is_caught(keyed: Table) -> None:
    entry = stage(keyed, rows(range(100, 130), "push"))
    read = keyed.snapshot()  # the publish reads here …
    Table.open(keyed.uri).append(rows([107, 108, 4000], "rival"))  # … a rival lands before it commits
    with pytest.raises(DuplicateKeyError) as exc:
        commit_publish(
            keyed.io, keyed.commit_log, read, entry, build=lambda cur: ops.publish(cur, entry), parameters={"entry": entry}
        )
    assert sorted(exc.value.keys) == [(107,), (108,)]
    assert Table.open(keyed.uri).lineage()[-1].state == "IN_PROGRESS"


def test_replaced_rows_never_count_as_duplicates(keyed: Table) -> None:
    """A concurrent append whose key filter says "maybe" makes a keyed commit look at every
    segment that changed since it looked — the replaced seed segment, whose deletion vector
    changed, must not be among them (its rows leave with the push)."""
    keyed.append(rows(range(100, 2000), "seed"))
    push = rows(range(2000), "push")
    rival = rows(range(5000, 7000), "rival")
    # the rival's key filter (as its commit records it) must say "maybe" for one of the
    # push's keys, else no look is taken and this test proves nothing
    assert KeyBloom.build(hash_keys(rival, ("id",))).may_contain(hash_keys(push, ("id",))).any()
    # staged push, then delete + rival append, then publish
    entry = stage(keyed, push)
    keyed.delete(keys=[3])
    keyed.append(rival)
    assert keyed.publish(entry).changed
    assert sorted(assert_unique_keys(keyed)) == [*range(2000), *range(5000, 7000)]
    # the same race at the push commit itself (publish=True)
    plan = writes.begin_write(keyed.uri, storage_options=None, incoming=SCHEMA, mode=writes.OVERWRITE, consistent_push=True)
    pushed = rows(range(2000), "again")
    read = writes.read_snapshot(keyed.commit_log, plan)
    keys, segments = write_keyed(
        keyed.io,
        read,
        plan.arrow_schema,
        ("id",),
        pushed,
        replace=True,
        write=lambda: write_segments(keyed.io, pushed, row_group_rows=plan.row_group_rows, primary_key=("id",)),
    )
    rival = rows(range(9000, 11000), "rival2")
    assert KeyBloom.build(hash_keys(rival, ("id",))).may_contain(keys.hashes).any()
    keyed.delete(keys=[4])
    keyed.append(rival)
    writes.finish_write(plan, segments, keys=keys)
    assert sorted(assert_unique_keys(keyed)) == [*range(2000), *range(9000, 11000)]


def test_a_keyed_publish_records_the_keys_it_makes_visible(keyed: Table) -> None:
    entry = stage(keyed, rows(range(10), "push"))
    keyed.publish(entry)
    commit = keyed.commit_log.read_commit(keyed.version)
    assert commit.operation == "PUBLISH" and commit.parameters["primary_key"] == ["id"]
    [recorded] = [a for a in commit.actions if isinstance(a, InsertedKeys)]
    assert recorded.count == 10


def test_publish_checks_everything_when_the_log_since_staging_is_gone(table_uri) -> None:
    """A staged push may wait longer than the log is kept: with the commits since staging
    garbage-collected, publishing looks at every segment that stays visible."""
    props = {"checkpointInterval": "2", "versionRetentionPeriod": "0s", "rowGroupRows": "100"}
    t = Table.create(table_uri, schema=SCHEMA, primary_key=["id"], properties=props)
    t.append(rows(range(100), "seed"))
    entry = stage(t, rows([*range(50), 300], "push"))
    t.append(rows([300], "late"))
    t.append(rows([400], "late"))
    t.append(rows([500], "late"))
    t.collect_garbage()
    staged_at = max(t.snapshot().segments[s].added_version for s in t.snapshot().lineage[entry].segments_to)
    with pytest.raises(VersionNotFoundError):
        t.commit_log.snapshot(staged_at)
    before = state(t)
    with pytest.raises(DuplicateKeyError) as exc:
        t.publish(entry)
    assert exc.value.keys == [(300,)]
    assert state(t) == before
    t.delete(keys=[300])
    assert t.publish(entry).changed
    assert sorted(assert_unique_keys(t)) == [*range(50), 300, 400, 500]
