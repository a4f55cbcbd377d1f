"""Keys under concurrency: a commit checks its keys against every commit since it looked.

The in-process tests stop a writer between its lookup and its commit and land a rival
commit there; the property test races real OS processes on one table and checks that no
key is ever held twice and that every key an append inserted was inserted by exactly one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvtable.connector import Table, writes
from mvtable.connector.keys.commit import KeyedDeletes, keyed_rows, lookup, write_keyed
from mvtable.connector.segments import write_segments
from mvtable.connector.upsert import commit_upsert
from mvtable.errors import DuplicateKeyError

SCHEMA = pa.schema([("id", pa.int64()), ("who", pa.string())])


def rows(ids, who: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "who": [who] * len(ids)}, schema=SCHEMA)


@pytest.fixture
def keyed(table_uri) -> Table:
    t = Table.create(table_uri, schema=SCHEMA, primary_key=["id"])
    t.append(rows(range(100), "seed"))
    return t


def planned_append(t: Table, data: pa.Table):
    """An append stopped after its lookup: (plan, keys, segments), not committed yet."""
    plan = writes.begin_write(t.uri, storage_options=None, incoming=data.schema, mode=writes.APPEND)
    keys, segments = write_keyed(
        t.io,
        writes.read_snapshot(t.commit_log, plan),
        plan.arrow_schema,
        plan.primary_key,
        data,
        replace=False,
        write=lambda: write_segments(t.io, data, row_group_rows=plan.row_group_rows, primary_key=plan.primary_key),
    )
    return plan, keys, segments


def test_an_append_that_lost_the_race_for_a_new_key_commits_nothing(keyed: Table) -> None:
    plan, keys, segments = planned_append(keyed, rows([500, 501], "a"))
    keyed.append(rows([501], "b"))  # lands between a's lookup and a's commit
    with pytest.raises(DuplicateKeyError, match="501") as exc:
        writes.finish_write(plan, segments, keys=keys)
    assert exc.value.keys == [(501,)]
    assert [r["who"] for r in keyed.to_arrow().to_pylist() if r["id"] >= 500] == ["b"]


def test_an_append_retries_past_rivals_with_other_keys(keyed: Table) -> None:
    plan, keys, segments = planned_append(keyed, rows([600], "a"))
    keyed.append(rows([601], "b"))
    keyed.upsert(rows([5], "c"))
    result = writes.finish_write(plan, segments, keys=keys)
    assert result.commit.read_version == plan.read_version and result.commit.version == plan.read_version + 3
    assert keyed.to_arrow().num_rows == 102


def test_rows_brought_back_without_a_key_filter_are_looked_at(keyed: Table) -> None:
    old = keyed.version
    keyed.delete(keys=[7])
    plan, keys, segments = planned_append(keyed, rows([7], "a"))  # 7 is free at this read
    keyed.restore(version=old)  # brings 7 back as a clone of the old segment: no key filter
    with pytest.raises(DuplicateKeyError):
        writes.finish_write(plan, segments, keys=keys)


def test_an_upsert_that_lost_the_race_deletes_the_winners_row(keyed: Table) -> None:
    read = keyed.snapshot()
    mine = rows([10, 700], "a")
    keys = keyed_rows(keyed.schema, ("id",), mine)
    deletes = KeyedDeletes()
    deletes.add(lookup(keyed.io, read, keys))
    segments = write_segments(keyed.io, mine, row_group_rows=1000, primary_key=("id",))
    keyed.upsert(rows([10, 700], "b"))  # the rival replaces row 10 and inserts 700 first
    result = commit_upsert(
        keyed.io, keyed.commit_log, read=read, segments=segments, rows=keys, deletes=deletes, inline_max_bytes=512
    )
    assert (result.inserted_rows, result.updated_rows) == (0, 2)
    now = {r["id"]: r["who"] for r in keyed.to_arrow().to_pylist()}
    assert keyed.to_arrow().num_rows == 101 and now[10] == "a" and now[700] == "a"


WORKER = r"""
import json, os, sys, time
import pyarrow as pa
from mvtable.connector import Table
from mvtable.errors import DuplicateKeyError

args = json.loads(sys.argv[1])
t = Table.open(args["uri"])
schema = pa.schema([("id", pa.int64()), ("who", pa.string())])
open(os.path.join(args["sync"], "ready-" + args["name"]), "w").close()
while not os.path.exists(os.path.join(args["sync"], "go")):
    time.sleep(0.001)
