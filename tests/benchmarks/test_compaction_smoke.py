"""``python -m benchmarks.compaction --smoke``: every case runs at a tiny scale and the
answers check out (the benchmark raises on a wrong row count or checksum). Not a timed
test: missed targets do not fail it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RATIOS = {
    ("small appends", "scan_before_after"),
    ("small appends", "scan_after_vs_one_file"),
    ("small appends", "spark_scan_before_after"),
    ("worn segments", "scan_before_after"),
    ("worn segments", "compact_vs_pyarrow"),
}
PEERS = {("worn segments", "compact_vs_deltalake_cow_delete_and_optimize"), ("worn segments", "compact_vs_lance")}


@pytest.mark.spark
def test_compaction_benchmark_smoke(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.compaction", "--smoke", "--data-dir", str(tmp_path / "data")],
        cwd=REPO,
        env={**env, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    results = {}
    for line in proc.stdout.splitlines():
        for case in ("small appends", "worn segments"):
            if line.strip().startswith(case):
                rest = line.strip()[len(case) :].split()
                results[(case, rest[0])] = rest[-1] if not any(w.startswith("n/a") for w in rest) else "n/a: " + line

    for name in RATIOS:
        assert results.get(name, "").endswith("x") and float(results[name][:-1]) > 0, (name, results.get(name))
    for name in PEERS:  # a peer that cannot run says why
        assert results[name].endswith("x") or results[name].startswith("n/a:"), (name, results[name])
    assert results[("small appends", "segments_after")] == "1"
