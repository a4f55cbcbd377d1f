"""Metadata-heavy cases: planning a table with many segments and commits, and the peak
memory of a full-table visibility GC.

Both tables are built by writing commit files straight through the log's own models
(``Commit``/``AddSegment``/``SetDeletionVector`` validated by pydantic, replayed with
``apply_commit``, stored put-if-absent) instead of calling ``Table.append`` 10,000 times:
the log and checkpoints on disk are byte-for-byte what the commit protocol would have
written, but the data files they name do not exist (planning and GC never open them).
Segment descriptors are realistic: one row group with the statistics of a real lineitem
row group (16 columns)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import CaseResult, MiB, hardlink_copy, log

DAY_MS = 86_400_000


def template_segment(built_mv_base: Path) -> tuple[Any, dict[str, Any]]:
    """A one-row-group segment descriptor with real lineitem statistics, and the schema."""
    from mvtable.connector import Table
    from mvtable.lineage.actions import SegmentFile

    snap = Table(str(built_mv_base)).snapshot()
    rg = snap.visible_segments()[0].file.row_groups[0].to_row_group_info()
    seg = SegmentFile(
        id="template",
        path="data/template.parquet",
        num_rows=rg.num_rows,
        size_bytes=rg.total_byte_size + 4096,
        row_groups=(rg.model_copy(update={"first_row": 0}),),
    )
    return seg, snap.table_schema


def build_log_table(
    uri: Path,
    template: Any,
    schema_doc: dict[str, Any],
    *,
    segments: int,
    commits: int,
    checkpoint_interval: int,
    checkpoints: str = "all",
    dv_rounds: int = 0,
    dv_fraction: float = 0.1,
    start_ms: int | None = None,
) -> dict[str, Any]:
    """Version 0 creates the table; versions 1..``commits`` append ``segments`` segments
    evenly; then ``dv_rounds`` delete commits each rewrite the cumulative DVs of the same
    ``dv_fraction`` of the segments (one DV file per round, so each round supersedes the
    previous one's file). Checkpoints every ``checkpoint_interval`` versions (``"all"``) or
    only the newest one (``"last"``; planning reads only that one)."""
    import shutil

    from pyroaring import BitMap64

    from mvtable.lineage.actions import AddSegment, Commit, MetadataAction, SetDeletionVector
    from mvtable.lineage.checkpoint import checkpoint_bytes
    from mvtable.lineage.enums import Operation
    from mvtable.lineage.log import checkpoint_path, commit_path
    from mvtable.lineage.snapshot import Snapshot, apply_commit
    from mvtable.storage import open_file_io
    from mvtable.visibility import write_dvs

    shutil.rmtree(uri, ignore_errors=True)
    uri.mkdir(parents=True)
    io = open_file_io(str(uri))
    state = Snapshot()
    total_versions = commits + dv_rounds
    now = int(time.time() * 1000)
    start_ms = start_ms if start_ms is not None else now - (total_versions + 1) * 1000
    started = time.perf_counter()
    written_checkpoints = []

    def put(actions, operation: Operation) -> None:
        v = state.version + 1
        commit = Commit(
            version=v,
            read_version=v - 1,
            timestamp_ms=start_ms + v * 1000,
            operation=operation,
            writer="mvtable benchmarks",
            actions=tuple(actions),
        )
        apply_commit(state, commit)
        assert io.put_if_absent(commit_path(v), commit.to_json_bytes())
        last = v == total_versions
        if v % checkpoint_interval == 0 and (checkpoints == "all" or last or (v + checkpoint_interval > total_versions)):
            io.put_if_absent(checkpoint_path(v), checkpoint_bytes(state))
            written_checkpoints.append(v)

    put(
        [
            MetadataAction(
                table_id="bench" + os.urandom(8).hex(),
                table_schema=schema_doc,
                properties={"checkpointInterval": str(checkpoint_interval), "rowGroupRows": str(template.num_rows)},
            )
        ],
        Operation.CREATE,
    )
    ids: list[str] = []
    per = [segments // commits + (1 if i < segments % commits else 0) for i in range(commits)]
    for n in per:
        adds = []
        for _ in range(n):
            sid = f"{len(ids):08d}{os.urandom(12).hex()}"
            ids.append(sid)
            adds.append(AddSegment(segment=template.model_copy(update={"id": sid, "path": f"data/{sid}.parquet"})))
        put(adds, Operation.APPEND)
    window = ids[: max(1, int(len(ids) * dv_fraction))]
    rng = np.random.default_rng(7)
    deleted = {sid: BitMap64() for sid in window} if dv_rounds else {}
    for _ in range(dv_rounds):
        for sid in window:
            deleted[sid].update(rng.integers(0, template.num_rows, size=3, dtype=np.uint64).tolist())
        locs = write_dvs(io, deleted, inline_max_bytes=0)
        put([SetDeletionVector(segment_id=sid, dv=ref) for sid, ref in locs.items()], Operation.DELETE)
    # a few reader pins that expired long ago (GC removes them)
    from mvtable.visibility import pins

    for _ in range(5):
        pins.pin(io, state.version, ttl_s=60, owner="benchmarks")
    return {
        "segments": len(ids),
        "versions": state.version + 1,
        "checkpoints": written_checkpoints,
        "dv_rounds": dv_rounds,
        "dv_segments": len(window),
        "build_s": time.perf_counter() - started,
        "log_bytes": sum(p.stat().st_size for p in (uri / "_mvtable" / "log").iterdir()),
    }


def planning(built: Any, *, segments: int, commits: int, repeat: int) -> CaseResult:
    from mvtable.connector.scan import plan_scan
    from mvtable.lineage.log import CommitLog
    from mvtable.storage import open_file_io

    uri = built.root / "planning"
    info = build_log_table(
        uri, *template_segment(built.mv_base), segments=segments, commits=commits, checkpoint_interval=10, checkpoints="last"
    )
    log(
        f"  planning: built {info['segments']} segments / {info['versions']} commits in {info['build_s']:.1f} s "
        f"(log {info['log_bytes'] / MiB:.1f} MiB, checkpoint at {info['checkpoints']})"
    )

    def once() -> tuple[float, dict[str, float]]:
        t0 = time.perf_counter()
        log_ = CommitLog(open_file_io(str(uri)))
        listing = log_.listing()
        t1 = time.perf_counter()
        snap = log_.snapshot(listing=listing)
        t2 = time.perf_counter()
        plan = plan_scan(snap)
        t3 = time.perf_counter()
        assert len(plan.tasks) == segments, (len(plan.tasks), segments)
        return t3 - t0, {"listing_s": t1 - t0, "snapshot_s": t2 - t1, "plan_scan_s": t3 - t2}

    once()  # warm-up
    runs = [once() for _ in range(repeat)]
    times = [r[0] for r in runs]
    med = statistics.median(times)
    parts = {k: statistics.median(r[1][k] for r in runs) for k in runs[0][1]}
    log(
        f"    planning {med * 1000:.1f} ms (median of {repeat}); " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in parts.items())
    )
    return CaseResult(
        "planning",
        "metadata",
        f"plan a scan of {segments} segments / {commits} commits (CommitLog.snapshot + plan_scan)",
        med,
        "budget 200 ms",
        0.2,
        target=1.0,
        target_text="≤ 200 ms",
        systems={"mvtable": {"median_s": med, "runs_s": times}},
        details={**info, "breakdown_s": parts},
    )


def gc_memory(built: Any, *, segments: int, commits: int, checkpoint_interval: int, dv_rounds: int, repeat: int) -> CaseResult:
    uri = built.root / "gc_table"
    info = build_log_table(
        uri,
        *template_segment(built.mv_base),
        segments=segments,
        commits=commits,
        checkpoint_interval=checkpoint_interval,
        checkpoints="all",
        dv_rounds=dv_rounds,
        dv_fraction=0.1,
    )
    log(
        f"  gc: built {info['segments']} segments / {info['versions']} versions / {info['dv_rounds']} DV rounds in "
        f"{info['build_s']:.1f} s (log {info['log_bytes'] / MiB:.1f} MiB)"
    )
    now_ms = int(time.time() * 1000) + 30 * DAY_MS  # every version is past retention, every pin expired
    runs = []
    for i in range(repeat):  # no warm-up: the figure is memory, and one run at 100k takes minutes
        copy = hardlink_copy(uri, built.scratch / f"gc_{i}")
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.gc_probe", str(copy), str(now_ms)],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        if proc.returncode != 0:
            raise RuntimeError(f"gc probe failed: {proc.stderr[-2000:]}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        log(
            f"    gc run {i}: +{res['gc_peak_mib']:.1f} MiB over {res['baseline_mib']:.1f} MiB, {res['seconds']:.2f} s, "
            f"{res['report']['dv_files_deleted']} DV / {res['report']['log_files_deleted']} log files deleted"
        )
        runs.append(res)
        import shutil

        shutil.rmtree(copy, ignore_errors=True)
    peak = statistics.median(r["gc_peak_mib"] for r in runs)
    return CaseResult(
        "gc_peak_memory",
        "metadata",
        f"peak memory of a full-table GC over {info['segments']} segments",
        peak,
        "budget 256 MiB",
        256.0,
        unit="MiB",
        target=1.0,
        target_text="≤ 256 MiB",
        systems={"mvtable": {"median_mib": peak, "runs": runs}},
        details={
            **info,
            "gc_seconds": statistics.median(r["seconds"] for r in runs),
            "absolute_peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs),
        },
    )
