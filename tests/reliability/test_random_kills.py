"""A loop of random SIGKILLs: a process doing consistent pushes, deletes and appends is
killed at a random moment, again and again. After every kill the very next push, in
another process, succeeds at once (the dead owner's push is reverted in the same commit;
the lease is 1 h, so only the pid check can explain it), and at the end every version of
the log reads as exactly the snapshot a simple model replays from the log.

Duration: ``MVTABLE_KILL_SECONDS`` (default 6 s, a handful of kills in CI); with ``-s`` it
prints the kills, the operations that landed and the time from kill to the next push."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq

from mvtable.connector import Table
from mvtable.lineage.log import commit_path

SECONDS = float(os.environ.get("MVTABLE_KILL_SECONDS", "6"))
PROPS = {"rowGroupRows": "8", "checkpointInterval": "5", "pushLeasePeriod": "1h"}

WORKER = textwrap.dedent(
    """
    import random, sys
    import pyarrow as pa, pyarrow.compute as pc
    from mvtable.connector import Table
    t = Table.open(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    base = int(sys.argv[2]) * 10**6
    print("ready", flush=True)
    for seq in range(10**6):
        start = base + seq * 100
        op = rng.choice(["push", "append", "append", "delete"])
        if op == "delete":
            lo = rng.randrange(base, start + 1)
            t.delete((pc.field("id") >= lo) & (pc.field("id") < lo + rng.randint(1, 40)))
        else:
            data = pa.table({"id": pa.array(range(start, start + rng.randint(1, 30)), pa.int64())})
            t.overwrite(data, consistent_push=True) if op == "push" else t.append(data)
    """
)
DELETE_RANGE = re.compile(r"^\(\(id >= (-?\d+)\) and \(id < (-?\d+)\)\)$")


class Model:
    """Pinot's routing rule over the raw commit JSON; rows of a segment come straight from
    its Parquet file, deleted rows from the delete's predicate over what was visible."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.rows: dict[str, list[int]] = {}
        self.removed: set[str] = set()
        self.entries: dict[str, dict] = {}
        self.deleted: set[int] = set()

    def visible(self) -> list[int]:
        hidden: set[str] = set()
        for e in self.entries.values():
            hidden |= set(e["from"] if e["state"] == "COMPLETED" else e["to"])
        live = [s for s in self.rows if s not in self.removed and s not in hidden]
        return sorted(i for s in live for i in self.rows[s] if i not in self.deleted)

    def apply(self, commit: dict) -> None:
        for a in commit["actions"]:
            kind = a["kind"]
            if kind == "add":
                sid = a["segment"]["id"]
                self.rows[sid] = pq.read_table(os.path.join(self.root, a["segment"]["path"])).column("id").to_pylist()
                if a["lineage_entry"]:
                    self.entries[a["lineage_entry"]]["to"].append(sid)
            elif kind == "remove":
                self.removed.add(a["segment_id"])
            elif kind == "lineage_start":
                self.entries[a["entry_id"]] = {"state": "IN_PROGRESS", "from": list(a["segments_from"]), "to": []}
            elif kind == "lineage_end":
                self.entries[a["entry_id"]]["state"] = "COMPLETED"
            elif kind == "lineage_revert":
                self.entries[a["entry_id"]]["state"] = "REVERTED"
            elif kind == "lineage_purge":
                del self.entries[a["entry_id"]]
        if commit["operation"] == "DELETE":
            lo, hi = map(int, DELETE_RANGE.match(commit["parameters"]["predicate"]).groups())  # type: ignore[union-attr]
            self.deleted |= {i for i in self.visible() if lo <= i < hi}


def test_random_sigkills_never_block_the_next_push(tmp_path):
    root = str(tmp_path / "t")
    t = Table.create(root, schema=pa.schema([("id", pa.int64())]), properties=PROPS)
    t.append(pa.table({"id": pa.array(range(50), pa.int64())}))
    rng = random.Random(12)
    recoveries: list[float] = []
    recovered_entries = 0
    kills = 0
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline or kills < 3:
        kills += 1
        child = subprocess.Popen([sys.executable, "-c", WORKER, root, str(kills)], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL
        started = time.perf_counter()
        result = t.overwrite(pa.table({"id": pa.array([-kills], pa.int64())}), consistent_push=True)
        recoveries.append(time.perf_counter() - started)
        recovered_entries += sum(a.kind == "lineage_revert" for a in t.commit_log.read_commit(result.version - 1).actions)
        assert sorted(t.to_arrow().column("id").to_pylist()) == [-kills]
        t.append(pa.table({"id": pa.array([10**9 + kills], pa.int64())}))  # the table keeps moving
    assert max(recoveries) < 5, recoveries  # never a lease's wait (1 h)

    model = Model(root)
    operations: dict[str, int] = {}
    for v in range(t.version + 1):
        commit = json.loads(t.io.read(commit_path(v)))
        model.apply(commit)
        operations[commit["operation"]] = operations.get(commit["operation"], 0) + 1
        got = sorted(t.scan(version=v).to_arrow().column("id").to_pylist())
        assert got == model.visible(), f"version {v} ({commit['operation']}) is not one committed snapshot"
    assert operations.get("PUSH_START", 0) >= kills
    print(
        f"\nrandom SIGKILL loop: {kills} kills, {t.version + 1} versions checked against the model, "
        f"operations {operations}, {recovered_entries} dead pushes reverted by the next push; "
        f"kill → next successful push: median {statistics.median(recoveries) * 1000:.0f} ms, "
        f"max {max(recoveries) * 1000:.0f} ms"
    )
