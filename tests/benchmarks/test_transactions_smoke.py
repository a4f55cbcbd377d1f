"""The transaction benchmarks' smoke mode: both cases run and answer correctly. Not a timed test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_transaction_benchmarks_smoke(tmp_path: Path) -> None:
    out = tmp_path / "transactions.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    cmd = [sys.executable, "-m", "benchmarks.transactions", "--smoke", "--data-dir", str(tmp_path / "d"), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["commit"]["rows"] == 20_000 and result["commit"]["ratio"] > 0
    assert result["read"]["history"] == 10 and result["read"]["consistent_read_s"] > 0
