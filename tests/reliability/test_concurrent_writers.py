"""N processes doing random appends, deletes, consistent pushes and rollbacks against one
table (plus a reader and a GC/vacuum loop), on local disk and on SeaweedFS. Afterwards the
table equals a sequential replay of the committed log through a deliberately simple model,
no committed row is lost or duplicated, every failure is typed, and every read the reader
made equals the model's snapshot at that version.

Duration per backend: ``MVTABLE_SOAK_SECONDS`` (default 12 s; the README shows a longer soak)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.visibility import pins

WRITERS = 4
SECONDS = float(os.environ.get("MVTABLE_SOAK_SECONDS", "12"))
WORKER = str(Path(__file__).with_name("soak_worker.py"))
PROPS = {"rowGroupRows": "8", "checkpointInterval": "5", "versionRetentionPeriod": "0s", "orphanGracePeriod": "10m"}


class Model:
    """The lineage visibility rule (mvtable.lineage.snapshot) in a dozen lines, fed with the raw JSON of each commit file."""

    def __init__(self) -> None:
        self.segments: dict[str, dict] = {}  # id -> {"removed": bool, "entry": str|None}
        self.entries: dict[str, dict] = {}  # id -> {"state", "from", "to"}
        self.deleted: set[int] = set()

    def visible(self) -> set[str]:
        hidden = set()
        for e in self.entries.values():
            hidden |= set(e["from"] if e["state"] == "COMPLETED" else e["to"])
        return {s for s, info in self.segments.items() if not info["removed"] and s not in hidden}

    def apply(self, commit: dict, deletes_by_version: dict[int, list[int]]) -> None:
        for a in commit["actions"]:
            kind = a["kind"]
            if kind == "add":
                self.segments[a["segment"]["id"]] = {"removed": False}
                if a["lineage_entry"]:
                    self.entries[a["lineage_entry"]]["to"].append(a["segment"]["id"])
            elif kind == "remove":
                self.segments[a["segment_id"]]["removed"] = True
            elif kind == "lineage_start":
                self.entries[a["entry_id"]] = {
                    "state": "IN_PROGRESS",
                    "from": list(a["segments_from"]),
                    "to": list(a["segments_to"]),
                }
            elif kind == "lineage_end":
                self.entries[a["entry_id"]]["state"] = "COMPLETED"
            elif kind == "lineage_revert":
                self.entries[a["entry_id"]]["state"] = "REVERTED"
            elif kind == "lineage_purge":
                del self.entries[a["entry_id"]]
        self.deleted |= set(deletes_by_version.get(commit["version"], []))

    def rows(self, seg_rows: dict[str, list[int]]) -> list[int]:
        return sorted(i for s in self.visible() for i in seg_rows[s] if i not in self.deleted)


def run_soak(tmp_path: Path, uri: str, options: dict, *, label: str) -> None:
    t = Table.create(uri, schema=pa.schema([("id", pa.int64())]), properties=PROPS, storage_options=options)
    t.append(pa.table({"id": pa.array(range(50), pa.int64())}))
    seed_segments = {a.segment.id: list(range(50)) for a in t.commit_log.read_commit(1).actions if hasattr(a, "segment")}
    archive_pin = pins.pin(t.io, 0, ttl_s=3600, owner="soak test")  # handed over to the reader
    procs = []
    roles = [("writer", i) for i in range(WRITERS)] + [("reader", 0), ("janitor", 0)]
    for role, wid in roles:
        out = tmp_path / f"{role}-{wid}.json"
        args = [sys.executable, WORKER, role, str(wid), uri, json.dumps(options), str(SECONDS), str(out), archive_pin]
        procs.append((role, out, subprocess.Popen(args)))
    for role, _out, p in procs:
        assert p.wait(timeout=SECONDS + 240) == 0, f"{role} process failed"
    records = {(role, out.name): json.loads(out.read_text()) for role, out, _ in procs}

    reader_out = records.pop(("reader", "reader-0.json"))
    writes = [r for (role, _), rs in records.items() if role == "writer" for r in rs]
    untyped = [r for rs in [*records.values(), reader_out["reads"]] for r in rs if r.get("failed") == "untyped"]
    assert not untyped, untyped[:3]
    landed = [r for r in writes if r.get("version") is not None and "failed" not in r]
    conflicts = [r for r in writes if r.get("failed") == "conflict"]
    refused = [r for r in writes if r.get("failed") == "refused"]
    # refusals the lineage rules owe a writer: a live push holds the base (PushInProgressError),
    # a staged one waits for a person (StagedPushError), a segment is held by a push
    expected = ("InvalidLineageTransitionError", "SegmentInUseError", "PushInProgressError", "StagedPushError")
    bad_refusals = [r for r in refused if r["error"] not in expected]
    assert not bad_refusals, bad_refusals[:3]
    assert len(landed) >= WRITERS, "the soak did not get going"

    seg_rows = dict(seed_segments)
    deletes_by_version: dict[int, list[int]] = {}
    for r in landed:
        seg_rows.update(r.get("segments", {}))
        if r["op"] == "delete":
            deletes_by_version[r["version"]] = r["deleted"]
    # every committed version must have been claimed by exactly one record (or be our own / janitor's)
    t = Table.open(uri, storage_options=options)
    versions = [r["version"] for r in landed if r["op"] in ("append", "delete", "rollback")]
    assert len(versions) == len(set(versions)), "two writers claim one version"

    # replay the whole log, archived by the reader under its pin, into the model
    archive = {int(v): json.loads(text) for v, text in reader_out["archive"].items()}
    for v in range(reader_out["archived"] + 1, t.version + 1):  # still pinned: nothing collected
        archive[v] = json.loads(t.io.read(f"_mvtable/log/{v:020d}.json"))
    pins.release(t.io, reader_out["pin"])
    assert sorted(archive) == list(range(t.version + 1)), "a commit escaped the archive"
    model = Model()
    snapshots: dict[int, tuple[int, int]] = {}
    for v in sorted(archive):
        model.apply(archive[v], deletes_by_version)
        ids = model.rows(seg_rows)
        snapshots[v] = (len(ids), sum(ids))
    final = sorted(t.to_arrow().column("id").to_pylist())
    assert final == model.rows(seg_rows), "table differs from the model's replay of the log"
    assert len(final) == len(set(final)), "duplicated rows"
    # every row that a landed append/push wrote and that nobody deleted/replaced is there
    reads = [r for r in reader_out["reads"] if "failed" not in r]
    assert reads, "the reader never read"
    for r in reads:
        assert r["dups"] == 0
        assert (r["count"], r["sum"]) == snapshots[r["version"]], f"torn read at version {r['version']}"
    janitor = records[("janitor", "janitor-0.json")]
    print(
        f"\nsoak {label}: {WRITERS} writers x {SECONDS:.0f}s: {len(landed)} commits landed, "
        f"{sum(r.get('attempts', 1) - 1 for r in landed)} retries, "
        f"{len(conflicts)} conflicts, {len(refused)} refused, {len(reads)} reads checked, "
        f"{len(janitor)} gc/vacuum runs, final version {t.version}"
    )


def test_soak_local(tmp_path):
    run_soak(tmp_path, str(tmp_path / "t"), {}, label="local disk")


@pytest.mark.s3
def test_soak_seaweedfs(tmp_path, seaweedfs_s3):
    run_soak(tmp_path, seaweedfs_s3.url("soak"), seaweedfs_s3.storage_options(), label="SeaweedFS S3")
