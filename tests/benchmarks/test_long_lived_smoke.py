"""``python -m benchmarks.long_lived --smoke``: the long-lived-table benchmark runs, and the
state it reports stays the size of the live table (it exits non-zero when it grew)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_long_lived_benchmark_smoke(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.long_lived", "--smoke", "--dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit() and len(line.split()) == 9]
    assert [int(row[0]) >= n for row, n in zip(lines, (200, 1000))] == [True, True]
    assert all(row[1] == row[2] for row in lines)  # segments held == live segments
    assert "open time" in out.stdout
