"""``mvtable pins``: the reader pins that keep versions from GC and vacuum, and releasing the pin of a reader that is gone."""

from __future__ import annotations

import argparse

from .output import EXIT_OK, as_text, open_table, print_json, stdout_console


def cmd_pins(args: argparse.Namespace) -> int:
    from ..pin_admin import live_pins, now_ms, pin_record, release_pins

    table = open_table(args)
    now = now_ms()
    if args.release is not None:
        released = [pin_record(p, now_ms=now) for p in release_pins(table.io, args.release, now_ms=now)]
        if args.json:
            print_json(released)
            return EXIT_OK
        out = stdout_console()
        out.print(as_text(f"released {len(released)} pin(s):"))
        for r in released:
            out.print(as_text(f"  {r['id']}  {r['owner'] or '-'}  version {r['version']}"))
        return EXIT_OK
    records = [pin_record(p, now_ms=now) for p in live_pins(table.io, now_ms=now)]
    if args.json:
        print_json(records)
        return EXIT_OK
    print_pins(records)
    return EXIT_OK


def print_pins(records: list[dict], *, title: str = "live pins") -> None:
    """The pins as a grid (or one line when there are none)."""
    from rich.table import Table as Grid

    out = stdout_console()
    if not records:
        out.print(as_text(f"{title}: none (GC and vacuum are held back only by the retention window)"))
        return
    grid = Grid(title=as_text(f"{title} ({len(records)}): each keeps its version from GC and vacuum"), title_justify="left")
    for name in ("id", "owner", "version", "created", "expires"):
        grid.add_column(name, no_wrap=True, justify="right" if name == "version" else "left")
    for r in records:
        grid.add_row(
            as_text(r["id"]),
            as_text(r["owner"] or "-"),
            as_text(r["version"]),
            as_text(r["created"]),
            as_text(f"{r['expires']} (in {r['expires_in']})"),
        )
    out.print(grid)
    out.print(as_text("release the pins of a reader that is gone: mvtable pins URI --release OWNER (or a pin id)"))
