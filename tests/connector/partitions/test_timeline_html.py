"""The timeline page: one rect per segment with its state and tooltip, nothing loaded from anywhere, big tables capped, and — in a real headless Chromium — every visible segment drawn, with a size, inside the plot and covered by nothing."""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.partitions.timeline import Timeline, TimelinePartition, TimelineSegment
from mvtable.connector.partitions.timeline_html import CONTENT_SECURITY_POLICY, timeline_html
from mvtable.errors import InvalidOptionError

from .conftest import events


# -- timelines built directly ------------------------------------------------------------
def segment(sid: str, day: int, state: str, added: int, replaced: int | None = None, rows: int = 100) -> TimelineSegment:
    return TimelineSegment(
        id=sid,
        partition=(day,),
        spec_id=1,
        state=state,  # type: ignore[arg-type]
        rows=rows,
        deleted_rows=0,
        size_bytes=rows * 10,
        added_version=added,
        replaced_version=replaced,
        removed_version=replaced if state == "removed" else None,
        lineage_entry=None,
        replaced_by=None,
    )


def partition(day: int, segments: list[TimelineSegment]) -> TimelinePartition:
    live = [s for s in segments if s.state == "visible"]
    label = f"2020-01-01+{day}"
    return TimelinePartition(
        label=f"ts_day={label}",
        spec_id=1,
        fields=("ts_day",),
        values=(day,),
        display_values=(label,),
        visible_segments=len(live),
        rows=sum(s.rows for s in live),
        deleted_rows=0,
        size_bytes=sum(s.size_bytes for s in live),
        overshadowed_segments=sum(s.state == "overshadowed" for s in segments),
        staged_segments=sum(s.state == "staged" for s in segments),
        newest_version=max(max(s.added_version, s.replaced_version or 0) for s in segments),
        segments=tuple(segments),
    )


def many_partitions(n: int) -> Timeline:
    """``n`` days, each changed its own way: appends, a push over them, a staged push, a rollback, a compaction."""
    parts = []
    for d in range(n):
        v = 2 * d + 1  # each day's commits at versions of their own
        kind = d % 5
        if kind == 0:  # three appends alive at once
            segs = [segment(f"d{d}-a{i}", d, "visible", v) for i in range(3)]
        elif kind == 1:  # two appends replaced by a push, then an append
            segs = [
                segment(f"d{d}-a0", d, "overshadowed", v, v + 1),
                segment(f"d{d}-a1", d, "overshadowed", v, v + 1),
                segment(f"d{d}-p", d, "visible", v + 1),
                segment(f"d{d}-a2", d, "visible", v + 1),
            ]
        elif kind == 2:  # a staged push beside what it will replace
            segs = [segment(f"d{d}-a0", d, "visible", v), segment(f"d{d}-s", d, "staged", v + 1)]
        elif kind == 3:  # a rolled-back push
            segs = [segment(f"d{d}-a0", d, "visible", v), segment(f"d{d}-r", d, "reverted", v, v + 1)]
        else:  # compacted: inputs removed, one output
            segs = [segment(f"d{d}-a{i}", d, "removed", v, v + 1) for i in range(4)] + [segment(f"d{d}-c", d, "visible", v + 1)]
        parts.append(partition(d, segs))
    return Timeline(version=2 * n + 1, partitions=tuple(parts))


