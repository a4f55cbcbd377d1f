"""The benchmark harness's smoke mode: every case runs at a tiny scale and answers
correctly. Not a timed test — missed targets do not fail it; errors and wrong answers do.

It starts its own Spark (``local[2]``) in the subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Every case the harness reports, and which of them compare against a peer (a peer that
# cannot do a case is recorded as "n/a: reason" rather than failing).
EXPECTED = {
    "table_scan",
    "table_scan_del10",
    "delete_1pct",
    "consistent_push",
    "append_latency",
    "append_latency_os",
    "planning",
    "gc_peak_memory",
    "spark_one_column",
    "spark_one_column_del10",
    "spark_one_column_del10_vs_nodel",
    "spark_one_column_ingest_floor",
    "spark_one_column_python_del10",
    "spark_full_row",
    "spark_full_row_del10",
    "spark_full_row_del10_vs_nodel",
    "spark_full_row_ingest_floor",
    "spark_full_row_python_del10",
    "spark_filter",
    "spark_filter_del10",
    "spark_filter_no_pushdown",
    "spark_delete_1pct",
    "duckdb_to_reader_del10",
    "duckdb_to_duckdb_del10",
    "export_bytes_iceberg",
    "export_bytes_delta",
    "pyiceberg_export_del10",
    "schema_evolved_scan",
    *(
        f"tpch_{q}_{way}"
        for q in ("q1", "q3", "q6", "q14")
        for way in ("native_view", "using_view", "python_view", "expression_mask", "compacted_view", "predicate_mask")
    ),
}
PEER_CASES = {
    f"{case}_vs_{peer}"
    for case in ("table_scan_del10", "delete_1pct", "consistent_push", "append_latency", "append_latency_os")
    for peer in ("deltalake", "pyiceberg", "lance")
}


@pytest.mark.spark
def test_smoke_mode_runs_every_case(tmp_path: Path) -> None:
    # the test extra installs pyspark, tpcgen-cli and the peers: a missing one is a failure
    tpcgen = shutil.which("tpcgen-cli") or str(Path(sys.executable).with_name("tpcgen-cli"))
    assert Path(tpcgen).exists(), "tpcgen-cli is not installed: pip install -e '.[test]'"
    out = tmp_path / "smoke.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "SPARK_HOME")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--smoke", "--out", str(out), "--data-dir", str(tmp_path / "data")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (
        f"smoke run failed (exit {proc.returncode})\n--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    )
    doc = json.loads(out.read_text())
    assert not doc["meta"]["errors"]
    cases = doc["cases"]
    missing = (EXPECTED | PEER_CASES) - set(cases)
    assert not missing, f"cases missing from the JSON: {sorted(missing)}"
    for name, case in cases.items():
        assert case["check"] == "ok", f"{name}: wrong answer: {case['check']}"
        if name == "gc_peak_memory":  # MiB over the baseline: tiny at smoke scale, may round to 0
            assert case["mvtable"] is not None and case["mvtable"] >= 0 and case["baseline"] == 256.0
            continue
        assert case["mvtable"] is not None and case["mvtable"] > 0, f"{name}: no mvtable number"
        if name in PEER_CASES and case["ratio"] is None:
            assert str(case["details"].get("na", "")).startswith("n/a:"), f"{name}: no ratio and no reason"
            continue
        assert case["baseline"] is not None and case["baseline"] > 0, f"{name}: no baseline number"
        assert case["ratio"] is not None and case["ratio"] > 0, f"{name}: no ratio"
        assert case["status"] in ("met", "MISSED", "info"), f"{name}: status {case['status']}"
    dv = doc["metrics"]["dv_bytes"]
    for key in ("random_1pct", "random_10pct", "predicate_10pct"):
        assert dv[key]["deleted_rows"] > 0 and dv[key]["bytes_per_deleted_row"] > 0
