"""``mvtable inspect`` on a partitioned table: each segment's partition, for people and in JSON."""

from __future__ import annotations

from mvtable.connector import Table

from ..test_cli import run, run_json
from .conftest import START, events


def test_inspect_shows_each_segments_partition(tmp_path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=events(1).schema, partition_by=["day(ts)", "region"])
    t.append(events(12, hours=4))  # 2 days x 3 regions
    t.overwrite(events(3, hours=4), consistent_push=True)  # day 1 again; the old segments stay, replaced
    human = run("inspect", uri)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    header = next(line for line in lines if "segment" in line and "status" in line)
    assert "partition" in header
    by_segment = {s.id: s for s in t.snapshot().segments.values()}
    shown = [line for line in lines if any(sid in line for sid in by_segment)]
    assert len(shown) == 9  # 3 visible, 6 replaced
    for label in ("ts_day=2024-01-01, region=eu", "ts_day=2024-01-02, region=apac"):
        assert any(label in line for line in shown), label
    [info] = run_json("inspect", uri)
    segs = {s["id"]: s for s in info["segments"]}
    assert set(segs) == set(by_segment)
    for sid, s in segs.items():
        seg = by_segment[sid]
        assert s["spec_id"] == 1 and s["partition"] == list(seg.file.partition)
        assert (
            s["partition_label"]
            == f"ts_day={(START.date().fromordinal(719163 + seg.file.partition[0])).isoformat()}, region={seg.file.partition[1]}"
        )
    replaced = [s for s in info["segments"] if s["status"] == "replaced"]
    assert sorted(s["partition_label"] for s in replaced) == [
        f"ts_day=2024-01-0{d}, region={r}" for d in (1, 2) for r in ("apac", "eu", "us")
    ]


def test_an_unpartitioned_table_has_no_partition_column(tmp_path) -> None:
    uri = str(tmp_path / "u")
    Table.create(uri, schema=events(1).schema).append(events(5))
    human = run("inspect", uri)
    header = next(line for line in human.stdout.splitlines() if "segment" in line and "status" in line)
    assert "partition" not in header
    [info] = run_json("inspect", uri)
    assert [(s["spec_id"], s["partition"], s["partition_label"]) for s in info["segments"]] == [(None, None, None)]