class Rects(HTMLParser):
    """Every segment rect's attributes and tooltip, and every partition group's label."""

    def __init__(self) -> None:
        super().__init__()
        self.rects: list[dict[str, str]] = []
        self.partitions: list[str] = []
        self._title: dict[str, str] | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "rect" and "data-segment-id" in a:
            self.rects.append(a)
            self._title = a
        elif tag == "g" and "data-partition" in a:
            self.partitions.append(a["data-partition"])
        elif tag == "title" and self._title is not None:
            self._in_title = True

    def handle_data(self, data: str) -> None:
        if self._in_title and self._title is not None:
            self._title["tooltip"] = self._title.get("tooltip", "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag == "rect":
            self._title = None


def parse(page: str) -> Rects:
    parser = Rects()
    parser.feed(page)
    return parser


def test_every_segment_is_one_rect_with_its_state_and_a_tooltip():
    timeline = many_partitions(10)
    rects = parse(timeline_html(timeline, title="days")).rects
    segments = {s.id: s for s in timeline.segments()}
    assert sorted(r["data-segment-id"] for r in rects) == sorted(segments)
    for r in rects:
        s = segments[r["data-segment-id"]]
        assert r["data-state"] == s.state
        assert s.state in r["class"].split()
        assert f"segment {s.id}" in r["tooltip"] and f"rows: {s.rows}" in r["tooltip"]
        assert f"added v{s.added_version}" in r["tooltip"]
        if s.replaced_version is not None:
            assert f"hidden from v{s.replaced_version}" in r["tooltip"]
        assert float(r["width"]) > 0 and float(r["height"]) > 0


def test_segments_stand_between_their_versions_and_the_axes_are_labelled():
    timeline = many_partitions(5)  # versions 1..11: wide bands, no minimum height in play
    page = timeline_html(timeline, title="days")
    rects = {r["data-segment-id"]: r for r in parse(page).rects}

    def top(sid: str) -> float:
        return float(rects[sid]["y"])

    def bottom(sid: str) -> float:
        return float(rects[sid]["y"]) + float(rects[sid]["height"])

    plot_top = min(top(s) for s in rects)
    assert all(abs(top(s.id) - plot_top) < 0.01 for s in timeline.segments() if s.state in ("visible", "staged"))
    # day 1: the push's output and the later append stand on the two segments the push overshadowed
    assert rects["d1-a1"]["x"] != rects["d1-a0"]["x"]  # alive at the same versions: side by side
    assert {rects["d1-p"]["x"], rects["d1-a2"]["x"]} == {rects["d1-a0"]["x"], rects["d1-a1"]["x"]}
    assert abs(bottom("d1-p") - top("d1-a0")) < 0.01 and abs(bottom("d1-a2") - top("d1-a1")) < 0.01
    # an older version is lower on the page
    assert bottom("d0-a0") > bottom("d1-a0") > bottom("d2-a0")
    for p in timeline.partitions:
        assert f">{p.short_label}</text>" in page
    assert re.findall(r">v(\d+)</text>", page) == ["2", "4", "6", "8", "10"]  # versions 1..11: a tick every 2
    assert ">version</text>" in page and ">partition (time →)</text>" in page
    assert "v12" not in page  # the top of the plot is the newest version's band, not a version


def boxes(page: str) -> dict[str, tuple[float, float, float, float]]:
    """Segment id -> (left, top, right, bottom) as the page places it."""
    out = {}
    for r in parse(page).rects:
        x, y, w, h = (float(r[k]) for k in ("x", "y", "width", "height"))
        out[r["data-segment-id"]] = (x, y, x + w, y + h)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_no_segment_covers_another(seed):
    """Random lifetimes in one partition (short ones drawn taller than their versions): no two rects overlap."""
    rng = random.Random(seed)
    version = 400 if seed % 2 else 30_000  # few or many versions per pixel
    segs = []
    for i in range(300):
        added = rng.randrange(1, version)
        state = rng.choice(["visible", "staged", "overshadowed", "reverted", "removed"])
        replaced = None if state in ("visible", "staged") else rng.randrange(added + 1, version + 1)
        segs.append(segment(f"s{i}", 0, state, added, replaced))
    page = timeline_html(Timeline(version=version, partitions=(partition(0, segs),)))
    placed = sorted(boxes(page).items(), key=lambda item: item[1])
    assert len(placed) == 300
    for i, (a, (l1, t1, r1, b1)) in enumerate(placed):
        assert r1 > l1 and b1 > t1
        for b, (l2, t2, _, b2) in placed[i + 1 :]:
            if l2 >= r1 - 1e-6:
                break  # sorted by left edge: nothing further right overlaps
            assert b1 <= t2 + 0.015 or b2 <= t1 + 0.015, (a, b)  # the page rounds to 0.01 px


def test_a_partition_with_thousands_of_segments_side_by_side_stays_a_bounded_width():
    segs = [segment(f"s{i}", 0, "visible", i + 1) for i in range(5000)]
    page = timeline_html(Timeline(version=5001, partitions=(partition(0, segs),)))
    placed = boxes(page)
    assert len(placed) == 5000 and all(r > left and b > t for left, t, r, b in placed.values())
    assert max(r for _, _, r, _ in placed.values()) - min(left for left, _, _, _ in placed.values()) <= 4096 + 2
    assert "hold more segments side by side than the drawing has room for (the most: 5000" in page


def test_the_page_loads_nothing_and_forbids_every_load():
    page = timeline_html(many_partitions(12), title="days")
    assert page.startswith("<!DOCTYPE html>")
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page and "default-src 'none'" in CONTENT_SECURITY_POLICY
    for needle in ("<script", "src=", "href=", "url(", "@import", "http:", "https:", "<link", "@font-face"):
        assert needle not in page, needle


def test_a_big_table_draws_its_newest_partitions_and_says_how_many_were_left_out():
    timeline = many_partitions(400)
    page = timeline_html(timeline, title="days", max_partitions=150)
    drawn = parse(page)
    assert drawn.partitions == [p.label for p in timeline.partitions[-150:]]
    assert {r["data-segment-id"] for r in drawn.rects} == {s.id for p in timeline.partitions[-150:] for s in p.segments}
    hidden_visible = sum(p.visible_segments for p in timeline.partitions[:250])
    note = re.search(r'<p class="note">(.*?)</p>', page)
    assert note is not None
    text = html.unescape(note.group(1))
    assert "newest 150 of 400 partitions" in text
    assert "the 250 oldest" in text and f"{hidden_visible} visible segment(s)" in text
    assert '<p class="note">' not in timeline_html(timeline, title="days", max_partitions=400)


def test_labels_and_ids_are_escaped():
    seg = segment('x"><b>', 0, "visible", 1)
    part = partition(0, [seg])
    part = TimelinePartition(**{**part.__dict__, "label": "<script>alert(1)</script>", "display_values": ("<i>",)})
    page = timeline_html(Timeline(version=1, partitions=(part,)), title="<title>&")
    assert "<script>" not in page and "<i>" not in page and 'x"><b>' not in page
    rects = parse(page).rects
    assert [r["data-segment-id"] for r in rects] == ['x"><b>']
    assert "&lt;title&gt;&amp;" in page


def test_an_empty_table_is_a_page_too():
    page = timeline_html(Timeline(version=0, partitions=()), title="empty")
    assert parse(page).rects == [] and "0 partition(s)" in page


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, "10"])
def test_max_partitions_must_be_a_positive_integer(bad):
    with pytest.raises(InvalidOptionError, match="max_partitions"):
        timeline_html(many_partitions(2), max_partitions=bad)


