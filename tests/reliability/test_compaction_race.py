"""Two appenders, one deleter and a compaction loop, as separate processes on one table
(local disk, and SeaweedFS S3). Appends and deletes never fail; every version of the log,
replayed in order against what each process recorded, shows exactly the rows it should:
an append adds its ids, a delete removes the ids it addressed (wherever a compaction moved
them), a compaction changes nothing. No deleted row comes back, no delete is lost.

Duration per backend: ``MVTABLE_COMPACT_STRESS_SECONDS`` (default 8 s; the README shows the
60-second run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table

SECONDS = float(os.environ.get("MVTABLE_COMPACT_STRESS_SECONDS", "8"))
WORKER = str(Path(__file__).with_name("compaction_worker.py"))
PROPS = {"rowGroupRows": "16", "checkpointInterval": "10", "compactTargetFileSize": "64KiB"}
ROLES = [("append", 1), ("append", 2), ("delete", 0), ("compact", 0)]


def run_race(tmp_path: Path, uri: str, options: dict, *, label: str) -> None:
    t = Table.create(uri, schema=pa.schema([("id", pa.int64())]), properties=PROPS, storage_options=options)
    procs = []
    for role, wid in ROLES:
        out = tmp_path / f"{role}-{wid}.json"
        args = [sys.executable, WORKER, role, str(wid), uri, json.dumps(options), str(SECONDS), str(out)]
        procs.append((role, out, subprocess.Popen(args)))
    for role, _out, p in procs:
        assert p.wait(timeout=SECONDS + 300) == 0, f"{role} process crashed"
    records = [r for _role, out, _p in procs for r in json.loads(out.read_text())]

    failed = [r for r in records if "failed" in r]
    assert not failed, failed[:3]
    appends = {r["version"]: r for r in records if r["op"] == "append"}
    deletes = {r["version"]: r for r in records if r["op"] == "delete" and r["version"] is not None}
    compactions = [v for r in records if r["op"] == "compact" for v in r["commits"]]
    assert compactions, "no compaction landed: the race did not happen"
    assert any(r["remapped"] for r in deletes.values()) or any(r["remapped"] for r in records if r["op"] == "compact"), (
        "no delete crossed a compaction"
    )

    t = Table.open(uri, storage_options=options)
    # The model replays every version in memory; the table is read at the versions where a
    # mistake would show (every delete and compaction, the version before each, the newest)
    # and a sample of the rest: reading all of them costs versions x segments, and a quiet
    # machine lands ~1,500 versions in 8 s.
    operations = {v: t.commit_log.read_commit(v).operation for v in range(1, t.version + 1)}
    risky = {v for v, op in operations.items() if op != "APPEND"}
    to_read = risky | {v - 1 for v in risky if v > 1} | {t.version} | set(range(1, t.version + 1, 25))
    # one Counter, changed in place: a new one per version costs versions x rows
    expected: Counter[int] = Counter()
    for v in range(1, t.version + 1):
        operation = operations[v]
        if operation == "APPEND":
            expected.update(appends[v]["ids"])
        elif operation == "DELETE":
            removed = sum(expected.pop(i, 0) for i in set(deletes[v]["ids"]))
            assert removed == deletes[v]["deleted"], f"delete at {v} miscounted"
        else:
            assert operation == "COMPACT", f"unexpected {operation} at version {v}"
        if v in to_read:
            now = Counter(t.to_arrow(version=v, columns=["id"]).column("id").to_pylist())
            assert now == expected, f"version {v} ({operation}) differs from the replay"
            assert max(now.values(), default=1) == 1, f"duplicated rows at version {v}"
    all_ids = {i for r in appends.values() for i in r["ids"]}
    gone = {i for r in deletes.values() for i in r["ids"]}
    assert set(expected) == all_ids - gone
    assert len(appends) + len(deletes) + len(compactions) == t.version  # every commit is accounted for
    print(
        f"\ncompaction race {label}, {SECONDS:.0f}s: {len(appends)} appends, {len(deletes)} deletes, "
        f"{len(compactions)} compaction commits landed; failed appends 0, failed deletes 0; "
        f"rows remapped by deletes {sum(r['remapped'] for r in deletes.values())}, "
        f"carried by compactions {sum(r['remapped'] for r in records if r['op'] == 'compact')}; "
        f"append retries {sum(r['attempts'] - 1 for r in appends.values())}; "
        f"bins dropped {sum(r['dropped'] for r in records if r['op'] == 'compact')}"
    )


def test_compaction_race_local(tmp_path):
    run_race(tmp_path, str(tmp_path / "t"), {}, label="local disk")


@pytest.mark.s3
def test_compaction_race_seaweedfs(tmp_path, seaweedfs_s3):
    run_race(tmp_path, seaweedfs_s3.url("compaction-race"), seaweedfs_s3.storage_options(), label="SeaweedFS S3")
