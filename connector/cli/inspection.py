"""``mvtable inspect``: segments, row groups, delete density, the lineage timeline and the live pins."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .output import EXIT_OK, as_text, fmt_compact, fmt_pct, fmt_size, fmt_time, open_table, print_json, stdout_console

if TYPE_CHECKING:  # rich is imported lazily
    from rich.console import JustifyMethod


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..describe import inspect_table
    from ..partitions.timeline import timeline_of
    from ..pin_admin import live_pins, now_ms, pin_record
    from .pins import print_pins

    table = open_table(args)
    snapshot = table.snapshot(args.version)
    info = inspect_table(table.commit_log, snapshot)
    # each segment's partition as people read it (ts_day=2024-01-05, region=eu), as `mvtable timeline` labels it
    labels = {s.id: p.label for p in timeline_of(snapshot).partitions for s in p.segments}
    for seg in info["segments"]:
        seg["partition_label"] = labels.get(seg["id"]) if seg["partition"] else None
    now = now_ms()
    info["pins"] = [pin_record(p, now_ms=now) for p in live_pins(table.io, now_ms=now)]
    if args.json:
        print_json([info])
        return EXIT_OK
    _render_inspect(info, row_groups=args.row_groups)
    print_pins(info["pins"])
    return EXIT_OK


def _segment_grid(title: str, segments: list[dict[str, Any]], totals: dict[str, Any] | None, *, partitioned: bool = False):
    """The segments as a table, with a partition column when ``partitioned`` or any segment has a partition."""
    from rich.table import Table as Grid

    grid = Grid(title=title, title_justify="left", show_footer=totals is not None)
    foot = totals or {}
    partitioned = partitioned or any(s.get("partition_label") for s in segments)
    partition_column: list[tuple[str, JustifyMethod, str]] = [("partition", "left", "")] if partitioned else []
    columns: list[tuple[str, JustifyMethod, str]] = [  # (local annotations are never evaluated)
        ("segment", "left", f"total ({foot.get('segments', 0)})"),
        ("status", "left", ""),
        *partition_column,
        ("rows", "right", str(foot.get("num_rows", ""))),
        ("row groups", "right", str(foot.get("row_groups", ""))),
        ("size", "right", fmt_size(foot.get("size_bytes", 0))),
        ("deleted", "right", str(foot.get("deleted_rows", ""))),
        ("delete density", "right", fmt_pct(foot.get("delete_density", 0.0))),
        ("live rows", "right", str(foot.get("live_rows", ""))),
        ("added", "right", ""),
        ("lineage entry", "left", ""),
    ]
    for name, justify, footer in columns:
        grid.add_column(name, justify=justify, footer=footer, no_wrap=True)
    for s in segments:
        grid.add_row(
            as_text(s["id"]),
            as_text(s["status"]),
            *([as_text(s.get("partition_label") or "-")] if partitioned else []),
            as_text(s["num_rows"]),
            as_text(len(s["row_groups"])),
            as_text(fmt_size(s["size_bytes"])),
            as_text(s["deleted_rows"]),
            as_text(fmt_pct(s["delete_density"])),
            as_text(s["live_rows"]),
            as_text(f"v{s['added_version']}"),
            as_text(s["lineage_entry"] or "-"),
        )
    return grid


def _render_inspect(info: dict[str, Any], *, row_groups: bool) -> None:
    from rich.table import Table as Grid
    from rich.tree import Tree

    from ..export.status import ExportStatus

    out = stdout_console()
    out.print(as_text(f"table {info['uri']}  version {info['version']}  ({fmt_time(info['timestamp'])})  id {info['table_id']}"))
    if info["schema"]:
        out.print(
            as_text(
                f"schema id {info.get('schema_id', 0)}, columns: "
                + ", ".join(f"{c['name']} {c['type']}" + (f" (id {c['id']})" if c.get("id") else "") for c in info["schema"])
            )
        )
    if info["primary_key"]:
        out.print(as_text("primary key: " + ", ".join(info["primary_key"])))
    if info["properties"]:
        out.print(as_text("properties: " + fmt_compact(info["properties"])))
    for e in info["exports"]:
        status = ExportStatus(**{k: e[k] for k in ("format", "folder", "version", "behind", "expired", "problem")})
        out.print(as_text(status.advice(info["uri"])), style=None if status.current else "yellow")
    out.print()
    visible = [s for s in info["segments"] if s["status"] == "visible"]
    retained = [s for s in info["segments"] if s["status"] != "visible"]
    partitioned = any(s.get("partition_label") for s in info["segments"])
    title = f"segments visible at version {info['version']}"
    out.print(_segment_grid(title, visible, info["totals"], partitioned=partitioned))
    if retained:
        out.print()
        title = "retained segments (not visible: staged, replaced or reverted)"
        out.print(_segment_grid(title, retained, info["retained"], partitioned=partitioned))
    if row_groups:
        out.print()
        grid = Grid(title="row groups", title_justify="left")
        widths: tuple[tuple[str, JustifyMethod], ...] = (
            ("segment", "left"),
            ("#", "right"),
            ("first row", "right"),
            ("rows", "right"),
            ("size", "right"),
        )
        for name, justify in widths:
            grid.add_column(name, justify=justify, no_wrap=True)
        for s in info["segments"]:
            for i, rg in enumerate(s["row_groups"]):
                grid.add_row(
                    as_text(s["id"]),
                    as_text(i),
                    as_text(rg["first_row"]),
                    as_text(rg["num_rows"]),
                    as_text(fmt_size(rg["total_byte_size"])),
                )
        out.print(grid)
    out.print()
    if not info["lineage"]:
        out.print(as_text("lineage: no entries"))
        return
    tree = Tree(as_text("lineage timeline (by start version)"))
    for e in info["lineage"]:
        node = tree.add(as_text(f"{e['id']}  {e['state']}  ({len(e['segments_from'])} segment(s) → {len(e['segments_to'])})"))
        for step in e["transitions"]:
            op = f"  {step['operation']}" if step.get("operation") else ""
            node.add(as_text(f"v{step['version']:<6} {step['state']:<12} {fmt_time(step['timestamp'])}{op}"))
    out.print(tree)
