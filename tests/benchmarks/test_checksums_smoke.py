"""The checksum benchmark's smoke mode (``Table.scan`` only, no Spark): both variants run
and read the same rows. Not a timed test: a missed target never fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_checksum_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "checksums.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    cmd = [sys.executable, "-m", "benchmarks.checksums", "--smoke", "--no-spark", "--data-dir", str(tmp_path), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [scan] = json.loads(out.read_text())["results"]
    assert scan["name"] == "table_scan" and scan["check"] == "ok"
    assert scan["checked_s"] > 0 and scan["unchecked_s"] > 0
    inside = scan["inside"]  # the check's own CPU time, measured inside the scans
    assert inside["unit"] == "CPU s" and 0 < inside["check"] < inside["total"]
    assert scan["judged_ratio"] == 1 + inside["cost"]
