"""The demo's story, run on the test session's Spark: every step it tells must happen."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from mvtable.connector import Table
from mvtable.connector.demo import _story

pytestmark = pytest.mark.spark


def test_the_demo_tells_what_happened(spark, tmp_path) -> None:
    out = io.StringIO()
    path = str(tmp_path / "orders")
    _story(spark, path, Console(file=out, width=400))
    text = out.getvalue()
    assert "data files untouched: True" in text
    assert re.search(r"writer process died with SIGKILL", text)
    assert re.search(r"reverted 2 tables in one call: 1300 orders again, stores named \['store 0', 'store 1'\]", text)
    # one day refreshed while the others stay, then rolled back
    assert "30 days of events in 30 day partitions" in text
    assert re.search(r"replaced only ts_day=2024-01-05: 1 segment\(s\) out.*negative amounts now: 24 ", text)
    assert re.search(r"COMPLETED → REVERTED; negative amounts now: 0;", text)
    assert "(the same ones: True)" in text
    assert Table.open(path).to_arrow().num_rows == 1300
    events = Table.open(path + "_events")
    assert events.partitions().num_rows == 30 and events.to_arrow().num_rows == 30 * 24
