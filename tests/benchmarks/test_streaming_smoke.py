"""The streaming benchmarks' smoke mode: every case runs and answers correctly (sinks wrote
every row once, the change feed holds exactly the deleted rows, each commit reached the
stream). Not a timed test: a missed target never fails it. Starts its own Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.spark
def test_streaming_benchmarks_smoke(tmp_path: Path) -> None:
    out = tmp_path / "streaming.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *sys.path])
    cmd = [sys.executable, "-m", "benchmarks.streaming", "--smoke", "--data-dir", str(tmp_path), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["errors"] == []
    cases = {r["case"]: r for r in result["results"]}
    assert set(cases) == {
        "change_feed_1pct_clustered",
        "change_feed_1pct_scattered",
        "sink_2000_rows",
        "sink_20000_rows",
        "source_latency",
    }
    assert all(r["ratio_time"] > 0 for name, r in cases.items() if name.startswith("sink_"))
    assert len(cases["source_latency"]["mvtable_all_s"]) == 3
