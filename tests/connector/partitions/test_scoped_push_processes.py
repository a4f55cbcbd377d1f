"""Druid-like time-chunk concurrency with real processes: scoped pushes of disjoint days run
at once, an overlap is refused naming the day and the owner, appends during a push stay, a
SIGKILLed push is reverted by the next push of its day and left alone by pushes of other
days, and deletes and compaction of other days pass a running push by."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from mvtable.connector import Table

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])
ROOT = Path(__file__).resolve().parents[3]


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def days_table(tmp_path: Path, **props: str) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, partition_by=["day"], properties=props)
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(DAY_C, 5, 6)]))
    return t


class Pusher:
    """A worker process holding a scoped push of one day open (``scoped_push_worker``)."""

    def __init__(self, t: Table, day: dt.date, *ids: int) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-m", "tests.connector.partitions.scoped_push_worker", t.uri, day.isoformat(), *map(str, ids)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.p.stdout is not None
        self.first = json.loads(self.p.stdout.readline())

    @property
    def entry(self) -> str:
        assert "entry" in self.first, self.first
        return self.first["entry"]

    def go(self) -> dict:
        out, _ = self.p.communicate("go\n", timeout=60)
        assert self.p.returncode == 0, out
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        self.p.kill()
        self.p.wait()

    def close(self) -> None:
        if self.p.poll() is None:
            self.kill()


def test_two_processes_pushing_disjoint_days_at_once_both_land(tmp_path):
    t = days_table(tmp_path)
    a = Pusher(t, DAY_A, 10, 11)
    b = Pusher(t, DAY_B, 20)
    try:
        assert a.entry != b.entry  # both started while the other held its push open
        assert {e.state for e in t.lineage()} == {"IN_PROGRESS"}
        assert "done" in b.go() and "done" in a.go()
    finally:
        a.close(), b.close()
    assert content(t) == [
        ("2024-01-05", 10, "pushed by 2024-01-05"),
        ("2024-01-05", 11, "pushed by 2024-01-05"),
        ("2024-01-06", 20, "pushed by 2024-01-06"),
        ("2024-01-07", 5, "old"),
        ("2024-01-07", 6, "old"),
    ]
    assert [e.state for e in t.lineage()] == ["COMPLETED", "COMPLETED"]


def test_a_push_of_the_same_day_gets_push_in_progress_naming_the_day_and_the_owner(tmp_path):
    t = days_table(tmp_path, pushLeasePeriod="1h")
    a = Pusher(t, DAY_A, 10)
    try:
        b = Pusher(t, DAY_A, 30)
        b.p.wait(timeout=60)
        assert b.first["error"] == "PushInProgressError", b.first
        assert b.first["owner"] == f"pid {a.p.pid} on {os.uname().nodename}"
        assert b.first["partitions"] == ["day=2024-01-05"] and b.first["entry_id"] == a.entry
        assert f"over partition day=2024-01-05, owned by pid {a.p.pid}" in b.first["message"]
        assert "done" in a.go()
    finally:
        a.close()
    assert [r for r in content(t) if r[0] == "2024-01-05"] == [("2024-01-05", 10, "pushed by 2024-01-05")]


def test_an_append_into_a_day_while_a_push_replaces_it_stays_visible(tmp_path):
    t = days_table(tmp_path)
    a = Pusher(t, DAY_A, 10)
    try:
        t.append(rows(DAY_A, 99, v="appended meanwhile"))
        assert "done" in a.go()
    finally:
        a.close()
    assert [r for r in content(t) if r[0] == "2024-01-05"] == [
        ("2024-01-05", 10, "pushed by 2024-01-05"),
        ("2024-01-05", 99, "appended meanwhile"),
    ]


def test_a_sigkilled_push_is_reverted_by_the_next_push_of_its_day_only(tmp_path):
    t = days_table(tmp_path, pushLeasePeriod="1h")  # only the dead process can explain a recovery
    a = Pusher(t, DAY_A, 10)
    dead = a.entry
    a.kill()
    # a push of another day succeeds and leaves the dead push alone
    t.overwrite(rows(DAY_B, 40, v="B"), consistent_push=True, replace_where=pc.field("day") == DAY_B)
    states = {e.id: e.state for e in t.lineage()}
    assert states[dead] == "IN_PROGRESS"
    start = [h for h in t.history() if h.operation == "PUSH_START"][-1]
    assert "recovered" not in start.parameters
    # the next push of its day reverts it in its own start
    t.overwrite(rows(DAY_A, 50, v="A"), consistent_push=True, replace_where=pc.field("day") == DAY_A)
    views = {e.id: e for e in t.lineage()}
    assert views[dead].state == "REVERTED" and "no longer runs" in (views[dead].revert_reason or "")
    start = [h for h in t.history() if h.operation == "PUSH_START"][-1]
    assert [r["entry"] for r in start.parameters["recovered"]] == [dead]
    assert content(t) == [("2024-01-05", 50, "A"), ("2024-01-06", 40, "B"), ("2024-01-07", 5, "old"), ("2024-01-07", 6, "old")]


def test_deletes_and_compaction_of_other_days_do_not_conflict_with_a_running_push(tmp_path):
    t = days_table(tmp_path)
    t.append(rows(DAY_B, 7))  # day B in two segments: something to compact
    a = Pusher(t, DAY_A, 10)
    try:
        assert t.delete(pc.field("id") == 4).deleted_rows == 1
        assert t.compact(min_input_files=2).input_segments == 2
        assert "done" in a.go()
    finally:
        a.close()
    assert content(t) == [
        ("2024-01-05", 10, "pushed by 2024-01-05"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 7, "old"),
        ("2024-01-07", 5, "old"),
        ("2024-01-07", 6, "old"),
    ]