# -- in a real browser -------------------------------------------------------------------
# Injected into the test's copy only (the page itself runs no script): after load, each segment
# rect is scrolled into view and measured; it counts as drawn when it has a size, lies inside the
# SVG and is the element at its own centre (no other rect covers it). The result goes into the
# DOM, which --dump-dom prints. The nonce lets this one script through the page's policy, whose
# other rules stay: every load is still refused, and the probe counts what loaded.
PROBE = """<script nonce="probe">
addEventListener("load", () => {
  const svg = document.querySelector("svg.timeline");
  const rects = [];
  for (const r of document.querySelectorAll("rect[data-segment-id]")) {
    r.scrollIntoView({block: "center", inline: "center"});
    const b = r.getBoundingClientRect(), s = svg.getBoundingClientRect();
    const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
    rects.push({id: r.dataset.segmentId, state: r.dataset.state, width: b.width, height: b.height,
                inside: b.left >= s.left - 0.01 && b.right <= s.right + 0.01 && b.top >= s.top - 0.01 && b.bottom <= s.bottom + 0.01,
                onTop: hit === r});
  }
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({rects, resources: performance.getEntriesByType("resource").length});
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "the timeline's browser test needs Debian's chromium: "
            "apt-get install -y --no-install-recommends chromium (make install-test does it as root)"
        )
    return path


def in_browser(page: str, tmp_path) -> dict:
    """What the probe measured of ``page`` in headless Chromium."""
    assert "default-src 'none'" in page
    probe_copy = page.replace("default-src 'none'", "default-src 'none'; script-src 'nonce-probe'", 1).replace(
        "</body>", PROBE + "</body>", 1
    )
    path = tmp_path / "timeline.html"
    path.write_text(probe_copy, encoding="utf-8")
    proc = subprocess.run(
        [
            chromium(),
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,1000",
            "--virtual-time-budget=20000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found is not None, (proc.stdout[-2000:], proc.stderr[-2000:])
    return json.loads(html.unescape(found.group(1)))


def assert_drawn(result: dict, timeline: Timeline, partitions: tuple[TimelinePartition, ...]) -> None:
    assert result["resources"] == 0
    rects = result["rects"]
    expected = {s.id for p in partitions for s in p.segments}
    assert sorted(r["id"] for r in rects) == sorted(expected)
    drawn_visible = {r["id"] for r in rects if r["state"] == "visible" and r["width"] > 0 and r["height"] > 0 and r["inside"]}
    assert drawn_visible == {s.id for p in partitions for s in p.segments if s.state == "visible"}
    for r in rects:  # every segment, visible or not, has a size, lies in the plot and is covered by nothing
        assert r["width"] > 0 and r["height"] > 0 and r["inside"] and r["onTop"], r


def test_every_segment_of_a_real_day_partitioned_tables_timeline_is_drawn_in_chromium(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=events(1).schema, partition_by=["day(ts)"])
    for i in range(3):
        t.append(events(8, start=i * 8, hours=3))  # days 1, 2 and 3 of January
    t.overwrite(events(8, start=100, hours=3), consistent_push=True)  # Jan 13-14, overshadowing days 1-3
    for i in range(3):
        t.append(events(2, start=200 + 2 * i, hours=1))  # three appends to Jan 9
    t.compact(min_input_files=2)  # merges them (removed) into one visible output of Jan 9
    t.overwrite(events(4, start=300, hours=6), consistent_push=True)  # Mar 16
    t.rollback(entry=t.lineage()[-1].id)  # reverted
    t.delete(pc.field("region") == "eu")
    t.overwrite(events(6, start=400, hours=4), consistent_push=True, publish=False)  # staged, Mar 7-8
    timeline = t.timeline()
    assert {s.state for s in timeline.segments()} == {"visible", "overshadowed", "staged", "reverted", "removed"}
    assert timeline.visible_segment_ids() == set(t.snapshot().visible_segment_ids())
    days = [f"2024-01-{d:02d}" for d in (1, 2, 3, 9, 13, 14)] + ["2024-03-07", "2024-03-08", "2024-03-16"]
    assert [p.short_label for p in timeline.partitions] == days and {p.spec_id for p in timeline.partitions} == {1}
    page = timeline_html(timeline, title=uri)
    assert parse(page).partitions == [p.label for p in timeline.partitions]
    result = in_browser(page, tmp_path)
    assert_drawn(result, timeline, timeline.partitions)


def test_a_capped_timeline_of_many_partitions_is_drawn_in_chromium(tmp_path):
    timeline = many_partitions(500)
    result = in_browser(timeline_html(timeline, title="days", max_partitions=120), tmp_path)
    assert_drawn(result, timeline, timeline.partitions[-120:])
