"""``python -m benchmarks.run --cases schema --smoke``: the schema-evolution case runs, its tables read the same
rows, and it reports a ratio against the table that never changed (no Spark, no peers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_schema_case_smoke(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.run",
            "--cases",
            "schema",
            "--smoke",
            "--peers",
            "",
            "--out",
            str(out),
            "--data-dir",
            str(tmp_path / "data"),
        ],  # fmt: skip
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert not doc["meta"]["errors"]
    case = doc["cases"]["schema_evolved_scan"]
    assert case["check"] == "ok" and case["details"] == {"segments": 21, "changes": 20}
    assert case["mvtable"] > 0 and case["baseline"] > 0 and case["ratio"] > 0
