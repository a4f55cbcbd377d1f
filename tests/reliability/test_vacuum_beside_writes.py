"""Vacuum at every step between a write's files and its commit (issue 27, requirement 2).

The table keeps nothing it need not: ``orphanGracePeriod=0s`` and a 0 s retention, forced,
so every file no commit names is an orphan the moment it is written. At each fault point
of append, overwrite, consistent push, delete (DV files), upsert, delete by key and
compaction, a vacuum (which runs GC too) is run from another ``Table`` in this process.
Each write must either land, with the newest version readable and equal to the model, or
fail with a typed error and nothing lost; never a commit naming a missing file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable import faults
from mvtable.connector import Table, writes
from mvtable.connector.streaming import commit_batch, plan_batch
from mvtable.connector.write_intents import INTENT_DIR
from mvtable.errors import CommitFilesMissingError, WriteIntentExpiredError

PROPS = {
    "rowGroupRows": "4",
    "checkpointInterval": "3",
    "dvInlineMaxBytes": "0",  # every DV in a file
    "versionRetentionPeriod": "0s",
    "replacedSegmentsRetentionPeriod": "0s",
    "lineageEntryCleanupRetentionPeriod": "0s",
    "orphanGracePeriod": "0s",
}


def rows(ids: range | list[int]) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids], pa.string())})


def content(t: Table) -> list[tuple[int, str]]:
    got = Table.open(t.uri).to_arrow()  # a fresh reader: every file of the newest version
    return sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist()))


def model(ids: list[int], v: dict[int, str] | None = None) -> list[tuple[int, str]]:
    return sorted((i, (v or {}).get(i, f"v{i}")) for i in ids)


def intents_left(t: Table) -> list[str]:
    folder = os.path.join(t.uri, INTENT_DIR)
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def vacuum_from_elsewhere(uri: str, calls: list[int]) -> Callable[[], None]:
    def run() -> None:
        calls.append(1)
        Table.open(uri).vacuum(retention="0s", force=True)

    return run


def keyed(uri: str) -> Table:
    t = Table.create(uri, schema=rows([0]).schema, properties=PROPS, primary_key=["id"])
    for k in range(3):
        t.append(rows(range(k * 10, k * 10 + 10)))
    return t


def plain(uri: str) -> Table:
    t = Table.create(uri, schema=rows([0]).schema, properties=PROPS)
    for k in range(3):
        t.append(rows(range(k * 10, k * 10 + 10)))
    return t


BASE = list(range(30))

# (name, make table, fault point, the write, the model afterwards)
CASES = [
    ("append", plain, "write.after_files", lambda t: t.append(rows(range(100, 110))), model(BASE + list(range(100, 110)))),
    ("append", plain, "commit.APPEND.before_put", lambda t: t.append(rows(range(100, 110))), model(BASE + list(range(100, 110)))),
    ("append", plain, "commit.APPEND.after_put", lambda t: t.append(rows(range(100, 110))), model(BASE + list(range(100, 110)))),
    ("keyed append", keyed, "write.after_files", lambda t: t.append(rows(range(100, 110))), model(BASE + list(range(100, 110)))),
    ("overwrite", plain, "write.after_files", lambda t: t.overwrite(rows(range(200, 210))), model(list(range(200, 210)))),
    (
        "overwrite",
        plain,
        "commit.OVERWRITE.before_put",
        lambda t: t.overwrite(rows(range(200, 210))),
        model(list(range(200, 210))),
    ),
    (
        "push",
        plain,
        "commit.PUSH_START.after_put",
        lambda t: t.overwrite(rows(range(300, 320)), consistent_push=True),
        model(list(range(300, 320))),
    ),
    (
        "push",
        plain,
        "write.after_files",
        lambda t: t.overwrite(rows(range(300, 320)), consistent_push=True),
        model(list(range(300, 320))),
    ),
    (
        "push",
        keyed,
        "commit.CONSISTENT_PUSH.before_put",
        lambda t: t.overwrite(rows(range(300, 320)), consistent_push=True),
        model(list(range(300, 320))),
    ),
    ("delete", plain, "delete.after_dv_files", lambda t: t.delete(pc.field("id") < 5), model(list(range(5, 30)))),
    ("delete", plain, "commit.DELETE.before_put", lambda t: t.delete(pc.field("id") < 5), model(list(range(5, 30)))),
    (
        "delete rows",
        plain,
        "delete.after_dv_files",
        lambda t: t.delete_rows({t.snapshot().visible_segment_ids()[0]: [0, 1]}),
        None,  # two rows of the first segment: counted below
    ),
    (
        "delete by key",
        keyed,
        "delete.after_dv_files",
        lambda t: t.delete(keys=[3, 13, 23]),
        model([i for i in BASE if i % 10 != 3]),
    ),
    (
        "delete by key",
        keyed,
        "commit.DELETE_BY_KEY.before_put",
        lambda t: t.delete(keys=[3, 13, 23]),
        model([i for i in BASE if i % 10 != 3]),
    ),
    (
        "upsert",
        keyed,
        "upsert.after_files",
        lambda t: t.upsert(pa.table({"id": pa.array([1, 2, 50], pa.int64()), "v": pa.array(["new"] * 3)})),
        model(BASE + [50], {1: "new", 2: "new", 50: "new"}),
    ),
    (
        "upsert",
        keyed,
        "delete.after_dv_files",
        lambda t: t.upsert(pa.table({"id": pa.array([1, 2, 50], pa.int64()), "v": pa.array(["new"] * 3)})),
        model(BASE + [50], {1: "new", 2: "new", 50: "new"}),
    ),
    (
        "upsert",
        keyed,
        "commit.UPSERT.before_put",
        lambda t: t.upsert(pa.table({"id": pa.array([1, 2, 50], pa.int64()), "v": pa.array(["new"] * 3)})),
        model(BASE + [50], {1: "new", 2: "new", 50: "new"}),
    ),
    ("compact", plain, "compact.after_outputs", lambda t: t.compact(min_input_files=2), model(BASE)),
    ("compact", keyed, "commit.COMPACT.before_put", lambda t: t.compact(min_input_files=2), model(BASE)),
]


@pytest.mark.parametrize(("name", "make", "point", "write", "expected"), CASES, ids=[f"{c[0]}@{c[2]}" for c in CASES])
def test_vacuum_at_a_fault_point_takes_nothing_of_the_write(tmp_path, name, make, point, write, expected):
    t = make(str(tmp_path / "t"))
    if name == "compact":
        t.delete(pc.field("id") == 0)  # a worn segment too, whose DV the compaction drops
        t.delete(pc.field("id") == 100)  # nothing: the model stays BASE minus id 0
        expected = [r for r in expected if r[0] != 0]
    before = content(t)
    calls: list[int] = []
    with faults.run_at(point, vacuum_from_elsewhere(t.uri, calls)):
        write(t)
    assert calls, f"the write never reached {point}"
    after = content(t)
    if expected is None:
        assert len(after) == len(before) - 2 and set(after) < set(before)
    else:
        assert after == expected
    assert intents_left(t) == []  # the write removed its intent
    # and a vacuum now (nothing in flight) keeps the newest version whole
    Table.open(t.uri).vacuum(retention="0s", force=True)
    assert content(t) == after


def test_a_commit_naming_a_file_removed_by_hand_is_refused(tmp_path):
    t = plain(str(tmp_path / "t"))
    before = content(t)

    def remove_segments() -> None:
        data = os.path.join(t.uri, "data")
        mine = [n for n in os.listdir(data) if n.endswith(".parquet") and os.path.getmtime(os.path.join(data, n)) >= started]
        for n in mine:
            os.remove(os.path.join(data, n))

    import time

    started = time.time() - 0.001
    version = t.version
    with faults.run_at("write.after_files", remove_segments), pytest.raises(CommitFilesMissingError) as err:
        t.append(rows(range(100, 110)))
    assert err.value.paths and all(p.startswith("data/") for p in err.value.paths)
    assert t.commit_log.latest_version() == version  # nothing committed
    assert content(t) == before
    assert intents_left(t) == []


def test_a_dv_file_removed_before_the_commit_is_refused(tmp_path):
    t = plain(str(tmp_path / "t"))
    before = content(t)

    def remove_dvs() -> None:
        dv = os.path.join(t.uri, "_mvtable", "dv")
        live = {ref.path for ref in t.commit_log.snapshot().dvs.values() if ref.path}
        for n in os.listdir(dv):
            if f"_mvtable/dv/{n}" not in live:
                os.remove(os.path.join(dv, n))

    with faults.run_at("delete.after_dv_files", remove_dvs), pytest.raises(CommitFilesMissingError) as err:
        t.delete(pc.field("id") < 5)
    assert err.value.paths[0].startswith("_mvtable/dv/")
    assert content(t) == before


def test_a_write_whose_intent_was_taken_away_does_not_commit(tmp_path):
    """The intent file removed by hand: vacuum then takes the write's files, and the write
    stops with a typed error instead of committing them (its commit finds them gone, or
    its renewal finds the intent gone)."""
    t = plain(str(tmp_path / "t"))
    before = content(t)

    def lose_intent_then_vacuum() -> None:
        for name in intents_left(t):
            os.remove(os.path.join(t.uri, INTENT_DIR, name))
        # vacuum's clock is in whole milliseconds: a file written in the same one is not yet
        # older than a 0 s grace, and stays
        time.sleep(0.05)
        Table.open(t.uri).vacuum(retention="0s", force=True)

    version = t.version
    with (
        faults.run_at("write.after_files", lose_intent_then_vacuum),
        pytest.raises((CommitFilesMissingError, WriteIntentExpiredError)),
    ):
        t.append(rows(range(100, 110)))
    assert t.commit_log.latest_version() >= version  # vacuum may commit; the append did not
    assert all(h.operation.value != "APPEND" for h in t.history()[version + 1 :])
    assert content(t) == before


@pytest.mark.parametrize("point", ["commit.RESTORE.before_put", "commit.RESTORE.after_put"])
def test_vacuum_while_a_restore_commits_keeps_the_files_it_brings_back(tmp_path, point):
    """A restore names files that exist already (segments an overwrite replaced): its
    intent names them, and vacuum, which would otherwise take them as unneeded, keeps them."""
    t = plain(str(tmp_path / "t"))
    version = t.version
    t.overwrite(rows(range(500, 505)))
    calls: list[int] = []
    with faults.run_at(point, vacuum_from_elsewhere(t.uri, calls)):
        t.restore(version=version)
    assert calls
    assert content(t) == model(BASE)
    assert intents_left(t) == []


@pytest.mark.parametrize("point", ["after tasks", "commit.STREAM_APPEND.before_put"])
def test_vacuum_during_a_streaming_batch_takes_none_of_its_task_files(tmp_path, point):
    """A streaming batch is planned without side effects; each task takes a write intent of
    its own, which the commit renews and removes."""
    t = plain(str(tmp_path / "t"))
    plan = plan_batch(t.uri, storage_options=None, incoming=rows([0]).schema, complete=False)
    segments = [s for part in (range(100, 105), range(105, 110)) for s in writes.write_data(plan, rows(part).to_batches())]
    assert len(intents_left(t)) == 2  # one per task, until the commit
    calls: list[int] = []
    vacuum = vacuum_from_elsewhere(t.uri, calls)
    if point == "after tasks":
        vacuum()
    with faults.run_at(point, vacuum):
        result = commit_batch(plan, segments, app_id="app", batch_id=0)
    assert calls and result.version is not None
    assert content(t) == model(BASE + list(range(100, 110)))
    assert intents_left(t) == []
