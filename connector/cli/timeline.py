"""``mvtable timeline``: per partition, the segments of a version and the versions that added and replaced them."""

from __future__ import annotations

import argparse
from pathlib import Path

from .output import EXIT_OK, as_text, fmt_size, open_table, print_json, stdout_console


def cmd_timeline(args: argparse.Namespace) -> int:
    from ..partitions.timeline_html import timeline_html

    table = open_table(args)
    timeline = table.timeline(args.version)
    if args.html is not None:
        page = timeline_html(timeline, title=args.table, max_partitions=args.max_partitions)
        Path(args.html).write_text(page, encoding="utf-8")
    if args.json:
        print_json([timeline])
        return EXIT_OK
    from rich.table import Table as Grid

    grid = Grid(title=as_text(f"timeline of {args.table} at version {timeline.version}"), title_justify="left")
    for name in ("partition", "visible segments", "rows", "deleted", "size", "overshadowed", "staged", "newest version"):
        grid.add_column(name, justify="left" if name == "partition" else "right", no_wrap=True)
    for p in timeline.partitions:
        grid.add_row(
            as_text(p.label),
            as_text(p.visible_segments),
            as_text(p.rows),
            as_text(p.deleted_rows),
            as_text(fmt_size(p.size_bytes)),
            as_text(p.overshadowed_segments),
            as_text(p.staged_segments),
            as_text(f"v{p.newest_version}"),
        )
    out = stdout_console()
    out.print(grid)
    if args.html is not None:
        out.print(as_text(f"wrote {args.html} (open it in a browser; it loads nothing from the network)"))
    return EXIT_OK
