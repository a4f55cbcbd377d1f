"""A timeline drawn as one self-contained HTML page, as Druid's console draws a datasource's segments.

Partitions run along the x axis in time order, versions upward; each segment is a rectangle
from the version that added it to the version from which readers no longer saw it (the top of
the plot while it is visible or staged), coloured by its state. Segments of one partition that
were alive at the same versions sit side by side in lanes, so none covers another.

The page is inline SVG and inline CSS only: no script, font, image or style sheet is loaded
(its Content-Security-Policy forbids every load), so it opens offline, from an e-mail or a
CI artifact, and a hover shows each segment's details (SVG ``<title>``). Each segment's
``rect`` carries ``data-segment-id`` and ``data-state`` for tools and tests. A table of many
partitions is drawn up to ``max_partitions`` (the newest); the page says how many were left out.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from mvtable import checks

from ..sizes import size_text
from .timeline import STATES, SegmentStateName, Timeline, TimelinePartition, TimelineSegment, state_counts

__all__ = ["CONTENT_SECURITY_POLICY", "DEFAULT_MAX_PARTITIONS", "timeline_html"]

DEFAULT_MAX_PARTITIONS = 200
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'"

# geometry, in CSS pixels
_PLOT_HEIGHT = 360
_LEFT, _TOP, _RIGHT = 70, 16, 24
_PLOT_WIDTH = 960  # the width the columns share before each gets its minimum
_MIN_COLUMN, _MAX_COLUMN = 10.0, 56.0
_MIN_LANE = 4.0  # a lane (one of several segments alive at once) is this wide …
_MAX_SPREAD = 4096.0  # … unless a partition has so many side by side that they would exceed this
_MIN_HEIGHT = 2.0  # a segment alive for a sliver of the version axis still shows
_GAP = 1.0  # between columns
_LABEL_CHARS = 32
_LABEL_SPACING = 16.0  # between axis labels

_COLOURS: dict[SegmentStateName, tuple[str, str]] = {  # fill, outline
    "visible": ("#2f7ed8", "#1d5a9e"),
    "overshadowed": ("#b7bec9", "#8a93a1"),
    "staged": ("#f5b83d", "#b7791f"),
    "reverted": ("#e8827c", "#b3423b"),
    "removed": ("#ececec", "#9e9e9e"),
}
_MEANING: dict[SegmentStateName, str] = {
    "visible": "read at this version",
    "overshadowed": "replaced by a published push (kept for rollback)",
    "staged": "written by a push not yet published",
    "reverted": "written by a push that was rolled back",
    "removed": "taken out by compaction, an overwrite, a delete or retention",
}


@dataclass(frozen=True)
class _Column:
    partition: TimelinePartition
    x: float
    width: float
    lanes: dict[str, int]  # segment id -> lane
    lane_count: int


def timeline_html(timeline: Timeline, *, title: str = "mvtable timeline", max_partitions: int = DEFAULT_MAX_PARTITIONS) -> str:
    """One HTML page that draws ``timeline``: partitions along time, versions upward.

    Only the newest ``max_partitions`` partitions are drawn (a page of thousands of columns
    helps nobody); the page says how many older ones were left out and how many visible
    segments they hold.

    Raises:
        InvalidOptionError: ``max_partitions`` is not a positive integer."""
    max_partitions = checks.count(max_partitions, name="max_partitions")
    shown = timeline.partitions[-max_partitions:]
    left_out = timeline.partitions[: len(timeline.partitions) - len(shown)]
    top = timeline.version + 1
    drawn = [s for p in shown for s in p.segments]
    bottom = min((s.added_version for s in drawn), default=max(timeline.version, 0))
    bottom = min(bottom, top - 1)
    scale = _PLOT_HEIGHT / (top - bottom)  # pixels per version
    columns = _layout(shown, min_span=_MIN_HEIGHT / scale)
    plot_width = columns[-1].x + columns[-1].width - _LEFT if columns else _PLOT_WIDTH / 4
    label_room = 14 + 6.2 * min(_LABEL_CHARS, max((len(c.partition.short_label) for c in columns), default=4)) * 0.82
    width = _LEFT + plot_width + _RIGHT
    height = _TOP + _PLOT_HEIGHT + label_room + 22

    def y_of(version: float) -> float:
        return _TOP + (top - version) * scale

    parts: list[str] = [
        f'<svg class="timeline" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.1f} {height:.1f}" '
        f'role="img" aria-label="segment timeline of {escape(title)}">'
    ]
    parts += _y_axis(bottom, top, y_of, plot_width)
    for column in columns:
        parts += _column(column, y_of, top)
    parts += _x_axis(columns, plot_width, label_room)
    parts.append("</svg>")
    crowded = [c for c in columns if (c.width - 2 * _GAP) / c.lane_count < 2]
    return _page(title, timeline, drawn, left_out, crowded, "".join(parts))


def _layout(partitions: Sequence[TimelinePartition], *, min_span: float) -> list[_Column]:
    base = min(_MAX_COLUMN, max(_MIN_COLUMN, _PLOT_WIDTH / max(len(partitions), 1)))
    out: list[_Column] = []
    x = float(_LEFT)
    for p in partitions:
        lanes, count = _lanes(p.segments, min_span=min_span)
        width = max(base, min(count * _MIN_LANE, _MAX_SPREAD) + 2 * _GAP)
        out.append(_Column(p, x, width, lanes, count))
        x += width
    return out


def _lanes(segments: Sequence[TimelineSegment], *, min_span: float) -> tuple[dict[str, int], int]:
    """Lane of each segment: the lowest lane free when it starts (interval colouring, with heaps for big partitions).

    A lane is free once its last segment was hidden. A segment alive for less than
    ``min_span`` versions is drawn ``min_span`` tall, so it holds its lane that long."""
    busy: list[tuple[float, int]] = []  # (version the lane frees at, lane), for segments that end
    free: list[int] = []  # lanes free again, lowest first
    count = 0
    out: dict[str, int] = {}
    for s in sorted(segments, key=lambda s: (s.added_version, s.id)):
        while busy and busy[0][0] <= s.added_version + 1e-9:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        if s.replaced_version is not None:  # a visible or staged segment holds its lane to the top
            heapq.heappush(busy, (max(float(s.replaced_version), s.added_version + min_span), lane))
        out[s.id] = lane
    return out, max(count, 1)


def _column(column: _Column, y_of: Callable[[float], float], top: int) -> list[str]:
    p = column.partition
    plot_bottom = _TOP + _PLOT_HEIGHT
    summary = (
        f"{p.label}\n{p.visible_segments} visible segment(s), {p.rows} rows ({p.deleted_rows} deleted), {size_text(p.size_bytes)}\n"
        f"{p.overshadowed_segments} overshadowed, {p.staged_segments} staged; last changed at v{p.newest_version}"
    )
    parts = [
        f'<g class="partition" data-partition="{escape(p.label)}">',
        f'<rect class="column" x="{column.x:.2f}" y="{_TOP}" width="{column.width:.2f}" height="{_PLOT_HEIGHT}">'
        f"<title>{escape(summary)}</title></rect>",
    ]
    inner = column.width - 2 * _GAP
    lane_width = inner / column.lane_count
    for s in p.segments:
        start = s.added_version
        end = s.replaced_version if s.replaced_version is not None else top
        y_bottom = min(y_of(start), plot_bottom)
        height = max(y_bottom - y_of(max(end, start)), _MIN_HEIGHT)
        x = column.x + _GAP + column.lanes[s.id] * lane_width
        parts.append(
            f'<rect class="seg {s.state}" data-segment-id="{escape(s.id)}" data-state="{s.state}" '
            f'x="{x:.3f}" y="{y_bottom - height:.2f}" width="{max(lane_width - 1, lane_width * 0.6):.3f}" height="{height:.2f}">'
            f"<title>{escape(_tooltip(s, p))}</title></rect>"
        )
    parts.append("</g>")
    return parts


def _tooltip(s: TimelineSegment, p: TimelinePartition) -> str:
    if s.replaced_version is None:
        versions = f"added v{s.added_version}, {'visible' if s.state == 'visible' else 'not yet published'}"
    else:
        versions = f"added v{s.added_version}, hidden from v{s.replaced_version}"
        if s.removed_version is not None and s.removed_version != s.replaced_version:
            versions += f", removed v{s.removed_version}"
    lines = [
        f"segment {s.id}",
        f"partition {p.label}",
        f"state: {s.state}",
        f"rows: {s.rows} ({s.deleted_rows} deleted), {size_text(s.size_bytes)}",
        versions,
    ]
    if s.lineage_entry:
        lines.append(f"added by push {s.lineage_entry}")
    if s.replaced_by:
        lines.append(f"{'reverted' if s.state == 'reverted' else 'replaced'} by {s.replaced_by}")
    return "\n".join(lines)


def _ticks(bottom: int, top: int) -> list[int]:
    span = max(top - bottom, 1)
    raw = span / 8
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(bottom / step) * step
    return list(range(int(first), top + 1, int(step)))


def _y_axis(bottom: int, top: int, y_of: Callable[[float], float], plot_width: float) -> list[str]:
    """Version ``v`` is the band from ``v`` to ``v + 1``: its line at the bottom, its label in the middle."""
    parts = ['<g class="axis y">']
    for v in _ticks(bottom, top - 1):
        y = y_of(v)
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{_LEFT + plot_width:.2f}" y1="{y:.2f}" y2="{y:.2f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{min(y_of(v + 0.5), y - 2) + 4:.2f}" text-anchor="end">v{v}</text>')
    mid = _TOP + _PLOT_HEIGHT / 2
    parts.append(f'<text class="title" transform="translate(16 {mid:.1f}) rotate(-90)" text-anchor="middle">version</text>')
    parts.append(f'<line class="frame" x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + _PLOT_HEIGHT}"/>')
    parts.append("</g>")
    return parts


def _x_axis(columns: Sequence[_Column], plot_width: float, label_room: float) -> list[str]:
    base = _TOP + _PLOT_HEIGHT
    parts = ['<g class="axis x">', f'<line class="frame" x1="{_LEFT}" x2="{_LEFT + plot_width:.2f}" y1="{base}" y2="{base}"/>']
    last = -math.inf
    for c in columns:
        centre = c.x + c.width / 2
        if centre - last < _LABEL_SPACING:
            continue  # crowded: every other label is enough to read the axis
        last = centre
        text = c.partition.short_label
        if len(text) > _LABEL_CHARS:
            text = text[: _LABEL_CHARS - 1] + "…"
        parts.append(
            f'<text transform="translate({centre + 4:.2f} {base + 10}) rotate(-55)" text-anchor="end">'
            f"<title>{escape(c.partition.label)}</title>{escape(text)}</text>"
        )
    parts.append(
        f'<text class="title" x="{_LEFT + plot_width / 2:.1f}" y="{base + label_room + 14:.1f}" text-anchor="middle">'
        "partition (time →)</text>"
    )
    parts.append("</g>")
    return parts


def _page(
    title: str,
    timeline: Timeline,
    drawn: Sequence[TimelineSegment],
    left_out: Sequence[TimelinePartition],
    crowded: Sequence[_Column],
    svg: str,
) -> str:
    everything = state_counts(timeline.segments())
    shown = state_counts(drawn)
    legend = "".join(
        f'<li><svg width="14" height="14" aria-hidden="true"><rect class="seg {state}" x="1" y="1" width="12" height="12"/></svg>'
        f"<b>{state}</b> {shown[state]} <span>— {escape(_MEANING[state])}</span></li>"
        for state in STATES
    )
    summary = (
        f"version {timeline.version} · {len(timeline.partitions)} partition(s) · {sum(everything.values())} segment(s): "
        + ", ".join(f"{everything[s]} {s}" for s in STATES if everything[s])
    )
    note = ""
    if left_out:
        hidden_visible = sum(p.visible_segments for p in left_out)
        note = (
            f'<p class="note">Drawn: the newest {len(timeline.partitions) - len(left_out)} of {len(timeline.partitions)} partitions. '
            f"Left out: the {len(left_out)} oldest ({left_out[0].short_label} … {left_out[-1].short_label}), "
            f"holding {hidden_visible} visible segment(s); raise max_partitions to draw them.</p>"
        )
    if crowded:
        most = max(crowded, key=lambda c: c.lane_count)
        note += (
            f'<p class="note">{len(crowded)} partition(s) hold more segments side by side than the drawing has room for '
            f"(the most: {most.lane_count} in {escape(most.partition.short_label)}); they are drawn thinner than 2 pixels. "
            "Compaction merges small segments.</p>"
        )
    style = "".join(f".seg.{s}{{fill:{fill};stroke:{line}}}" for s, (fill, line) in _COLOURS.items())
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} — timeline</title>"
        f"<style>{_CSS}{style}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="summary">{escape(summary)}</p>{note}'
        f'<ul class="legend">{legend}</ul>'
        f'<div class="plot">{svg}</div>'
        '<p class="hint">Hover a segment for its id, rows and versions. Segments of one partition alive at the same '
        "versions stand side by side.</p>"
        "</body></html>\n"
    )


_CSS = (
    "body{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:16px;color:#222;background:#fff}"
    "h1{font-size:17px;margin:0 0 4px}p{margin:4px 0}.note{color:#8a4b00}.hint{color:#666}"
    ".legend{list-style:none;padding:0;margin:8px 0;display:flex;flex-wrap:wrap;gap:4px 18px}"
    ".legend li{display:flex;align-items:center;gap:5px}.legend span{color:#666}"
    ".plot{overflow-x:auto;border:1px solid #ddd}"
    "svg.timeline text{font-size:11px;fill:#333}svg.timeline .title{font-size:12px;fill:#555}"
    ".grid{stroke:#eee}.frame{stroke:#888}"
    ".column{fill:#fafafa}.partition:nth-child(even) .column{fill:#f3f3f3}"
    ".seg{stroke-width:1}.seg.staged{stroke-dasharray:3 2}.seg.removed{stroke-dasharray:2 2}"
    ".seg:hover{stroke:#000;stroke-width:2}"
)
