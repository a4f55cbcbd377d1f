"""``mvtable timeline``: per partition, the segments of a version and the versions that added and replaced them."""

from __future__ import annotations

import argparse
from pathlib import Path

from .output import EXIT_OK, as_text, fmt_size, open_table, print_json, stdout_console


def cmd_timeline(args: argparse.Namespace) -> int:
    from ..partitions.timeline_html import timeline_html

    html_path = _html_path(args.html) if args.html is not None else None
    table = open_table(args)
    timeline = table.timeline(args.version)
    if html_path is not None:
        html_path.write_text(timeline_html(timeline, title=args.table, max_partitions=args.max_partitions), encoding="utf-8")
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
    if html_path is not None:
        out.print(as_text(f"wrote {args.html} (open it in a browser; it loads nothing from the network)"))
    return EXIT_OK


def _html_path(text: str) -> Path:
    """Where ``--html`` writes, checked before the table is read.

    Raises:
        InvalidOptionError: The path is a folder, or its folder does not exist."""
    from mvtable.errors import InvalidOptionError

    path = Path(text)
    if path.is_dir():
        raise InvalidOptionError(f"--html {text} is a folder; name the file to write, e.g. {path / 'timeline.html'}")
    if not path.parent.is_dir():
        raise InvalidOptionError(f"--html {text}: the folder {path.parent} does not exist; create it or write elsewhere")
    return path
