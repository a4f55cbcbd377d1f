"""The timeline of a table on a real S3 server on 127.0.0.1: from Python and from the command line."""

from __future__ import annotations

import json

import pytest

from mvtable.connector import Table

from ..conftest import orders
from ..test_cli import run

pytestmark = pytest.mark.s3


def test_timeline_of_a_table_on_s3(moto_s3, tmp_path):
    uri, opts = moto_s3.url("tables/t"), moto_s3.storage_options()
    t = Table.create(uri, schema=orders(0, 1).schema, storage_options=opts)
    t.append(orders(0, 100))
    t.overwrite(orders(500, 10), consistent_push=True)
    t.overwrite(orders(600, 10), consistent_push=True, publish=False)
    timeline = Table.open(uri, storage_options=opts).timeline()
    assert sorted(s.state for s in timeline.segments()) == ["overshadowed", "staged", "visible"]
    assert timeline.visible_segment_ids() == set(t.snapshot().visible_segment_ids())

    page = tmp_path / "t.html"
    options = ["-o", f"key={moto_s3.key}", "-o", f"secret={moto_s3.secret}", "-o", f"endpoint_url={moto_s3.endpoint_url}"]
    proc = run("timeline", uri, *options, "--json", "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    [doc] = json.loads(proc.stdout)
    assert doc["version"] == t.version
    assert {s["id"] for s in doc["partitions"][0]["segments"] if s["state"] == "visible"} == timeline.visible_segment_ids()
    assert page.read_text(encoding="utf-8").count('data-state="staged"') == 1
