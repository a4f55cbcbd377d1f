"""The README is the first thing a newcomer runs: its links resolve and its tour runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_every_relative_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to its docs"
    missing = [link for link in local if not (REPO / link).exists()]
    assert missing == []


def test_the_python_tour_runs_as_written(tmp_path: Path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    tour = next(b for b in blocks if "Table.create" in b)
    table = tmp_path / "events"
    script = (
        tour.replace('"/tmp/events"', repr(str(table)))
        + "\nprint(t.to_arrow().num_rows, t.scan(version=1).to_arrow().num_rows)\n"
        + "print(sorted(days.to_arrow()['n'].to_pylist()), days.history()[-2].operation)\n"
    )
    assert str(table) in script, "the tour writes where the test says"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    # after the rollback: the two rows left by the delete; version 1 is the first append
    # the day the scoped push replaced is back after its rollback; the push was one consistent push
    assert out.stdout.split() == ["2", "3", "[4,", "5,", "6]", "CONSISTENT_PUSH"]


def test_the_transaction_example_runs_as_written(tmp_path: Path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    example = next(b for b in blocks if "mvtable.transaction()" in b)
    setup = (
        "import pyarrow as pa\n"
        "from mvtable import Table\n"
        "Table('/data/sales').append(pa.table({'id': [1]}))\n"
        "Table('/data/stores').append(pa.table({'store': [1]}))\n"
        "new_sales, all_stores = pa.table({'id': [2]}), pa.table({'store': [7]})\n"
    )
    check = (
        "\nprint(sorted(Table('/data/sales').to_arrow().column('id').to_pylist()),"
        " Table('/data/stores').to_arrow().column('store').to_pylist(), len(versions))\n"
    )
    script = (setup + example + check).replace("'/data/", f"'{tmp_path}/").replace('"/data/', f'"{tmp_path}/')
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "[1] [1] 2"  # committed together, then rolled back together