inserted, refused = [], []
for batch in args["batches"]:
    data = pa.table({"id": pa.array(batch, pa.int64()), "who": [args["name"]] * len(batch)}, schema=schema)
    if args["mode"] == "upsert":
        t.upsert(data)
        inserted.append(batch)
        continue
    try:
        t.append(data)
        inserted.append(batch)
    except DuplicateKeyError:
        refused.append(batch)
print(json.dumps({"inserted": inserted, "refused": refused}))
"""


START_S = 300  # three interpreters importing pyarrow on a loaded 2-core machine
RUN_S = 300


def race(uri: str, sync: str, plans: list[tuple[str, list[list[int]]]]) -> list[dict]:
    """Run one worker process per plan, all released at once; their reports. A failure
    says which worker did what (exit code, stderr, stdout), and no worker outlives it."""
    # a kill point armed in this process's environment would SIGKILL the workers silently
    env = {**{k: v for k, v in os.environ.items() if k != "MVTABLE_FAULT"}, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs: list[subprocess.Popen] = []
    started = time.monotonic()

    def report(why: str) -> str:
        lines = [f"{why} after {time.monotonic() - started:.1f}s; plans {plans}"]
        for i, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
            out, err = p.communicate()
            lines.append(f"--- w{i} exit {p.returncode}\nstdout: {out.decode()[-1000:]}\nstderr: {err.decode()[-3000:]}")
        return "\n".join(lines)

    try:
        for i, (mode, batches) in enumerate(plans):
            arg = json.dumps({"uri": uri, "sync": sync, "name": f"w{i}", "mode": mode, "batches": batches})
            procs.append(
                subprocess.Popen([sys.executable, "-c", WORKER, arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            )
        while len([f for f in os.listdir(sync) if f.startswith("ready-")]) < len(plans):
            if any(p.poll() is not None for p in procs) or time.monotonic() - started > START_S:
                pytest.fail(
                    report(
                        "a worker exited before it was ready"
                        if time.monotonic() - started <= START_S
                        else "workers did not start"
                    )
                )
            time.sleep(0.01)
        open(os.path.join(sync, "go"), "w").close()
        out = []
        for i, p in enumerate(procs):
            try:
                stdout, stderr = p.communicate(timeout=max(1.0, RUN_S - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                pytest.fail(report(f"w{i} did not finish"))
            if p.returncode != 0:
                pytest.fail(report(f"w{i} failed"))
            out.append(json.loads(stdout.decode().strip().splitlines()[-1]))
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def history(uri: str) -> str:
    """Every commit of the table (for a failure message): version, operation, who wrote what."""
    t = Table.open(uri)
    lines = []
    for v in range(t.version + 1):
        c = t.commit_log.read_commit(v)
        lines.append(f"v{v} {c.operation} read {c.read_version} {c.metrics} {[type(a).__name__ for a in c.actions]}")
    for row in t.to_arrow().sort_by("id").to_pylist():
        lines.append(f"  {row}")
    return "\n".join(lines)


batches = st.lists(st.lists(st.integers(0, 24), min_size=1, max_size=3, unique=True), min_size=2, max_size=4)


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans=st.lists(st.tuples(st.sampled_from(["append", "upsert"]), batches), min_size=3, max_size=3))
def test_racing_processes_never_hold_a_key_twice(tmp_path_factory, plans) -> None:
    root = tmp_path_factory.mktemp("race")
    uri, sync = str(root / "t"), str(root / "sync")
    os.mkdir(sync)
    Table.create(uri, schema=SCHEMA, primary_key=["id"])
    results = race(uri, sync, plans)
    table = Table.open(uri).to_arrow()
    why = f"plans {plans}\nresults {results}\n{history(uri)}"
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"a key is held twice\n{why}"
    appended = [k for (mode, _), r in zip(plans, results) if mode == "append" for b in r["inserted"] for k in b]
    upserted = {k for (mode, _), r in zip(plans, results) if mode == "upsert" for b in r["inserted"] for k in b}
    assert len(appended) == len(set(appended)), f"two appends inserted the same key\n{why}"
    assert set(ids) == set(appended) | upserted, why
    # a key no upsert wrote belongs to the one append that inserted it
    owner = {
        k: f"w{i}" for i, ((mode, _), r) in enumerate(zip(plans, results)) if mode == "append" for b in r["inserted"] for k in b
    }
    for row in table.to_pylist():
        if row["id"] not in upserted:
            assert row["who"] == owner[row["id"]], why
