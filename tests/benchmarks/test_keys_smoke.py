"""The key benchmarks' smoke mode: every system upserts and answers correctly, keyed appends
stay duplicate-free. Not a timed test: a missed target never fails it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_key_benchmarks_smoke(tmp_path: Path) -> None:
    out = tmp_path / "keys.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    cmd = [sys.executable, "-m", "benchmarks.keys", "--smoke", "--data-dir", str(tmp_path), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    systems = result["upsert"]["systems"]
    assert set(systems) == {"mvtable", "deltalake", "pyiceberg", "lance"}
    for name, s in systems.items():  # the peers are test dependencies: each must run and agree
        assert s.get("ok") is True, (name, s)
    assert systems["mvtable"]["updated"] + systems["mvtable"]["inserted"] == result["upsert"]["changes"]
    assert [(r["kind"], r["ok"]) for r in result["append"]] == [("in_range", True), ("above", True)] * 3
