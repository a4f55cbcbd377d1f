"""``python -m benchmarks.partitions --smoke``: every case runs at a tiny scale, every system's replace
of one day answers right, the mvtable replace opens no data file of another day (traced with
``strace``), and the month query answers as Spark on hive-partitioned Parquet. Not a timed test:
a missed target never fails it. Starts its own Spark in the subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEERS = ("deltalake", "pyiceberg", "lance")


@pytest.mark.spark
def test_partition_benchmarks_smoke(tmp_path: Path) -> None:
    assert shutil.which("strace"), "the benchmark traces the replace's file opens with strace: apt-get install strace"
    out = tmp_path / "partitions.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *sys.path])
    cmd = [sys.executable, "-m", "benchmarks.partitions", "--smoke", "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert doc["meta"]["errors"] == []
    cases = doc["cases"]
    expected = {f"replace_day_vs_{p}" for p in PEERS} | {
        "replace_day_other_days_read",
        "month_query_create_view_filters",
        "month_query_create_view_where_only",
        "planning_365_partitions",
    }
    assert set(cases) == expected
    for name, case in cases.items():  # the peers are test dependencies: each must run and answer right
        assert case["check"] == "ok", (name, case["check"])
        assert case["mvtable"] is not None and case["baseline"], (name, case)
    for p in PEERS:
        assert cases[f"replace_day_vs_{p}"]["systems"][p]["median_s"] > 0
    assert cases["planning_365_partitions"]["details"]["tasks"] == 1
    opened = cases["replace_day_other_days_read"]["details"]["files_opened"]
    mv = opened["mvtable"]
    assert mv["files_of_other_days"] > 300  # one segment per day, the 365 days of 1995 (the smoke's --ship-dates)
    assert mv["files_of_other_days_read"] == 0 and cases["replace_day_other_days_read"]["mvtable"] == 0
    assert mv["files_of_the_day_read"] == 0  # aligned to partitions: metadata only
    assert opened["lance"]["files_of_the_day_read"] >= 1  # the trace sees reads: Lance's delete reads the day's fragment
    assert doc["meta"]["build"]["pyiceberg_writable_transforms"]["day"] == "ok"
